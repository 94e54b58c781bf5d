"""Agents as tools: one agent's run inside another agent's tool call.

``agent.as_tool(...)`` makes a ToolEntry whose handler is an ``AgentTool``, a handler like
any other: validated arguments in, and out the inner agent's answer (a ``ToolOutcome``
carrying the inner trace), or a ``Pause`` when a call inside the inner run waits for a
decision. The loop runs it through the same call path as every tool (timeouts, middleware);
the entry says ``emits_events``, so the inner run's events reach the outer stream as they
happen, nested under the call (``NestedEvent``), and the outer run counts the inner usage
from them.

A pause of the inner run pauses the outer one: the outer ``Checkpoint.pending`` shows the
inner pending calls in the call's place, and resuming the outer run with decisions for them
runs the call again with ``RunContext.resumed``, which the handler goes on from.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import Unpack

from tooldeck.errors import ErrorCode, LimitExceeded, RunStopped, ToolDefinitionError
from tooldeck.messages import Message, ToolResult
from tooldeck.models.base import Model
from tooldeck.results import Checkpoint, Decision, RunResult
from tooldeck.run._engine.spending import SPENDING_STOPS
from tooldeck.run.events import Event, FinalAnswer
from tooldeck.run.history import Sees, checked_sees, seen_messages, sees_from_history
from tooldeck.run.options import ParentCall, RunArgs
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.handler import Pause, ToolHandler, ToolOutcome
from tooldeck.tools.options import ToolOptionArgs
from tooldeck.tools.registry import EntryWrapper, ToolEntry

"""What the inner agent's run is given of the outer conversation: nothing, or all of it."""


class InnerAgent(Protocol):
    """What an agent tool needs of its agent (``tooldeck.Agent`` has it)."""

    def stream(self, prompt: str, **options: Unpack[RunArgs[Any]]) -> AsyncGenerator[Event, None]:
        """Run from a prompt, yielding the run's events."""
        ...

    def resume_stream(
        self,
        checkpoint: Checkpoint | str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        **options: Unpack[RunArgs[Any]],
    ) -> AsyncGenerator[Event, None]:
        """Go on with a paused run, yielding its events."""
        ...

    def check_resumable(self, checkpoint: Checkpoint) -> None:
        """Raise CheckpointError unless this agent can go on from ``checkpoint``."""
        ...

    def wrapped(
        self,
        *,
        model: Callable[[Model], Model] | None = None,
        tool: EntryWrapper | None = None,
    ) -> InnerAgent:
        """A copy whose model and tool entries pass through the given wrappers."""
        ...


@runtime_checkable
class NestingHandler(Protocol):
    """A handler whose calls run a run of their own (an agent tool): the layers that wrap a
    run (a durable run's steps) wrap the inner run too, and a resume checks the inner
    paused run before anything runs."""

    def check_resume(self, state: Checkpoint) -> None:
        """Raise CheckpointError unless a call paused with ``state`` can go on."""
        ...

    def wrapped(
        self, model: Callable[[Model], Model], tool: EntryWrapper, *, derived_run_ids: bool
    ) -> ToolHandler:
        """This handler with its inner runs' model and tool entries wrapped; with
        ``derived_run_ids`` each inner run's id is ``<outer run id>/<call id>``, the same in
        every execution of the outer run (a durable run's replays)."""
        ...


