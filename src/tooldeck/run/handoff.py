"""Handoffs: an agent hands the conversation to another, which goes on with the same run.

``Agent(handoffs=[billing, handoff(refunds, sees="last_user")])`` shows the model one
``transfer_to_<name>`` tool per handoff. Its call runs like any tool call (it counts
against the run's call limit and its round against ``max_rounds``, it is a step of a
durable run, ``on_handoff`` runs inside it), and is answered ``Transferred to 'billing'.``;
then the loop of the agent handed to goes on with the run (``run._engine.handing_over``): its
instructions, tools, model, limits and output type, from what ``sees=`` gives it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from tooldeck.errors import ErrorCode, ToolDefinitionError
from tooldeck.messages import AssistantOutput, Message, ToolResult
from tooldeck.models.base import Model
from tooldeck.results import HistorySummary, ShownHistory
from tooldeck.run._engine.loop import RunSetup
from tooldeck.run.events import HandedOff
from tooldeck.run.history import (
    HistoryRequest,
    HistoryStrategy,
    Prepared,
    Sees,
    checked_sees,
    current_exchange,
    seen_messages,
    sees_from_history,
)
from tooldeck.run.history import summary_of as summary_of  # its home before 0.2
from tooldeck.run.policy import Limits
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import TOOL_NAME, FunctionTool
from tooldeck.tools.registry import EntryWrapper, ToolEntry

HandoffHistory = Sees
"""The name ``Sees`` had for handoffs before 0.2 (``tooldeck.run.history.Sees``)."""
_PREFIX = "transfer_to_"


@runtime_checkable
class HandoffAgent(Protocol):
    """What a handoff needs of its agent (``tooldeck.Agent`` has it)."""

    @property
    def name(self) -> str:
        """The agent's name: in events, ``RunResult.agent`` and checkpoints."""
        ...

    @property
    def handoffs(self) -> Sequence[HandoffAgent | Handoff]:
        """The agents it may hand the conversation to."""
        ...

    @property
    def limits(self) -> Limits:
        """Its limits, which apply (with the run's counters) while it has the run."""
        ...

    @property
    def checkpoint_key(self) -> bytes | None:
        """The key signing its runs' checkpoints."""
        ...

    @property
    def _wrappers(self) -> RunWrappers:
        """What ``Agent.wrapped`` passed its model and tool entries through."""
        ...

    def _setup(self) -> RunSetup:
        """What its loop reads of it: instructions, tools, model, output plan..."""
        ...


@dataclass(frozen=True, slots=True)
class RunWrappers:
    """What a copy made by ``Agent.wrapped`` passes its model and tool entries through
    (``tooldeck.durable``: each request and call a step): every agent a run of the copy is
    handed to passes through them too."""

    model: Callable[[Model], Model] | None = None
    tool: EntryWrapper | None = None
    origin: object = None
    """The agent the copy was made from (a handoff back to it comes back to the copy)."""

    def then(
        self, model: Callable[[Model], Model] | None, tool: EntryWrapper | None, origin: object
    ) -> RunWrappers:
        """These wrappers, then ``model`` and ``tool``."""
        inner_model, inner_tool = self.model, self.tool
        if model is not None and inner_model is not None:
            model = _after(inner_model, model)
        if tool is not None and inner_tool is not None:
            tool = _after(inner_tool, tool)
        return RunWrappers(model or inner_model, tool or inner_tool, self.origin or origin)

    def apply(self, setup: RunSetup) -> RunSetup:
        """``setup`` (of an agent handed the run) with its model and tools wrapped."""
        asking, tools = setup.asking, setup.tools
        if self.model is not None:
            asking = replace(asking, model=self.model(asking.model))
        if self.tool is not None:
            tools = tools.wrapped(self.tool)
        return replace(setup, asking=asking, tools=tools)


T = TypeVar("T")


def _after(first: Callable[[T], T], then: Callable[[T], T]) -> Callable[[T], T]:
    return lambda value: then(first(value))


