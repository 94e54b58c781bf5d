"""What ``Agent.stream()`` yields, in order, as a run happens.

Events are plain slotted records (not frozen: that costs a third of a microsecond each, four
times a round); treat them as read-only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolSpec
from tooldeck.models.base import ModelSettings
from tooldeck.results import RememberedApproval, RunResult, ToolTrace
from tooldeck.safety import GuardrailDecision, UntrustedSource


@dataclass(slots=True)
class ModelRequest:
    """The model is about to be asked for its turn in round ``round``."""

    round: int
    message_count: int
    settings: ModelSettings
    tools: tuple[ToolSpec, ...] = ()
    """The tool list the model is shown in this request (it may change between rounds when
    the tools come from a registry or a toolset, e.g. after an MCP server's list changed)."""
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.tools)


@dataclass(slots=True)
class TextDelta:
    """Text the model has just written in round ``round`` (only with ``stream(deltas=True)``).

    The pieces of a turn joined are its ``ModelResponse.output.content``.
    """

    round: int
    text: str
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of a tool call the model is writing in round ``round`` (``deltas=True`` only).

    Every delta of a call carries its ``index`` in the turn and the ``call_id`` and ``name``
    known so far; the ``arguments_delta`` pieces joined are the arguments' JSON text.
    """

    round: int
    index: int
    call_id: str
    name: str
    arguments_delta: str
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""


@dataclass(slots=True)
class ModelResponse:
    """The model answered in round ``round``; ``output`` may hold tool calls."""

    round: int
    output: AssistantOutput
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""


@dataclass(slots=True)
class ToolCallStarted:
    """A call passed its checks and is about to run."""

    round: int
    call: ToolCall
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""
    remembered: RememberedApproval | None = None
    """The remembered approval it runs under (``Approve(scope="run" | "session")``), when
    its tool asks for approval and a person approved it for the run or the session."""


@dataclass(slots=True)
class ToolCallFinished:
    """A call ended (or was refused); ``trace.result`` is what the model will read."""

    round: int
    trace: ToolTrace
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""


@dataclass(slots=True)
class GuardrailChecked:
    """A guardrail judged the prompt, the answer, or a call's arguments or result."""

    round: int
    decision: GuardrailDecision
    data: Any = None
    """What the guardrail returned beside its verdict (``GuardrailResult.data``)."""
    replacement: Any = None
    """For a ``replaced`` verdict: the arguments the call ran with, or the result given."""
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""


@dataclass(slots=True)
class UntrustedContent:
    """Untrusted content entered the conversation for the first time: the result of a call
    of a tool marked ``trust="untrusted"`` (``Agent(after_untrusted=...)`` applies from now)."""

    round: int
    source: UntrustedSource
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""


@dataclass(slots=True)
class MessageJoined:
    """Messages sent to the run while it worked (``RunHandle.send``; a capability's
    ``join_messages``, as ``DurableAgent.send``'s) joined the conversation, after the results
    of the round before, ahead of the request of round ``round``."""

    round: int
    messages: tuple[Message, ...]
    """The user messages, oldest first, as the conversation now holds them."""
    sent: bool = True
    """False when the run ended before another request (it was cancelled, or stopped at a
    limit): the messages are kept at the end of the transcript, unanswered (``round`` is
    then the run's last)."""
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""


@dataclass(slots=True)
class HandedOff:
    """The agent ``source`` handed the conversation to ``target`` (its ``transfer_to_...``
    call ``call`` in round ``round``): ``target``'s loop goes on with the run."""

    round: int
    call: ToolCall
    source: str
    target: str
    agent: str = ""
    """The agent whose loop yielded it (``source``)."""


@dataclass(slots=True)
class FinalAnswer:
    """The run is over; ``result`` holds the answer, the conversation and the trace."""

    result: RunResult[Any]
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""


@dataclass(slots=True)
class RunRecovered:
    """The session held a run that never finished (its process was killed, or it stopped
    with an error), or the run asked for had finished already: what became of it, before
    anything of this run happens.

    ``how`` says which: ``"continued"``, this run is that run going on from its journal (the
    same run id, or the same resume: the rounds it had are not asked again);
    ``"closed"``, that run was kept in the conversation as it stood and this run starts
    after it; ``"stored"``, the run asked for had committed: its stored result is this
    run's (``FinalAnswer`` follows; nothing is asked or run).
    """

    run_id: str
    """The id of the run met again."""
    how: Literal["continued", "closed", "stored"]
    rounds: int
    """The model rounds of it kept (not asked again)."""
    settled: tuple[ToolTrace, ...] = ()
    """Its calls that had not reported when it stopped, as the model now reads them: a
    ``side_effects`` call's recorded result, its ``reconcile``'s answer, or
    ``error[interrupted]``; a call that never started, ``error[interrupted]`` saying so."""
    agent: str = ""
    """The name of the agent that holds the run."""


AgentEvent = (
    ModelRequest
    | TextDelta
    | ToolCallDelta
    | ModelResponse
    | ToolCallStarted
    | ToolCallFinished
    | GuardrailChecked
    | UntrustedContent
    | MessageJoined
    | HandedOff
    | RunRecovered
    | FinalAnswer
)
"""What one agent's own loop yields."""


@dataclass(slots=True)
class NestedEvent:
    """An event of an agent run inside an agent tool (``agent.as_tool``), in the outer stream.

    Nesting is flat: an event two agent tools deep is one NestedEvent whose ``path`` has two
    names. The inner run's usage is counted in the outer run's from these events.
    """

    path: tuple[str, ...]
    """The agent tools the event comes from, outermost first: ``("planner", "researcher")``."""
    call_ids: tuple[str, ...]
    """The ids of those agent-tool calls, in the same order as ``path``."""
    event: AgentEvent
    """What the innermost agent's loop yielded."""
    agent: str = ""
    """The name of the agent whose loop yielded it (it changes at each handoff)."""

    @property
    def call_id(self) -> str:
        """The id of the call, in this run, of the agent tool the event comes from."""
        return self.call_ids[0]


Event = AgentEvent | NestedEvent
"""Any event of a stream: the run's own, or one of an agent tool's run inside it."""


def nest(path: tuple[str, ...], call_ids: tuple[str, ...], event: Event) -> NestedEvent:
    """``event`` of the run inside the call at ``path``, as the outer stream shows it (flat:
    an event already nested is nested once more, with the longer path)."""
    if isinstance(event, NestedEvent):
        return NestedEvent((*path, *event.path), (*call_ids, *event.call_ids), event.event)
    return NestedEvent(path, call_ids, event)


async def last_result(stream: AsyncIterator[Event]) -> RunResult[Any]:
    """The result a run's event stream ends with (its FinalAnswer's)."""
    # Read the stream to its end (FinalAnswer is its last event): an async generator left
    # suspended would be closed later by asyncio's finalizer, a task per run.
    result = None
    async for event in stream:
        if isinstance(event, FinalAnswer):
            result = event.result
    if result is None:
        raise AssertionError("the event stream ended without a final answer")
    return result