# The arguments of an agent tool made without ``parameters=``: one text. (No docstring:
# pydantic would show it to the model as the schema's description.)
class AgentInput(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built when an agent tool is first made

    input: str = Field(description="The task for the agent, with everything it needs to know.")


class AgentTool:
    """The handler of an agent tool: validated arguments in, the inner agent's answer out."""

    def __init__(
        self,
        agent: InnerAgent,
        schema: FunctionTool[..., Any],
        parameters: type[BaseModel] | None,
        sees: Sees,
        derived_run_ids: bool = False,
    ) -> None:
        self.agent = agent
        self.name = schema.name
        self._schema = schema
        self._parameters = parameters
        self._sees = sees
        self._derived_run_ids = derived_run_ids

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments checked against the agent tool's input schema (InvalidArguments if not)."""
        return self._schema.validate(arguments)

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> ToolOutcome | Pause:
        """Run the inner agent, or go on with its paused run (``context.resumed``), until it
        answers, stops or pauses; its events go to ``context.emit``."""
        stream = self._inner_run(arguments, context)
        final: RunResult[Any] | None = None
        try:
            async for event in stream:
                if context.emit is not None:
                    context.emit(event)
                if isinstance(event, FinalAnswer):
                    final = event.result
        except RunStopped as stopped:
            return self._stopped(stopped)
        finally:  # a call cancelled by a timeout closes the inner run now, not at collection
            await stream.aclose()
        if final is None:
            raise AssertionError("the inner run's event stream ended without a final answer")
        if final.checkpoint is not None:
            return Pause(final.checkpoint)
        tainted = final.tainted_by is not None
        if final.output is None and final.stop_reason in SPENDING_STOPS:  # no last answer
            text = (
                f"the agent {self.name!r} stopped without an answer (stop reason: "
                f"{final.stop_reason}): its budget was spent, so it was not asked again"
            )
            failed = ToolResult.failure(ErrorCode.TOOL_ERROR, text)
            return ToolOutcome(failed, None, final.tool_trace, tainted)
        return ToolOutcome(ToolResult.success(final.answer), None, final.tool_trace, tainted)

    def _inner_run(
        self, arguments: dict[str, Any], context: RunContext[Any]
    ) -> AsyncGenerator[Event, None]:
        parent = ParentCall(context.run_id, context.call_id) if context.run_id else None
        budget = context.budget  # the outer run's: its inner runs spend from it too
        inherited = context.inherited  # its guardrails, policy, taint, cancel: run.inherited
        resumed = context.resumed
        if resumed is not None:
            return self.agent.resume_stream(
                resumed.state,
                resumed.decisions,
                deps=context.deps,
                parent=parent,
                budget=budget,
                inherited=inherited,
            )
        inner_id = None
        if self._derived_run_ids:  # a durable run's: its call ids are the same in replays
            inner_id = f"{context.run_id}/{context.call_id}"
        elif inherited is not None and inherited.records is not None:
            inner_id = f"{context.run_id}/{context.round}:{context.place}"  # see run.inherited
        return self.agent.stream(
            self._prompt(arguments),
            deps=context.deps,
            history=self._history_of(context.messages),
            run_id=inner_id,
            parent=parent,
            budget=budget,
            inherited=inherited,
        )

    def check_resume(self, state: Checkpoint) -> None:
        """Raise CheckpointError unless the inner agent can go on from ``state``."""
        self.agent.check_resumable(state)

    def wrapped(
        self, model: Callable[[Model], Model], tool: EntryWrapper, *, derived_run_ids: bool
    ) -> AgentTool:
        """This agent tool, its agent's model and tools passing through the wrappers."""
        inner = self.agent.wrapped(model=model, tool=tool)
        return AgentTool(inner, self._schema, self._parameters, self._sees, derived_run_ids)

    def _prompt(self, arguments: dict[str, Any]) -> str:
        if self._parameters is None:
            return str(arguments["input"])
        return self._parameters(**arguments).model_dump_json()

    def _history_of(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """What the inner run sees of the outer conversation before the turn that called
        this tool (``sees``)."""
        if self._sees == "none":
            return ()
        before = tuple(messages)
        before = before[:-1] if before and before[-1].role == "assistant" else before
        seen = seen_messages(self._sees, before, f"agent tool {self.name!r}")
        return before if seen is None else tuple(seen)

    def _stopped(self, stopped: RunStopped) -> ToolOutcome:
        partial = stopped.result
        reason = partial.stop_reason if partial is not None else type(stopped).__name__
        text = f"the agent {self.name!r} stopped without an answer (stop reason: {reason})"
        if isinstance(stopped, LimitExceeded):  # tooldeck's own words; other stops may hold secrets
            text += f": {stopped}"
        trace = partial.tool_trace if partial is not None else ()
        return ToolOutcome(ToolResult.failure(ErrorCode.TOOL_ERROR, text), stopped, trace)


def agent_tool(
    agent: InnerAgent,
    *,
    name: str,
    description: str,
    parameters: type[BaseModel] | None = None,
    sees: Sees = "none",
    history: Literal["none", "full"] | None = None,
    **options: Unpack[ToolOptionArgs],
) -> ToolEntry:
    """``agent.as_tool(...)``: the agent as a tool of another agent, called like any tool.

    Args:
        agent: The inner agent (``self`` when called as ``agent.as_tool``).
        name: The tool's name (also the agent's name in ``NestedEvent.path``).
        description: What the outer model is told the agent does.
        parameters: A pydantic model for structured input (sent to the agent as JSON); by
            default the tool takes one ``input: str``, the agent's prompt.
        sees: What the inner run is given of the outer conversation before the call:
            ``"none"`` (only its input, the default), ``"all"``, ``"summary"``,
            ``"last_user"`` or a function of the messages (``tooldeck.run.history.Sees``,
            as a handoff's). Nothing of the inner run is copied back into the outer one.
        history: The name ``sees`` had before 0.2, with ``"full"`` for ``"all"`` (deprecated).
        **options: Tool options (``timeout=``, ``requires_approval=``, ...).

    The inner run uses the agent's own instructions, tools, limits and model, with the outer
    run's ``deps`` and shared ``budget`` (its requests, tokens and cost are drawn from it).
    It is part of the outer run's safety (``run._engine.inherited``): the outer run's guardrails and
    untrusted-content policy apply in it beside the agent's own, it starts with the outer
    run's taint, and the outer run's cancel reaches its tools (``ctx.cancelled``).
    Its events appear in the outer stream as NestedEvents, its usage counts in the outer
    usage, its calls are kept on ``ToolTrace.inner_trace``, and a call inside it that needs
    a decision pauses the outer run (whose checkpoint holds the inner one).
    """
    where = f"agent tool {name!r}"
    sees = checked_sees(sees_from_history(sees, history, "as_tool", {"full": "all"}), where)
    if parameters is not None and not (
        isinstance(parameters, type) and issubclass(parameters, BaseModel)
    ):
        raise ToolDefinitionError(
            f"agent tool {name!r}: parameters must be a pydantic model class or None, "
            f"got {parameters!r}"
        )
    schema: FunctionTool[..., Any] = FunctionTool(
        name, description, parameters or AgentInput, None, **options
    )
    handler = AgentTool(agent, schema, parameters, sees)
    origin = f"agent tool {name!r}"
    return ToolEntry(schema.spec, handler, schema.options, origin=origin, emits_events=True)
