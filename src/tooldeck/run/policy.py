"""The run's limits, what it has counted so far, and the stop decisions built on them.

The loop asks one ``RunPolicy`` per run: may this call run (``admit``), what happened
(``record``), must the run stop before the next model request or after a round of calls.
Adding a limit touches this file only.

Of a run's spending, this file holds the limits of one run (``Limits``: its tokens and
``max_cost_usd``) and the decisions; ``run/_engine/spending.py`` gathers the token and cost
limits among them and what is left of them for agent tools' inner runs; ``run/budget.py``
is the budget many runs share (``Budget``, whose ``max_cost_usd`` is the same bound counted
over all the runs that draw on it; its class is in ``tooldeck._budget``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from tooldeck.errors import ErrorCode, LimitExceeded, SessionError, ToolExecutionError
from tooldeck.messages import AssistantOutput, ToolCall, ToolResult
from tooldeck.results import RepeatRecord, RunCounters, StopReason
from tooldeck.run._engine.spending import SPENDING_STOPS, SpendingLimits, spending_limits
from tooldeck.run.budget import Budget
from tooldeck.tools.registry import ToolEntry

if TYPE_CHECKING:
    from tooldeck.run._engine.state import RunState

CallSignature = tuple[object, ...]
"""A hashable key: the tool's name and its arguments in a canonical order."""

_MODEL_MISTAKES = frozenset(
    {ErrorCode.INVALID_ARGUMENTS, ErrorCode.INVALID_JSON, ErrorCode.UNKNOWN_TOOL}
)
_NOT_COUNTED = frozenset({ErrorCode.REJECTED, ErrorCode.CALL_LIMIT})
"""Failures that say nothing about the tool: a person's decision, the run's call budget."""


@dataclass(frozen=True, slots=True)
class Limits:
    """When a run must stop. ``None`` means no limit."""

    max_rounds: int = 10
    """Rounds a run may take: model requests, each with the tool calls it asked for (the
    last-answer call of ``on_limit="final_answer"`` aside)."""
    max_tool_calls: int | None = None
    """Tool calls a run may make; calls past it are answered as not run."""
    max_duration_s: float | None = None
    """Wall-clock seconds of work (time spent paused does not count). Bounds each model
    call and each round of tool calls: calls still running at the limit get ``tool_timeout``."""
    tool_retries: int = 2
    """Consecutive failed calls of one tool allowed before the run stops (a tool's
    ``retries=`` overrides it)."""
    repeat_limit: int | None = 3
    """Identical calls (same tool, same arguments) allowed; the next gets ``repeated_call``."""
    max_input_tokens: int | None = None
    """Input tokens the run's model responses may add up to (stop reason ``max_tokens``)."""
    max_output_tokens: int | None = None
    """Output tokens the run's model responses may add up to (stop reason ``max_tokens``)."""
    max_total_tokens: int | None = None
    """Input and output tokens together (stop reason ``max_tokens``)."""
    max_cost_usd: float | None = None
    """US dollars the run's responses may cost, its agent tools' inner runs included
    (``usage.cost_usd``; stop reason ``max_cost``); ``Budget(max_cost_usd=...)`` is the same
    bound for many runs together (stop reason ``budget``). A response whose cost is unknown
    stops the run too: the limit cannot be kept blind."""
    max_parallel_calls: int | None = None
    """Calls of one turn that may run at once (the agent's ``max_concurrency``, if lower,
    wins)."""
    spending: SpendingLimits | None = field(init=False, repr=False, compare=False)
    """The token and cost limits above, gathered once (None when none is set)."""

    def __post_init__(self) -> None:
        positive = {
            "max_rounds": self.max_rounds,
            "max_tool_calls": self.max_tool_calls,
            "max_duration_s": self.max_duration_s,
            "repeat_limit": self.repeat_limit,
            "max_input_tokens": self.max_input_tokens,
            "max_output_tokens": self.max_output_tokens,
            "max_total_tokens": self.max_total_tokens,
            "max_cost_usd": self.max_cost_usd,
            "max_parallel_calls": self.max_parallel_calls,
        }
        for name, value in positive.items():
            if value is not None and value <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {value!r}")
        if self.tool_retries < 0:
            raise ValueError(f"Limits.tool_retries must be >= 0, got {self.tool_retries!r}")
        object.__setattr__(self, "spending", spending_limits(self))