# The arguments of a transfer tool made without ``input_type=``: none. (No docstring:
# pydantic would show it to the model as the schema's description.)
class _NoInput(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built when a handoff is first made


@dataclass(frozen=True, slots=True)
class Handoff:
    """One agent another may hand the conversation to (made by ``handoff()``)."""

    agent: HandoffAgent
    name: str
    """The handoff's name: the model sees the tool ``transfer_to_<name>``."""
    description: str
    """What the model is told the tool does."""
    sees: Sees = "all"
    """What the agent handed to sees of the conversation (``tooldeck.run.history.Sees``)."""
    on_handoff: Callable[..., Any] | None = None
    """Called as the transfer call runs: ``(ctx)``, or ``(ctx, input)`` with ``input_type``."""
    input_type: type[BaseModel] | None = None
    """The transfer call's arguments (a pydantic model, e.g. a reason); none by default."""

    @property
    def history(self) -> Sees:
        """The name ``sees`` had before 0.2."""
        return self.sees

    @property
    def tool_name(self) -> str:
        """The name of the transfer tool the model is shown."""
        return _PREFIX + self.name

    def entry(self, transfers: frozenset[str]) -> ToolEntry:
        """The transfer tool (its spec, and the handler that answers its call) among the
        agent's ``transfers`` (their tool names)."""
        schema: FunctionTool[..., Any] = FunctionTool(
            self.tool_name, self.description, self.input_type or _NoInput, None
        )
        handler = TransferTool(self, schema, transfers)
        origin = f"handoff to {self.agent.name!r}"
        return ToolEntry(schema.spec, handler, schema.options, origin=origin)


def handoff(
    agent: HandoffAgent,
    *,
    name: str | None = None,
    description: str | None = None,
    sees: Sees = "all",
    on_handoff: Callable[..., Any] | None = None,
    input_type: type[BaseModel] | None = None,
    history: Sees | None = None,
) -> Handoff:
    """A handoff to ``agent``, for ``Agent(handoffs=[...])`` (an agent given alone there is
    ``handoff(agent)``).

    Args:
        agent: The agent that goes on with the run.
        name: The name in the tool ``transfer_to_<name>`` (default: the agent's name).
        description: What the model is told (default: "Hand the conversation to <name>...").
        sees: What the agent sees of the conversation so far: ``"all"``, ``"summary"``,
            ``"last_user"``, ``"none"``, or a function of the messages (``Sees``); the
            transfer call and its result follow, except with ``"all"``.
        on_handoff: Called as the handoff happens, sync or async: ``on_handoff(ctx)``, or
            ``on_handoff(ctx, input)`` with ``input_type``. What it raises fails the
            transfer call (the model reads a tool error, and no handoff happens).
        input_type: A pydantic model: the transfer call's arguments (e.g. a reason),
            validated; none by default.
        history: The name ``sees`` had before 0.2 (deprecated).

    Raises:
        ToolDefinitionError: a name providers do not accept, or an ``input_type`` that is
            not a pydantic model.
        ValueError: an unknown ``sees``.
    """
    name = agent.name if name is None else name
    if not isinstance(name, str) or not TOOL_NAME.match(_PREFIX + name):
        raise ToolDefinitionError(
            f"handoff name {name!r} (agent {agent.name!r}) does not make a tool name providers "
            f"accept: {_PREFIX}<name> must match {TOOL_NAME.pattern}; pass handoff(name=...)"
        )
    sees = checked_sees(sees_from_history(sees, history, "handoff", {}), f"handoff {name!r}")
    if input_type is not None and not (
        isinstance(input_type, type) and issubclass(input_type, BaseModel)
    ):
        raise ToolDefinitionError(
            f"handoff {name!r}: input_type must be a pydantic model class, got {input_type!r}"
        )
    if description is None:
        description = (
            f"Hand the conversation to {name!r}, which goes on with it and answers the user."
        )
    return Handoff(agent, name, description, sees, on_handoff, input_type)


def as_handoff(item: HandoffAgent | Handoff) -> Handoff:
    """An item of ``Agent(handoffs=...)`` as a Handoff; TypeError for anything else."""
    if isinstance(item, Handoff):
        return item
    if not isinstance(item, HandoffAgent):
        raise TypeError(
            f"Agent(handoffs=...) takes agents and handoff(agent, ...), got {item!r} "
            f"({type(item).__name__})"
        )
    return handoff(item)


def judges_answers(agent: HandoffAgent) -> bool:
    """Whether a run of ``agent`` may judge its answer before it ends: it, or an agent it may
    hand the run to, has output guardrails. A front door that shows the answer as the model
    writes it holds it back until then (``tooldeck run``, ``tooldeck web``, AG-UI)."""
    pending, seen = [agent], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        guards = current._setup().guards
        if guards is not None and guards.output:
            return True
        pending.extend(as_handoff(item).agent for item in current.handoffs)
    return False


def transferred(agent: str) -> str:
    """What the model reads as a transfer call's result."""
    return f"Transferred to {agent!r}."


class TransferTool:
    """The handler of a transfer tool: runs ``on_handoff``, answers ``Transferred to ...``."""

    def __init__(
        self, handoff: Handoff, schema: FunctionTool[..., Any], transfers: frozenset[str]
    ) -> None:
        self.handoff = handoff
        self._schema = schema
        self._transfers = transfers

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments checked against ``input_type`` (InvalidArguments if not)."""
        return self._schema.validate(arguments)

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> ToolResult:
        """Call ``on_handoff``; the loop hands the run over once the round is over. A turn
        hands over once: a transfer after another in the same turn is refused."""
        earlier = _earlier_transfer(context, self._transfers)
        if earlier is not None:
            return ToolResult.failure(
                ErrorCode.REFUSED,
                f"not transferred: the call {earlier!r} of this turn hands the conversation "
                "over already (one handoff per turn)",
            )
        hook = self.handoff.on_handoff
        if hook is not None:
            input_type = self.handoff.input_type
            called = hook(context) if input_type is None else hook(context, input_type(**arguments))
            if inspect.isawaitable(called):
                await called
        return ToolResult.success(transferred(self.handoff.agent.name))


def _earlier_transfer(context: RunContext[Any], transfers: frozenset[str]) -> str | None:
    """The id of a transfer call made before this one in the same turn, if any."""
    turn = context.messages[-1] if context.messages else None
    if turn is None:
        return None
    for call in turn.tool_calls:
        if call.id == context.call_id:
            return None
        if call.name in transfers:
            return call.id
    return None


def handed_history(
    handoff: Handoff, messages: Sequence[Message], handed: HandedOff
) -> ShownHistory | None:
    """What the agent handed to is shown in place of the conversation so far, by
    ``handoff.history`` (None: all of it). The run's messages stay whole."""
    if handoff.sees == "all":
        return None
    turn = _turn_of(messages, handed.call.id)
    chosen = seen_messages(handoff.sees, messages[:turn], f"handoff {handoff.name!r}")
    assert chosen is not None  # not "all"
    result = next(m for m in messages[turn:] if m.tool_call_id == handed.call.id)
    transfer = Message.assistant(AssistantOutput(tool_calls=(handed.call,)))
    return ShownHistory(messages=(*chosen, transfer, result), since=len(messages))


class ShownFirst(HistoryStrategy):
    """The history strategy of an agent handed a run with a chosen history: its requests
    carry ``shown.messages`` in place of the conversation's first ``shown.since`` messages
    (then its own strategy, if any, chooses from that)."""

    def __init__(self, shown: ShownHistory, inner: HistoryStrategy | None) -> None:
        self.shown = shown
        self.inner = inner

    async def keep_from(self, request: HistoryRequest) -> int:
        """Unused: ``prepare`` replaces the start of the conversation."""
        return 0

    async def prepare(self, request: HistoryRequest) -> Prepared:
        """The messages shown, then those since the handoff."""
        messages = (*self.shown.messages, *request.messages[self.shown.since :])
        if self.inner is None:
            return Prepared(messages, request.summary)
        current = current_exchange(messages)
        return await self.inner.prepare(replace(request, messages=messages, current=current))

    def remember(self, summary: HistorySummary) -> None:
        """Passed on to the agent's own strategy."""
        if self.inner is not None:
            self.inner.remember(summary)


def _turn_of(messages: Sequence[Message], call_id: str) -> int:
    """The index of the assistant message that made the call ``call_id``."""
    for index in range(len(messages) - 1, -1, -1):
        if any(call.id == call_id for call in messages[index].tool_calls):
            return index
    raise AssertionError(f"the transfer call {call_id!r} is not in the conversation")
