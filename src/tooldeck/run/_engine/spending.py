"""The run's token and cost limits (``Limits.max_*_tokens``, ``max_cost_usd``): when a run's
usage has reached one, it sends no more requests (not even for a last answer). The runs
made inside its calls (agent tools) draw on what is left of them (``left_for_calls``).

The limits themselves are declared in ``run/policy.py`` (``Limits``), whose ``RunPolicy``
asks this file; ``SpendingLimits.max_cost_usd`` is a copy of ``Limits.max_cost_usd``, and
``LeftForCalls`` is a ``Budget`` (``run/budget.py``) whose limits are what is left of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tooldeck.errors import ErrorCode, LimitExceeded
from tooldeck.messages import ToolResult, Usage
from tooldeck.results import StopReason
from tooldeck.run.budget import Budget, Counts

if TYPE_CHECKING:
    from tooldeck.run._engine.state import RunState

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


class LeftForCalls(Budget):
    """What is left of a run's own token and cost limits as a round's calls start: the
    budget the runs made inside them (agent tools) draw on, together with the run's shared
    budget (``shared``), so a request of theirs is never sent once the run's limit is spent.
    The calls of one round share it; the run counts their usage in its own after the round.
    A limit on input or output tokens alone bounds their input and output tokens together
    (the stricter reading: nothing past it is let out)."""

    def __init__(
        self, cost_usd: float | None, tokens: int | None, shared: Budget | None, what: str
    ) -> None:
        super().__init__(max_requests=1)  # then the limits left, which may be spent already
        self.max_requests, self.max_cost_usd, self.max_total_tokens = None, cost_usd, tokens
        self.shared = shared
        self._what = what

    def take_request(self) -> LimitExceeded | None:
        """Refused when the run's limit is spent, or the shared budget is."""
        own = super().take_request()
        if own is not None or self.shared is None:
            return own
        return self.shared.take_request()

    def record(self, usage: Usage | None) -> LimitExceeded | None:
        """Counted here and in the shared budget; the stop when either is spent."""
        own = super().record(usage)
        shared = None if self.shared is None else self.shared.record(usage)
        return own or shared

    def _reached(self, counts: Counts) -> LimitExceeded | None:
        spent = super()._reached(counts)
        if spent is None:
            return None
        return LimitExceeded(
            f"the run that made this call spent its limit: {self._what}", StopReason.BUDGET
        )


def left_for_calls(limits: SpendingLimits, state: RunState, shared: Budget | None) -> Budget:
    """The budget the runs made inside a round's calls draw on: what is left of the run's
    spending limits, and ``shared`` (``LeftForCalls``). Nothing may be left: calls approved
    in a run resumed under a lower limit run, and the runs inside them ask nothing."""
    cost = None
    if limits.max_cost_usd is not None:
        cost = limits.max_cost_usd - state.cost_usd
    tokens = None
    for name, limit in limits.tokens:
        left = limit - _tokens(name, state)
        tokens = left if tokens is None else min(tokens, left)
    what = ", ".join(
        [f"max_cost_usd={limits.max_cost_usd}"] * (cost is not None)
        + [f"{name}={limit}" for name, limit in limits.tokens]
    )
    return LeftForCalls(cost, tokens, shared, what)


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
