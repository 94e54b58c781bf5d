"""What a run has produced so far: the conversation, the trace, tokens, and the open turn."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tooldeck.errors import RunStopped
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult, Usage
from tooldeck.results import (
    Checkpoint,
    HistorySummary,
    PendingCall,
    RunResult,
    ShownHistory,
    StopReason,
    ToolTrace,
)
from tooldeck.run._engine.inbox import Inbox
from tooldeck.run._engine.records import assistant_message, tool_message
from tooldeck.run.events import AgentEvent, Event, GuardrailChecked, ModelResponse, NestedEvent
from tooldeck.safety import GuardrailDecision, UntrustedSource
from tooldeck.tools.outputs import OutputStore


def new_run_id() -> str:
    """A new run's id: 128 random bits, in hex."""
    return f"{random.getrandbits(128):032x}"


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
    untrusted: tuple[str, ...] = ()
    """The calls whose results are untrusted content (their tools' ``trust="untrusted"``)."""

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
    run_id: str = field(default_factory=lambda: new_run_id())
    """Unique per run (random reseeds itself in a forked child, so workers differ)."""
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cost_usd: float = 0.0
    """Dollars of the responses whose cost is known."""
    cost_known: bool = True
    """False once a response's cost was unknown: the run's cost is then unknown too."""
    summary: HistorySummary | None = None
    """What the history strategy sends in place of the earliest turns, once it made one."""
    outputs: OutputStore | None = None
    """The whole outputs the run's calls stored (``large_output="store"``), by handle."""
    guardrails: tuple[GuardrailDecision, ...] = ()
    """Every guardrail's decision so far (a tuple: no list made for a run without any)."""
    tainted_by: UntrustedSource | None = None
    """The call whose result first brought untrusted content into the conversation."""
    agent: str = ""
    """The name of the agent whose loop runs (it changes at each handoff)."""
    shown: ShownHistory | None = None
    """What that agent is shown in place of the conversation before its handoff (None:
    all of it). The run's messages stay whole."""
    states: dict[str, Any] | None = None
    """The states of the run's capabilities by name (None: none keeps one)."""
    carried: Mapping[str, Any] | None = None
    """The states the session's last committed run ended with, by name: a capability that
    starts in this run starts from its own (``Capability.next_run_state``)."""
    inbox: Inbox | None = None
    """The messages sent to the run while it works (``RunHandle.send``), waiting to join
    its conversation before the next request (None: a run nobody can send to)."""

    @property
    def usage(self) -> Usage:
        """Tokens spent so far; one request per model turn."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            requests=self.requests,
            cost_usd=self.cost_usd if self.cost_known else None,
        )

    def add_usage(self, usage: Usage) -> None:
        """Count a model call made for the run beside its turns (a history summary)."""
        self.requests += usage.requests
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self._add_cost(usage.cost_usd)

    def _add_cost(self, cost: float | None) -> None:
        if cost is None:
            self.cost_known = False
        else:
            self.cost_usd += cost

    def record_output(self, output: AssistantOutput, round_: int) -> None:
        """Append the model's turn; its calls, if any, become the open turn."""
        self.count_response(output)
        self.messages.append(assistant_message(output))
        self.turn = OpenTurn(round_, output.tool_calls) if output.tool_calls else None

    def keep(self, event: Event) -> None:
        """Keep what an event of a round adds: a guardrail's decision, or the usage of a run
        inside a call (other events add nothing)."""
        if isinstance(event, GuardrailChecked):
            self.guardrails = (*self.guardrails, event.decision)
        elif isinstance(event, NestedEvent):
            self.count_nested(event.event)

    def count_nested(self, event: AgentEvent) -> None:
        """Count the usage of an agent tool's inner run, one model response at a time (a
        resumed inner run streams only its new responses: nothing is counted twice)."""
        if isinstance(event, ModelResponse):
            self.count_response(event.output)

    def count_response(self, output: AssistantOutput) -> None:
        """One model response's usage."""
        self.requests += 1
        usage = output.usage
        if usage is None:
            self.cost_known = False
            return
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        if usage.cost_usd is None:
            self.cost_known = False
        else:
            self.cost_usd += usage.cost_usd

    def close_round(
        self,
        turn: OpenTurn,
        traces: Sequence[ToolTrace],
        pending: tuple[PendingCall, ...],
    ) -> bool:
        """Keep a round's answered calls; close the turn unless some wait. True if some wait.

        The trace keeps the model's order of the calls: a turn answered in parts (before and
        after a pause, or a refused final answer and then the other calls) is put in that
        order as it closes, as if it had run in one round."""
        answered = turn.answered
        earlier = len(answered)
        for trace in traces:
            self.trace.append(trace)
            answered[trace.call.id] = trace.result
        turn.pending = pending
        if pending:
            return True
        if earlier and traces:
            self._in_model_order(turn, earlier + len(traces))
        self.close_turn()
        return False

    def _in_model_order(self, turn: OpenTurn, count: int) -> None:
        """Sort the trace's last ``count`` entries (the turn's calls) by the model's order."""
        position = {call.id: index for index, call in enumerate(turn.calls)}
        tail = self.trace[-count:]
        if len(tail) != count or any(trace.call.id not in position for trace in tail):
            return  # not this turn's calls alone (a checkpoint made elsewhere): left as is
        tail.sort(key=lambda trace: position[trace.call.id])
        self.trace[-count:] = tail

    def close_turn(self) -> None:
        """Every call is answered: append one tool message per call, in the model's order."""
        turn = self.turn
        if turn is None:
            return
        answered = turn.answered
        untrusted = turn.untrusted
        for call in turn.calls:
            if untrusted and call.id in untrusted:
                self.messages.append(tool_message(call.id, answered[call.id].output, True))
                continue
            self.messages.append(tool_message(call.id, answered[call.id].output))
        self.turn = None

    def took_in(self, turn: OpenTurn, untrusted: tuple[tuple[str, str], ...]) -> None:
        """A round's calls brought untrusted content, as (call id, tool name): their tool
        messages are marked, and the first of them taints the conversation."""
        turn.untrusted = (*turn.untrusted, *(call_id for call_id, _ in untrusted))
        if self.tainted_by is None:
            call_id, tool_name = untrusted[0]
            self.tainted_by = UntrustedSource(
                call_id=call_id, tool_name=tool_name, round=turn.round
            )

    def result(
        self,
        answer: str,
        stop_reason: StopReason,
        checkpoint: Checkpoint | None = None,
        output: Any = None,
    ) -> RunResult[Any]:
        """The run as a RunResult: its messages, trace, usage and times, with this ending."""
        result: RunResult[Any] = RunResult(
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
            agent=self.agent,
        )
        if not self.guardrails and self.tainted_by is None and self.states is None:
            return result  # the usual run: three keywords fewer (a dict half the size to make)
        update = {
            "guardrails": self.guardrails,
            "tainted_by": self.tainted_by,
            "capability_states": self.states,
        }
        return result.model_copy(update=update)


def untrusted_source(messages: Sequence[Message]) -> UntrustedSource | None:
    """The call whose result first brought untrusted content into ``messages`` (an earlier
    run's: its tool message is marked), if one did."""
    for index, message in enumerate(messages):
        if message.untrusted:
            call_id = message.tool_call_id or ""
            return UntrustedSource(call_id=call_id, tool_name=_tool_of(messages, index, call_id))
    return None


def _tool_of(messages: Sequence[Message], index: int, call_id: str) -> str:
    for message in reversed(messages[:index]):
        for call in message.tool_calls:
            if call.id == call_id:
                return call.name
    return ""


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
