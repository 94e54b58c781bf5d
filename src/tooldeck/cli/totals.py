"""What a run spent, counted from its events, and the totals line that says it.

    3.37 s total, 3.36 s in the model; 2 model turns, 1 tool call, 834 input / 46 output
    tokens; stop: answer

Tokens a server did not report are unknown, not zero; an answer a limit forced
(``--on-limit final-answer``) says so beside the limit.
"""

from __future__ import annotations

import time
from typing import Any

from tooldeck.messages import ToolCall, Usage
from tooldeck.results import RunResult
from tooldeck.run.events import (
    Event,
    ModelRequest,
    ModelResponse,
    RunRecovered,
    ToolCallFinished,
    ToolCallStarted,
)


def count(number: int, noun: str) -> str:
    """``1 tool call``, ``2 tool calls``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


class Tally:
    """What a run spent so far, from its events: the totals of a run that has no result
    (interrupted), and the time in the model (which the result does not keep)."""

    def __init__(self) -> None:
        self.usage = Usage()
        """Tokens, and model turns answered."""
        self.calls = 0
        """Tool calls finished."""
        self.model_s = 0.0
        """Seconds spent waiting for the model."""
        self.last_turn_s = 0.0
        """Seconds the latest model turn took."""
        self.unmetered = 0
        """Model turns whose usage the server did not send (their tokens are unknown)."""
        self.running: dict[str, ToolCall] = {}
        """Calls started and not finished (by id): what an interrupt found running."""
        self.recovered: list[RunRecovered] = []
        """Runs the session held unfinished (or finished already), met again."""
        self._asked_at = 0.0

    def show(self, event: Event) -> None:
        """Count what the event adds: model time and tokens, finished calls."""
        if isinstance(event, ModelRequest):
            self._asked_at = time.perf_counter()
        elif isinstance(event, ModelResponse):
            self.last_turn_s = time.perf_counter() - self._asked_at
            self.model_s += self.last_turn_s
            usage = event.output.usage or Usage()
            self.unmetered += event.output.usage is None
            self.usage += Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                requests=1,
                cost_usd=usage.cost_usd,
            )
        elif isinstance(event, ToolCallStarted):
            self.running[event.call.id] = event.call
        elif isinstance(event, ToolCallFinished):
            self.calls += 1
            self.running.pop(event.trace.call.id, None)
        elif isinstance(event, RunRecovered):
            self.recovered.append(event)

    def spent(self, result: RunResult[Any] | None) -> tuple[Usage, int]:
        """The usage and the number of calls: the result's when there is one, else counted."""
        if result is None:
            return self.usage, self.calls
        return result.usage, len(result.tool_trace)

    def line(self, seconds: float, stop_reason: str, result: RunResult[Any] | None) -> str:
        """The totals line, from ``result`` when there is one (else from the events)."""
        usage, calls = self.spent(result)
        stop = stop_text(stop_reason, result)
        return totals_line(seconds, self.model_s, usage, calls, stop, self.unmetered)


def totals_line(
    seconds: float, model_s: float, usage: Usage, calls: int, stop: str, unmetered: int = 0
) -> str:
    """``3.37 s total, 3.36 s in the model; 2 model turns, 1 tool call, 834 input / 46
    output tokens, $0.0021; stop: answer``: the cost when it is known and not zero;
    ``unmetered`` model turns came without their usage."""
    cost = usage.cost_usd
    spent = f", {dollars(cost)}" if cost else ""
    return (
        f"{seconds:.2f} s total, {model_s:.2f} s in the model; "
        f"{count(usage.requests, 'model turn')}, {count(calls, 'tool call')}, "
        f"{_tokens(usage, unmetered)}{spent}; stop: {stop}"
    )


def dollars(cost: float) -> str:
    """``$0.0021``: US dollars to six decimals at most, without trailing zeros."""
    text = f"{cost:.6f}".rstrip("0").rstrip(".")
    return f"${text}"


def _tokens(usage: Usage, unmetered: int) -> str:
    counted = f"{usage.input_tokens} input / {usage.output_tokens} output tokens"
    if not unmetered:
        return counted
    if unmetered >= usage.requests:
        return "tokens unknown (the server sent no usage)"
    return f"at least {counted} ({count(unmetered, 'model turn')} sent no usage)"


def stop_text(stop_reason: str, result: RunResult[Any] | None) -> str:
    """Why the run ended (``stop_reason``, else the result's), saying when a limit forced
    the answer (``on_limit="final_answer"``)."""
    reason = stop_reason or (str(result.stop_reason) if result is not None else "error")
    if result is not None and reason not in ("answer", "paused") and answer_forced(result):
        return f"{reason} (the answer was forced at the limit: asked once more, without tools)"
    return reason


def answer_forced(result: RunResult[Any]) -> bool:
    """A limit stopped the run, the model was asked once more, without tools, and answered
    (``on_limit="final_answer"``)."""
    return result.stop_reason in _LIMITS and unanswered(result) is None


def unanswered(result: RunResult[Any]) -> str | None:
    """Why a run that a limit ended (``on_limit="final_answer"``) has no answer to show, in
    the command line's words; None when it has one (or no limit ended it).

    At a spending limit the model is not asked again (``output`` is None): a last request
    would spend past it. Asked once more, it may still answer with no text.
    """
    reason = result.stop_reason
    if reason not in _LIMITS:
        return None
    if result.output is None:
        spent = _SPENT.get(reason, f"the run reached its limit ({reason})")
        why = f"{spent}, so the model was not asked again: a last request would spend past it"
        if result.answer.strip():
            said = result.answer
            why += f" (its last turn asked for tools, which did not run, and said: {said!r})"
        return why
    if isinstance(result.output, str) and not result.output.strip():
        return "asked once more at the limit, without tools, the model answered with no text"
    return None


_LIMITS = frozenset(
    {"max_rounds", "max_tool_calls", "max_duration_s", "max_tokens", "max_cost", "budget"}
)
_SPENT = {
    "max_cost": "the run spent its cost limit (--max-cost)",
    "max_tokens": "the run spent its token limit",
    "budget": "the shared budget is spent",
}


def duration_text(seconds: float) -> str:
    """``15.0 s`` from a second up, ``1.5 ms`` below."""
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds * 1000:.1f} ms"
