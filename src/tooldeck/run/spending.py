"""The run's token and cost limits (``Limits.max_*_tokens``, ``max_cost_usd``): when a run's
usage has reached one, it sends no more requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tooldeck.errors import ErrorCode, LimitExceeded
from tooldeck.messages import ToolResult, Usage
from tooldeck.results import StopReason


class _SpendingFields(Protocol):
    @property
    def max_input_tokens(self) -> int | None: ...
    @property
    def max_output_tokens(self) -> int | None: ...
    @property
    def max_total_tokens(self) -> int | None: ...
    @property
    def max_cost_usd(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class SpendingLimits:
    """The token and cost limits of one run (made once per run, only when one is set)."""

    tokens: tuple[tuple[str, int], ...]
    """(the limit's name, its value), for each token limit set."""
    max_cost_usd: float | None

    def reached(self, usage: Usage) -> LimitExceeded | None:
        """The limit ``usage`` has reached, if any."""
        for name, limit in self.tokens:
            spent = _tokens(name, usage)
            if spent >= limit:
                return LimitExceeded(
                    f"the run spent {spent} {name[4:].replace('_', ' ')} ({name}={limit})",
                    StopReason.MAX_TOKENS,
                )
        limit_usd = self.max_cost_usd
        if limit_usd is None:
            return None
        if usage.cost_usd is None:
            return LimitExceeded(
                f"a response's cost is unknown, so max_cost_usd={limit_usd} cannot be kept: "
                "give the model's prices (ModelSettings(prices=ModelPrices(...)))",
                StopReason.MAX_COST,
            )
        if usage.cost_usd >= limit_usd:
            return LimitExceeded(
                f"the run spent ${usage.cost_usd:.6f} (max_cost_usd={limit_usd})",
                StopReason.MAX_COST,
            )
        return None


def spending_limits(limits: _SpendingFields) -> SpendingLimits | None:
    """The spending limits of ``limits``; None when none is set."""
    tokens = tuple(
        (name, value)
        for name, value in (
            ("max_input_tokens", limits.max_input_tokens),
            ("max_output_tokens", limits.max_output_tokens),
            ("max_total_tokens", limits.max_total_tokens),
        )
        if value is not None
    )
    if not tokens and limits.max_cost_usd is None:
        return None
    return SpendingLimits(tokens, limits.max_cost_usd)


def _tokens(name: str, usage: Usage) -> int:
    if name == "max_input_tokens":
        return usage.input_tokens
    if name == "max_output_tokens":
        return usage.output_tokens
    return usage.total_tokens


def not_run(stop: LimitExceeded) -> ToolResult:
    """What a call of the turn the run stopped after reads: it did not run."""
    return ToolResult.failure(ErrorCode.CALL_LIMIT, f"not run: {stop}")
