"""One run's tooldeck events as AG-UI events, as they come.

The model's text streams as a text message (``TEXT_MESSAGE_START``, a ``CONTENT`` per
``TextDelta``, ``END`` once the turn is whole) and each call's arguments as a tool call
(``TOOL_CALL_START`` when its id and name are known, an ``ARGS`` per ``ToolCallDelta``,
``END`` with the turn). A model that does not stream gets the same events from its whole
turn. Each finished call is a ``TOOL_CALL_RESULT`` whose metadata says how it went
(``tooldeck``: ``ok``, ``errorCode``, ``durationS``, the host's exception when shown, and
``decision`` — ``remembered:run`` or ``remembered:session``, the run log's words — for a
call that ran under an approval a person gave earlier for the run or the session).
A result tooldeck writes without a call event (a typed answer's ``final_answer``) is sent
when the run ends, from the conversation, so no call the stream started is left without
its result unless the run waits for it. A message sent to the run (``POST /messages``)
that joins its conversation is a user text message under its client's id. A handoff
(``Agent(handoffs=...)``) is a ``CUSTOM`` event named ``tooldeck.handoff`` (``source``,
``target``, ``toolCallId``).
The run inside an agent tool's call (``agent.as_tool``, called by the model or by a program) is
an AG-UI subagent: its events carry its ``subagentRunId`` (see ``_subagents``).

A run that judges its answer (output guardrails: ``hold_answer``) streams no text: a turn
with calls sends its text whole when it is written; the answer is sent when the run ends
with it, after the guardrails passed it, and a text they stop (or send back to the model)
is never sent: the run's ``MESSAGES_SNAPSHOT`` shows such a turn (which the model reads
again) with a note in its place (``withheld``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from tooldeck.messages import AssistantOutput, Message, ToolCall
from tooldeck.results import RecordedError, ToolTrace
from tooldeck.run.events import (
    Event,
    GuardrailChecked,
    HandedOff,
    MessageJoined,
    ModelRequest,
    ModelResponse,
    NestedEvent,
    RunRecovered,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from tooldeck.serve.agui._messages import message_id
from tooldeck.serve.agui._send import LiveRun
from tooldeck.serve.agui._subagents import Subagents


def recovered_value(event: RunRecovered) -> dict[str, Any]:
    """The ``tooldeck.recovered`` custom event's value: a run the session held unfinished
    (or finished already) met again, and its calls that had not reported, as the model now
    reads them."""
    settled = [
        {
            "toolCallId": trace.call.id,
            "name": trace.call.name,
            "arguments": trace.call.arguments,
            "content": trace.result.output,
            "ok": trace.result.ok,
        }
        for trace in event.settled
    ]
    return {"runId": event.run_id, "how": event.how, "rounds": event.rounds, "settled": settled}


@dataclass
class _StreamedCall:
    """A call the model is writing: started once its id and name are known."""

    call_id: str = ""
    name: str = ""
    waiting: list[str] = field(default_factory=list)
    """Argument pieces that came before the call could be started."""
    started: bool = False


@dataclass
class Relay:
    """Translates one run's events; ``turn_at`` and ``turn_calls`` name the turn a resumed
    run goes on with (its position in the conversation, its calls)."""

    show_exceptions: bool = False
    """Put the exception behind a failed call in the result's metadata (for the host)."""
    hold_answer: bool = False
    """Send no text as it is written: the run's output guardrails judge the answer first."""
    turn_at: int = -1
    turn_calls: tuple[ToolCall, ...] = ()
    _text_open: bool = False
    _streamed: dict[int, _StreamedCall] = field(default_factory=dict)
    _unanswered: dict[str, None] = field(default_factory=dict)
    """Calls the stream started and has not sent a result for, in order."""
    _answer: str = ""
    """With ``hold_answer``: the text of the turn that may end the run, not sent yet."""
    withheld: dict[int, str] = field(default_factory=dict)
    """Position -> what is shown instead of an answer an output guardrail did not pass."""
    live: LiveRun | None = None
    """The run as ``POST /messages`` adds to it: the ids its clients gave what they sent."""
    _remembered: dict[str, str] = field(default_factory=dict)
    """Call id -> ``remembered:<scope>``, for calls running under a remembered approval."""
    prefix: str = ""
    """Put before the ids of the messages it sends: a subagent's (``<its run id>:``)."""
    subagents: Subagents = field(default_factory=Subagents)
    """The runs inside agent tools' calls, started and not finished (``_subagents``)."""

    def events(self, event: Event) -> Iterator[BaseEvent]:
        """The AG-UI events for one tooldeck event (none for an event they do not show)."""
        if isinstance(event, TextDelta):
            if not self.hold_answer:  # else the turn's text is sent whole, or held
                yield from self._text(event.text)
        elif isinstance(event, ToolCallDelta):
            yield from self._call_delta(event)
        elif isinstance(event, ModelRequest):
            self.turn_at, self.turn_calls = event.message_count, ()
            self._streamed, self._answer = {}, ""  # an answer asked again is never sent
        elif isinstance(event, ModelResponse):
            yield from self._turn_done(event.output)
        elif isinstance(event, ToolCallStarted):
            if event.remembered is not None:
                self._remembered[event.call.id] = f"remembered:{event.remembered.scope}"
        elif isinstance(event, NestedEvent):
            yield from self.subagents.events(event, self)
        elif isinstance(event, ToolCallFinished):
            yield from self.subagents.finished(self.call_path(event.trace.call.id), event.trace)
            if self._inside(event.trace.call.id) is not None:  # a program's call (code mode)
                yield from self._inner_call(event.trace.call)
            yield self._result(event.trace)
        elif isinstance(event, GuardrailChecked):
            decision = event.decision
            if decision.stage == "output" and decision.verdict != "passed":
                self.withheld[self.turn_at] = (
                    f"[withheld: output guardrail {decision.name!r} did not pass this answer: "
                    f"{decision.message}]"
                )
        elif isinstance(event, HandedOff):
            handed = {"source": event.source, "target": event.target, "toolCallId": event.call.id}
            yield CustomEvent(name="tooldeck.handoff", value=handed)
        elif isinstance(event, RunRecovered):
            yield CustomEvent(name="tooldeck.recovered", value=recovered_value(event))
        elif isinstance(event, MessageJoined):
            yield from self._joined(event)

    def _joined(self, event: MessageJoined) -> Iterator[BaseEvent]:
        """Messages sent to the run, now in its conversation (after the round's results),
        as user text messages under the ids their clients gave them."""
        given = self.live.take(len(event.messages)) if self.live is not None else []
        after = self.turn_at + 1 + len(self.turn_calls)
        for index, message in enumerate(event.messages):
            id_ = given[index].id if index < len(given) else self._id(after + index)
            how = {"tooldeck": {"sent": event.sent}}
            yield TextMessageStartEvent(message_id=id_, role="user", metadata=how)
            if message.content:
                yield TextMessageContentEvent(message_id=id_, delta=message.content)
            yield TextMessageEndEvent(message_id=id_)

    def inside(self, run_id: str) -> Relay:
        """The relay of the subagent ``run_id`` (an agent tool's run inside one of this
        run's calls): its text sent whole, its answer held until its call finished."""
        return Relay(self.show_exceptions, hold_answer=True, prefix=f"{run_id}:")

    def turn_message(self) -> str:
        """The id of the message of the turn the run is at (the one holding its calls)."""
        return self._id(self.turn_at)

    def _id(self, position: int) -> str:
        return self.prefix + message_id(position)

    def answer(self) -> Iterator[BaseEvent]:
        """The text of the answer the run ended with, held back until its guardrails passed."""
        if self._answer:
            yield from self._whole_text(self._answer)
            self._answer = ""

    def results_from(self, messages: Sequence[Message]) -> Iterator[BaseEvent]:
        """Results the conversation holds for calls the stream started but did not answer."""
        for position, message in enumerate(messages):
            if message.role == "tool" and message.tool_call_id in self._unanswered:
                del self._unanswered[message.tool_call_id]
                yield ToolCallResultEvent(
                    message_id=self._id(position),
                    tool_call_id=message.tool_call_id,
                    content=message.content,
                    role="tool",
                )

    def _text(self, text: str) -> Iterator[BaseEvent]:
        if not text:
            return
        if not self._text_open:
            self._text_open = True
            yield TextMessageStartEvent(message_id=self._id(self.turn_at), role="assistant")
        yield TextMessageContentEvent(message_id=self._id(self.turn_at), delta=text)

    def _whole_text(self, text: str) -> Iterator[BaseEvent]:
        yield from self._text(text)
        self._text_open = False
        yield TextMessageEndEvent(message_id=self._id(self.turn_at))

    def _call_delta(self, delta: ToolCallDelta) -> Iterator[BaseEvent]:
        call = self._streamed.setdefault(delta.index, _StreamedCall())
        call.call_id, call.name = delta.call_id or call.call_id, delta.name or call.name
        if delta.arguments_delta:
            call.waiting.append(delta.arguments_delta)
        if not call.started and call.call_id and call.name:
            call.started = True
            yield self._start(call.call_id, call.name)
        if call.started and call.waiting:
            yield ToolCallArgsEvent(tool_call_id=call.call_id, delta="".join(call.waiting))
            call.waiting.clear()

    def _turn_done(self, output: AssistantOutput) -> Iterator[BaseEvent]:
        """Close what streamed; send whole what did not (a model that does not stream, or a
        held text); hold an answer the guardrails judge."""
        if self._text_open:
            self._text_open = False
            yield TextMessageEndEvent(message_id=self._id(self.turn_at))
        elif self.hold_answer and not output.tool_calls:
            self._answer = output.content
        elif output.content:
            yield from self._whole_text(output.content)
        for index, call in enumerate(output.tool_calls):
            streamed = self._streamed.get(index)
            if streamed is not None and streamed.started and streamed.call_id != call.id:
                yield ToolCallEndEvent(tool_call_id=streamed.call_id)  # renamed: a reused id
                self._unanswered.pop(streamed.call_id, None)
                streamed = None
            if streamed is None or not streamed.started:
                yield self._start(call.id, call.name)
                yield ToolCallArgsEvent(tool_call_id=call.id, delta=call.arguments_json)
            yield ToolCallEndEvent(tool_call_id=call.id)
        self.turn_calls = output.tool_calls
        self._streamed = {}

    def _start(self, call_id: str, name: str) -> ToolCallStartEvent:
        self._unanswered[call_id] = None
        return ToolCallStartEvent(
            tool_call_id=call_id, tool_call_name=name, parent_message_id=self._id(self.turn_at)
        )

    def _inner_call(self, call: ToolCall) -> Iterator[BaseEvent]:
        """A call made inside one of the turn's calls (``run_code``'s ``<id>.<n>``): opened
        and closed whole before its result, so the timeline shows it as a call of its own."""
        yield self._start(call.id, call.name)
        yield ToolCallArgsEvent(tool_call_id=call.id, delta=call.arguments_json)
        yield ToolCallEndEvent(tool_call_id=call.id)

    def _result(self, trace: ToolTrace) -> ToolCallResultEvent:
        call_id = trace.call.id
        self._unanswered.pop(call_id, None)
        inside = self._inside(call_id)
        if inside is not None:  # a call inside one of the turn's: a message id of its own
            number = call_id.rpartition(".")[2]
            return self._result_event(trace, f"{self._id(self.turn_at + 1 + inside)}.{number}")
        index = next((i for i, c in enumerate(self.turn_calls) if c.id == call_id), 0)
        return self._result_event(trace, self._id(self.turn_at + 1 + index))

    def call_path(self, call_id: str) -> str:
        """``call_id`` as a pending call's id lists it: after the id of the turn's call it was
        made inside (a program's call ``c1.2``, in ``run_code``'s ``c1``: ``c1/c1.2``)."""
        inside = self._inside(call_id)
        return call_id if inside is None else f"{self.turn_calls[inside].id}/{call_id}"

    def _inside(self, call_id: str) -> int | None:
        """The place of the turn's call that ``call_id`` was made inside (``"<its id>.<n>"``),
        or None for any other call."""
        if any(made.id == call_id for made in self.turn_calls):
            return None
        outer, dot, _ = call_id.rpartition(".")
        found = (i for i, made in enumerate(self.turn_calls) if dot and made.id == outer)
        return next(found, None)

    def _result_event(self, trace: ToolTrace, message: str) -> ToolCallResultEvent:
        call_id = trace.call.id
        how: dict[str, Any] = {
            "ok": trace.result.ok,
            "errorCode": trace.result.error_code,
            "durationS": trace.duration_s,
        }
        if self.show_exceptions and trace.error is not None:
            error = trace.error
            kind = error.type_name if isinstance(error, RecordedError) else type(error).__name__
            how["error"] = f"{kind}: {error}"
        decision = self._remembered.pop(call_id, None)
        if decision is not None:
            how["decision"] = decision
        return ToolCallResultEvent(
            message_id=message,
            tool_call_id=call_id,
            content=trace.result.output,
            role="tool",
            metadata={"tooldeck": how},
        )
