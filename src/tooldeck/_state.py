"""A run's limits, and the state the loop carries from one step to the next."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from tooldeck.contracts import AssistantOutput, Message, RunResult, ToolCall, ToolTrace, Usage

CallSignature = tuple[object, ...]
"""A hashable key: the tool's name and its arguments in a canonical order."""


@dataclass(frozen=True, slots=True)
class Limits:
    """When a run must stop. ``None`` means no limit."""

    max_rounds: int = 10
    """Model turns a run may take (the last-answer call of ``on_limit="final_answer"`` aside)."""
    max_tool_calls: int | None = None
    """Tool calls a run may make; calls past it are answered as not run."""
    max_duration_s: float | None = None
    """Wall-clock seconds; checked between steps and bounding each model call."""
    tool_retries: int = 2
    """Consecutive failed calls of one tool allowed before the run stops (a tool's
    ``retries=`` overrides it)."""
    repeat_limit: int | None = 3
    """Identical calls (same tool, same arguments) allowed; the next gets ``repeated_call``."""

    def __post_init__(self) -> None:
        positive = {
            "max_rounds": self.max_rounds,
            "max_tool_calls": self.max_tool_calls,
            "max_duration_s": self.max_duration_s,
            "repeat_limit": self.repeat_limit,
        }
        for name, value in positive.items():
            if value is not None and value <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {value!r}")
        if self.tool_retries < 0:
            raise ValueError(f"Limits.tool_retries must be >= 0, got {self.tool_retries!r}")


@dataclass(slots=True)
class RunState:
    """Everything a run has produced so far. The loop only appends to it.

    A run can stop with calls still ``pending`` and go on later from this state: the next
    step runs them before asking the model again.
    """

    messages: list[Message]
    trace: list[ToolTrace] = field(default_factory=list)
    rounds: int = 0
    tool_calls: int = 0
    pending: tuple[ToolCall, ...] = ()
    """Calls the model asked for that have not run yet."""
    failures: dict[str, int] = field(default_factory=dict)
    """Consecutive failed calls per tool name."""
    seen: dict[CallSignature, int] = field(default_factory=dict)
    """Call signature -> times the model made that exact call."""
    last_output: dict[CallSignature, str] = field(default_factory=dict)
    """Call signature -> what that call returned last time it ran."""
    started: float = field(default_factory=time.monotonic)
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def usage(self) -> Usage:
        """Tokens spent so far; one request per model turn."""
        return Usage(
            input_tokens=self.input_tokens, output_tokens=self.output_tokens, requests=self.rounds
        )

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def record_output(self, output: AssistantOutput) -> None:
        self.rounds += 1
        if output.usage is not None:
            self.input_tokens += output.usage.input_tokens
            self.output_tokens += output.usage.output_tokens
        self.messages.append(Message.assistant(output))
        self.pending = output.tool_calls

    def record_call(self, trace: ToolTrace, signature: CallSignature | None) -> None:
        """Append a finished call: its trace, and the tool message the model will read."""
        self.trace.append(trace)
        self.messages.append(Message.tool(trace.call.id, trace.result.output))
        self.tool_calls += 1
        name = trace.call.name
        if trace.result.ok:
            self.failures.pop(name, None)
        else:
            self.failures[name] = self.failures.get(name, 0) + 1
        if signature is not None and trace.result.error_code != "repeated_call":
            self.last_output[signature] = trace.result.output

    def result(self, answer: str, stop_reason: str) -> RunResult:
        return RunResult(
            answer=answer,
            messages=tuple(self.messages),
            tool_trace=tuple(self.trace),
            usage=self.usage,
            stop_reason=stop_reason,
        )


def call_signature(call: ToolCall) -> CallSignature:
    """The same tool with the same arguments gives the same signature (a hashable key)."""
    if call.raw_arguments is not None:
        return (call.name, call.raw_arguments)
    flat = tuple(sorted((key, type(value), value) for key, value in call.arguments.items()))
    try:
        hash(flat)
    except TypeError:  # nested lists/dicts: canonical JSON instead
        return (call.name, json.dumps(call.arguments, sort_keys=True, default=repr))
    return (call.name, *flat)
