"""What a run has produced so far: the conversation, the trace, tokens, and the open turn."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tooldeck.errors import RunStopped
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult, Usage
from tooldeck.results import (
    Checkpoint,
    GuardrailDecision,
    HistorySummary,
    PendingCall,
    RunResult,
    StopReason,
    ToolTrace,
)
from tooldeck.run.events import AgentEvent, ModelResponse
from tooldeck.run.records import assistant_message, tool_message


@dataclass(slots=True)
class OpenTurn:
    """A model turn whose calls are not all answered yet."""

    round: int
    calls: tuple[ToolCall, ...]
    answered: dict[str, ToolResult] = field(default_factory=dict)
    """Call id -> what the model will read, for the calls that ran or were refused."""
    pending: tuple[PendingCall, ...] = ()
    """Calls that wait for a decision (approval) or a result (external)."""
    started: bool = False
    """True once the calls were checked (a resumed turn only runs its decided calls)."""

    @property
    def complete(self) -> bool:
        """Every call of the turn has its result."""
        return len(self.answered) == len(self.calls)


@dataclass(slots=True)
class RunState:
    """Everything a run has produced so far. The loop only appends to it."""

    messages: list[Message]
    trace: list[ToolTrace] = field(default_factory=list)
    turn: OpenTurn | None = None
    """The latest model turn, while some of its calls are unanswered."""
    run_id: str = field(default_factory=lambda: f"{random.getrandbits(128):032x}")
    """Unique per run (random reseeds itself in a forked child, so workers differ)."""
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    summary: HistorySummary | None = None
    """What the history strategy sends in place of the earliest turns, once it made one."""
    guardrails: list[GuardrailDecision] = field(default_factory=list)
    """Every guardrail's decision so far."""

    @property
    def usage(self) -> Usage:
        """Tokens spent so far; one request per model turn."""
        return Usage(
            input_tokens=self.input_tokens, output_tokens=self.output_tokens, requests=self.requests
        )

    def add_usage(self, usage: Usage) -> None:
        """Count a model call made for the run beside its turns (a history summary)."""
        self.requests += usage.requests
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens

    def record_output(self, output: AssistantOutput, round_: int) -> None:
        """Append the model's turn; its calls, if any, become the open turn."""
        self.count_response(output)
        self.messages.append(assistant_message(output))
        self.turn = OpenTurn(round_, output.tool_calls) if output.tool_calls else None

    def count_nested(self, event: AgentEvent) -> None:
        """Count the usage of an agent tool's inner run, one model response at a time (a
        resumed inner run streams only its new responses: nothing is counted twice)."""
        if isinstance(event, ModelResponse):
            self.count_response(event.output)

    def count_response(self, output: AssistantOutput) -> None:
        """One model response's usage."""
        self.requests += 1
        if output.usage is not None:
            self.input_tokens += output.usage.input_tokens
            self.output_tokens += output.usage.output_tokens

    def close_round(
        self,
        turn: OpenTurn,
        traces: Sequence[ToolTrace],
        pending: tuple[PendingCall, ...],
    ) -> bool:
        """Keep a round's answered calls; close the turn unless some wait. True if some wait."""
        answered = turn.answered
        for trace in traces:
            self.trace.append(trace)
            answered[trace.call.id] = trace.result
        turn.pending = pending
        if pending:
            return True
        self.close_turn()
        return False

    def close_turn(self) -> None:
        """Every call is answered: append one tool message per call, in the model's order."""
        turn = self.turn
        if turn is None:
            return
        answered = turn.answered
        for call in turn.calls:
            self.messages.append(tool_message(call.id, answered[call.id].output))
        self.turn = None

    def result(
        self,
        answer: str,
        stop_reason: StopReason,
        checkpoint: Checkpoint | None = None,
        output: Any = None,
    ) -> RunResult[Any]:
        """The run as a RunResult: its messages, trace, usage and times, with this ending."""
        return RunResult(
            answer=answer,
            output=output,
            messages=tuple(self.messages),
            tool_trace=tuple(self.trace),
            usage=self.usage,
            stop_reason=stop_reason,
            run_id=self.run_id,
            pending=checkpoint.pending if checkpoint is not None else (),
            checkpoint=checkpoint,
            history_summary=self.summary,
            guardrails=tuple(self.guardrails),
        )


StoppedT = TypeVar("StoppedT", bound=RunStopped)


def attach(error: StoppedT, state: RunState, reason: StopReason) -> StoppedT:
    """``error`` with the run so far as its ``.result`` (kept if it already has one)."""
    if error.result is None:
        error.result = state.result("", reason)
    return error


def checked_run_id(run_id: object) -> str:
    """A run id the application chose (``run(run_id=...)``), refused unless a non-empty str."""
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
    return run_id
