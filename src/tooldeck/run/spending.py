"""The run's token and cost limits (``Limits.max_*_tokens``, ``max_cost_usd``): when a run's
usage has reached one, it sends no more requests (not even for a last answer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tooldeck.errors import ErrorCode, LimitExceeded
from tooldeck.messages import ToolResult
from tooldeck.results import StopReason

if TYPE_CHECKING:
    from tooldeck.run.state import RunState

SPENDING_STOPS = frozenset({StopReason.MAX_TOKENS, StopReason.MAX_COST, StopReason.BUDGET})
"""The stops of the limits on what requests spend (the run's tokens and cost, a shared
budget): at one of them no request is sent, not even the last answer
``on_limit="final_answer"`` asks for."""


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

    def reached(self, state: RunState) -> LimitExceeded | None:
        """The limit the run's usage so far has reached, if any (read from its counters)."""
        for name, limit in self.tokens:
            spent = _tokens(name, state)
            if spent >= limit:
                return LimitExceeded(
                    f"the run spent {spent} {name[4:].replace('_', ' ')} ({name}={limit})",
                    StopReason.MAX_TOKENS,
                )
        limit_usd = self.max_cost_usd
        if limit_usd is None:
            return None
        if not state.cost_known:
            return LimitExceeded(
                f"a response's cost is unknown, so max_cost_usd={limit_usd} cannot be kept: "
                "give the model's prices (ModelSettings(prices=ModelPrices(...)), or --price "
                "IN,OUT at the command line)",
                StopReason.MAX_COST,
            )
        if state.cost_usd >= limit_usd:
            return LimitExceeded(
                f"the run spent ${state.cost_usd:.6f} (max_cost_usd={limit_usd})",
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


def _tokens(name: str, state: RunState) -> int:
    if name == "max_input_tokens":
        return state.input_tokens
    if name == "max_output_tokens":
        return state.output_tokens
    return state.input_tokens + state.output_tokens


def not_run(stop: LimitExceeded) -> ToolResult:
    """What a call of the turn the run stopped after reads: it did not run."""
    return ToolResult.failure(ErrorCode.CALL_LIMIT, f"not run: {stop}")