class RunPolicy:
    """One run's counters and the decisions built on them and on the Limits."""

    __slots__ = ("_elapsed_before", "_started", "budget", "calls_by_tool", "failures",
                 "last_output", "limits", "metered", "output_failures", "rounds", "seen",
                 "spending", "tool_calls")  # fmt: skip

    def __init__(
        self, limits: Limits, counters: RunCounters | None = None, budget: Budget | None = None
    ) -> None:
        self.limits = limits
        self.spending = limits.spending
        """The run's token and cost limits, None without any."""
        self.budget = budget
        """The budget shared with other runs (``run(budget=...)``), if any."""
        self.metered = self.spending is not None or budget is not None
        """Whether the loop must count each response (``after_response``); False: it asks
        nothing."""
        self.rounds = 0
        self.tool_calls = 0
        self.failures: dict[str, list[ErrorCode]] = {}
        """Per tool: the codes of its consecutive failed calls."""
        self.seen: dict[CallSignature, int] = {}
        self.last_output: dict[CallSignature, str] = {}
        self.output_failures = 0
        """Typed answers refused so far (``Agent(output_type=...)``)."""
        self.calls_by_tool: dict[str, int] | None = None
        """Per tool with ``max_calls``: its calls so far (None: no such call yet)."""
        self._started = time.monotonic()
        self._elapsed_before = 0.0
        if counters is not None:
            self._restore(counters)

    @property
    def elapsed_s(self) -> float:
        """Seconds of work so far; time spent paused does not count."""
        return self._elapsed_before + time.monotonic() - self._started

    def remaining_s(self) -> float | None:
        """Seconds left before ``max_duration_s``; None without that limit."""
        if self.limits.max_duration_s is None:
            return None
        return max(0.0, self.limits.max_duration_s - self.elapsed_s)

    def admit(self) -> ToolResult | None:
        """Count a call against the run's budget; the refusal when the budget is spent."""
        limit = self.limits.max_tool_calls
        if limit is not None and self.tool_calls >= limit:
            text = (
                f"not run: this run reached its limit of {limit} tool calls; "
                "answer with the results you have"
            )
            return ToolResult.failure(ErrorCode.CALL_LIMIT, text)
        self.tool_calls += 1
        return None

    @property
    def calls_spent(self) -> bool:
        """The run has made all the calls ``max_tool_calls`` allows."""
        limit = self.limits.max_tool_calls
        return limit is not None and self.tool_calls >= limit

    def admit_tool(self, name: str, limit: int) -> ToolResult | None:
        """Count a call of a tool with ``max_calls``; the refusal past its limit."""
        counts = self.calls_by_tool
        if counts is None:
            counts = self.calls_by_tool = {}
        made = counts.get(name, 0)
        if made >= limit:
            return ToolResult.failure(
                ErrorCode.CALL_LIMIT,
                f"not run: this run reached the limit of {limit} calls of {name!r} "
                "(max_calls); go on without it",
            )
        counts[name] = made + 1
        return None

    def check_repeat(self, call: ToolCall) -> tuple[ToolResult | None, CallSignature | None]:
        """Count this exact call; refuse a runaway repeat. The signature goes to ``record``."""
        if self.limits.repeat_limit is None:
            return None, None
        signature = call_signature(call)
        count = self.seen.get(signature, 0)
        self.seen[signature] = count + 1
        if count < self.limits.repeat_limit:
            return None, signature
        return _repeat_refusal(call, count, self.last_output.get(signature)), signature

    def record(self, name: str, result: ToolResult, signature: CallSignature | None) -> None:
        """Note a call's outcome: consecutive failures per tool, and the output for repeats."""
        code = result.error_code
        if code is None:
            self.failures.pop(name, None)
        elif code not in _NOT_COUNTED:
            self.failures.setdefault(name, []).append(code)
        if signature is not None and code is not ErrorCode.REPEATED_CALL:
            self.last_output[signature] = result.output

    def stop_before_request(self, state: RunState) -> LimitExceeded | None:
        """The limit that forbids asking the model again, if any."""
        if self.rounds >= self.limits.max_rounds:
            return LimitExceeded(
                f"the model asked for tools after {self.rounds} "
                f"round{'' if self.rounds == 1 else 's'} "
                f"(max_rounds={self.limits.max_rounds})",
                StopReason.MAX_ROUNDS,
            )
        if self.limits.max_duration_s is not None and self.remaining_s() == 0:
            return self.out_of_time()
        if not self.metered:
            return None
        if self.spending is not None and (spent := self.spending.reached(state)):
            return spent
        if self.budget is not None:  # last: the request it counts is sent
            return self._budgeted(state, self.budget.take_request)
        return None

    def _budgeted(
        self, state: RunState, change: Callable[[], LimitExceeded | None]
    ) -> LimitExceeded | None:
        """``change`` of the shared budget; when its store fails, the SessionError carries
        the run so far (``.result``, stop reason ``session_error``): no response is lost."""
        try:
            return change()
        except SessionError as error:
            if error.result is None:
                error.result = state.result("", StopReason.SESSION_ERROR)
                error.add_note(
                    "the run stopped: its shared budget could not be read or counted, so "
                    "nothing more was asked or run (the run so far, with the usage of every "
                    "response it had, is in this error's .result)"
                )
            raise

    def last_request_refused(self, state: RunState, stop: LimitExceeded) -> LimitExceeded | None:
        """Before the last request of a run at a limit (``on_limit="final_answer"``): the
        spending limit that forbids it, if any. A spent budget lets no request out: a stop
        at a token or cost limit or a shared budget is itself the refusal; at another limit
        (rounds, time, calls) the request must still fit the spending limits, and it takes
        its request from the shared budget as any other does."""
        if stop.limit in SPENDING_STOPS:
            return stop
        if not self.metered:
            return None
        if self.spending is not None and (spent := self.spending.reached(state)):
            return spent
        return None if self.budget is None else self._budgeted(state, self.budget.take_request)

    def after_response(self, state: RunState, output: AssistantOutput) -> LimitExceeded | None:
        """Count a response of a metered run; the token or cost limit the run has reached, if
        any, when the response asks for calls (an answer ends the run anyway).

        Raises:
            SessionError: The shared budget's store failed (a database locked or gone): the
                run stops with what it did, this response's usage in ``.result``.
        """
        budget = self.budget
        spent_budget = None
        if budget is not None:
            spent_budget = self._budgeted(state, partial(budget.record, output.usage))
        if not output.tool_calls:
            return None
        if self.spending is not None and (spent := self.spending.reached(state)):
            return spent
        return spent_budget

    def out_of_time(self) -> LimitExceeded:
        """The stop for a run past ``max_duration_s``."""
        return LimitExceeded(
            f"the run took longer than max_duration_s={self.limits.max_duration_s}",
            StopReason.MAX_DURATION_S,
        )

    def stop_after_round(
        self,
        dispatch: Mapping[str, ToolEntry],
        raised: Sequence[tuple[str, BaseException]],
        over_call_limit: bool,
    ) -> LimitExceeded | ToolExecutionError | None:
        """The reason the run must stop after a round of calls, if any."""
        if raised:
            name, error = raised[0]
            stopped = ToolExecutionError(
                f"tool {name!r} raised {type(error).__name__}: {error}", name
            )
            stopped.__cause__ = error
            return stopped
        if over_call_limit:
            return LimitExceeded(
                f"the model asked for more than max_tool_calls={self.limits.max_tool_calls} calls",
                StopReason.MAX_TOOL_CALLS,
            )
        for name, codes in self.failures.items():
            entry = dispatch.get(name)
            own = entry.options.retries if entry is not None else None
            allowed = self.limits.tool_retries if own is None else own
            if len(codes) > allowed:
                return LimitExceeded(_retries_text(name, codes, allowed), StopReason.RETRIES)
        return None

    def refuse_output(self, allowed: int, problem: str) -> LimitExceeded | None:
        """Count a refused typed answer; the stop when more than ``allowed`` were refused."""
        self.output_failures += 1
        if self.output_failures <= allowed:
            return None
        return LimitExceeded(
            f"the model's answer did not fit the output type {self.output_failures} times "
            f"(output_retries={allowed}); the last problem: {problem}",
            StopReason.OUTPUT_RETRIES,
        )

    def counters(self) -> RunCounters:
        """The counters as a checkpoint stores them."""
        repeats = tuple(
            _repeat_record(signature, count, self.last_output.get(signature))
            for signature, count in self.seen.items()
        )
        return RunCounters(
            rounds=self.rounds,
            tool_calls=self.tool_calls,
            failures={name: tuple(codes) for name, codes in self.failures.items()},
            repeats=repeats,
            output_failures=self.output_failures,
            elapsed_s=self.elapsed_s,
            calls_by_tool=dict(self.calls_by_tool or {}),
        )

    def _restore(self, counters: RunCounters) -> None:
        self.rounds = counters.rounds
        self.tool_calls = counters.tool_calls
        self.failures = {name: list(codes) for name, codes in counters.failures.items()}
        for record in counters.repeats:
            call = ToolCall(
                id="",
                name=record.name,
                arguments=record.arguments,
                raw_arguments=record.raw_arguments,
            )
            signature = call_signature(call)
            self.seen[signature] = record.count
            if record.last_output is not None:
                self.last_output[signature] = record.last_output
        self.output_failures = counters.output_failures
        self._elapsed_before = counters.elapsed_s
        self.calls_by_tool = dict(counters.calls_by_tool) or None


def call_signature(call: ToolCall) -> CallSignature:
    """The same tool with the same arguments gives the same signature (a hashable key)."""
    if call.raw_arguments is not None:
        return (call.name, "raw", call.raw_arguments)
    items = sorted(call.arguments.items())  # the keys differ, so no value is compared
    signature = (call.name, "flat", *[(key, type(value), value) for key, value in items])
    try:
        hash(signature)
    except TypeError:  # nested lists/dicts: canonical JSON instead
        return (call.name, "json", json.dumps(call.arguments, sort_keys=True, default=repr))
    return signature


def _repeat_record(signature: CallSignature, count: int, last_output: str | None) -> RepeatRecord:
    name, kind, *rest = signature
    if kind == "raw":
        return RepeatRecord(
            name=str(name), raw_arguments=str(rest[0]), count=count, last_output=last_output
        )
    if kind == "json":
        arguments = json.loads(str(rest[0]))
    else:
        arguments = {str(item[0]): item[2] for item in rest if isinstance(item, tuple)}
    return RepeatRecord(name=str(name), arguments=arguments, count=count, last_output=last_output)


def _repeat_refusal(call: ToolCall, count: int, previous: str | None) -> ToolResult:
    text = (
        f"you already called {call.name!r} with these exact arguments {count} times; "
        "do not call it again with the same arguments"
    )
    if previous is not None:
        text += f". Its last result was:\n{previous}"
    return ToolResult.failure(ErrorCode.REPEATED_CALL, text)


def _retries_text(name: str, codes: Sequence[ErrorCode], allowed: int) -> str:
    tally = ", ".join(f"{code} x{n}" for code, n in Counter(codes).items())
    head = f"{len(codes)} calls of {name!r} in a row failed (retries={allowed}): {tally}; "
    if all(code is ErrorCode.REPEATED_CALL for code in codes):
        return head + "the model kept repeating a call it had already made (the tool did not fail)"
    if all(code in _MODEL_MISTAKES or code is ErrorCode.REPEATED_CALL for code in codes):
        return head + "the model's calls were malformed, so the tool did not run"
    return head + "the tool itself failed"
