"""Agents as tools: one agent's run inside another agent's tool call.

``agent.as_tool(...)`` makes a ToolEntry whose handler is an ``AgentTool``. Its arguments
are validated like any tool's; the loop then runs each call as a *leg* of the inner run
(``AgentTool.leg``), through the same call path as every tool (timeouts, middleware):

- the inner run's events go out as they happen, as ``NestedEvent``s tagged with the agent
  path and the call ids; the outer run counts the inner usage from them (each inner
  ``ModelResponse`` once, so a resumed inner run is never counted twice);
- its answer is the observation; a stop at a limit or an error is a failed observation
  naming the inner stop reason; the inner trace is kept on ``ToolTrace.inner_trace``;
- a pause of the inner run pauses the outer one: the leg returns the inner Checkpoint, which
  the outer turn keeps on the call's PendingCall (``kind="agent"``, ``nested``); the outer
  ``Checkpoint.pending`` shows the inner pending calls in its place, and resuming the outer
  run with decisions for them resumes the inner run where it was (the next leg).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field
from typing_extensions import Unpack

from tooldeck.errors import (
    CheckpointError,
    ErrorCode,
    LimitExceeded,
    RunStopped,
    ToolDeckError,
    ToolDefinitionError,
)
from tooldeck.messages import Message, ToolResult
from tooldeck.results import Checkpoint, RunResult, ToolTrace
from tooldeck.run.checkpoint import Decision
from tooldeck.run.events import Event, FinalAnswer, NestedEvent
from tooldeck.run.observer import PARENT_CALL, ParentCall
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.options import ToolOptionArgs
from tooldeck.tools.registry import ToolEntry, ToolView

if TYPE_CHECKING:
    from tooldeck.run.agent import Agent

History = Literal["none", "full"]
"""What the inner agent sees of the outer conversation: nothing, or all of it."""

Emit = Callable[[NestedEvent], None]


# The arguments of an agent tool made without ``parameters=``: one text. (No docstring:
# pydantic would show it to the model as the schema's description.)
class AgentInput(BaseModel):
    input: str = Field(description="The task for the agent, with everything it needs to know.")


@dataclass(frozen=True, slots=True)
class NestedResume:
    """A paused inner run to go on with: its checkpoint and the decisions on its calls."""

    checkpoint: Checkpoint
    decisions: dict[str, Decision]


@dataclass(frozen=True, slots=True)
class NestedOutcome:
    """How an inner run ended (a leg that paused returns the inner Checkpoint instead)."""

    result: ToolResult
    """What the outer model reads: the answer, or why the inner run stopped without one."""
    trace: tuple[ToolTrace, ...]
    """Every call of the inner run."""
    error: RunStopped | None = None
    """The inner run's stop, kept for the host."""


class AgentTool:
    """The handler of an agent tool: validated arguments in, the inner agent's answer out."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        schema: FunctionTool[..., Any],
        parameters: type[BaseModel] | None,
        history: History,
        derived_run_ids: bool = False,
    ) -> None:
        self.agent = agent
        self.name = schema.name
        self._schema = schema
        self._parameters = parameters
        self._history = history
        self._derived_run_ids = derived_run_ids

    def with_agent(self, agent: Agent[Any, Any], *, derived_run_ids: bool = False) -> AgentTool:
        """The same tool run by another agent (a wrapped copy of this one). With
        ``derived_run_ids`` each inner run's id is ``<outer run id>/<call id>``, the same in
        every execution of the outer run (a durable run's replays), instead of a random one."""
        return AgentTool(agent, self._schema, self._parameters, self._history, derived_run_ids)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._schema.validate(arguments)

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> str:
        """The plain tool contract, for use outside an agent's loop: the inner answer. A stop
        of the inner run raises it; so does a pause, which only an agent's loop can carry."""
        outcome = await self.leg(arguments, context, _drop)
        if isinstance(outcome, Checkpoint):
            raise ToolDeckError(
                f"the agent tool {self.name!r} paused (a call waits for a decision); call it "
                "from an agent's run, which pauses with it"
            )
        if outcome.error is not None:
            raise outcome.error
        return outcome.result.output

    async def leg(
        self,
        arguments: dict[str, Any],
        context: RunContext[Any],
        emit: Emit,
        resume: NestedResume | None = None,
        conversation: Sequence[Message] = (),
        run_id: str = "",
    ) -> NestedOutcome | Checkpoint:
        """Run the inner agent, or go on with its paused run, until it answers, stops or pauses.

        ``conversation`` is the outer one, ending with the turn that made this call;
        ``run_id`` the outer run's (a run log links the inner run to the call with it).
        """
        parent = PARENT_CALL.set(ParentCall(run_id, context.call_id) if run_id else None)
        try:  # the inner run reads its parent as it starts, before its first event
            if resume is None:
                prompt, history = self._prompt(arguments), self._history_of(conversation)
                inner_id = f"{context.run_id}/{context.call_id}" if self._derived_run_ids else None
                stream = self.agent.stream(
                    prompt, deps=context.deps, history=history, run_id=inner_id
                )
            else:
                checkpoint, decisions = resume.checkpoint, resume.decisions
                stream = self.agent.resume_stream(checkpoint, decisions, deps=context.deps)
        finally:
            PARENT_CALL.reset(parent)
        path, call_ids = (self.name,), (context.call_id,)
        final: RunResult[Any] | None = None
        try:
            async for event in stream:
                emit(nest(path, call_ids, event))
                if isinstance(event, FinalAnswer):
                    final = event.result
        except RunStopped as stopped:
            return self._stopped(stopped)
        finally:  # a leg cancelled by a timeout closes the inner run now, not at collection
            if isinstance(stream, AsyncGenerator):
                await stream.aclose()
        if final is None:
            raise AssertionError("the inner run's event stream ended without a final answer")
        if final.checkpoint is not None:
            return final.checkpoint
        return NestedOutcome(ToolResult.success(final.answer), final.tool_trace)

    def _prompt(self, arguments: dict[str, Any]) -> str:
        if self._parameters is None:
            return str(arguments["input"])
        return self._parameters(**arguments).model_dump_json()

    def _history_of(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The outer conversation before the turn that called this tool, for ``history="full"``."""
        if self._history == "none":
            return ()
        shown = tuple(messages)
        return shown[:-1] if shown and shown[-1].role == "assistant" else shown

    def _stopped(self, stopped: RunStopped) -> NestedOutcome:
        partial = stopped.result
        reason = partial.stop_reason if partial is not None else type(stopped).__name__
        text = f"the agent {self.name!r} stopped without an answer (stop reason: {reason})"
        if isinstance(stopped, LimitExceeded):  # tooldeck's own words; other stops may hold secrets
            text += f": {stopped}"
        trace = partial.tool_trace if partial is not None else ()
        return NestedOutcome(ToolResult.failure(ErrorCode.TOOL_ERROR, text), trace, stopped)


def agent_tool(
    agent: Agent[Any, Any],
    *,
    name: str,
    description: str,
    parameters: type[BaseModel] | None = None,
    history: History = "none",
    **options: Unpack[ToolOptionArgs],
) -> ToolEntry:
    """``agent.as_tool(...)``: the agent as a tool of another agent, called like any tool.

    Args:
        agent: The inner agent (``self`` when called as ``agent.as_tool``).
        name: The tool's name (also the agent's name in ``NestedEvent.path``).
        description: What the outer model is told the agent does.
        parameters: A pydantic model for structured input (sent to the agent as JSON); by
            default the tool takes one ``input: str``, the agent's prompt.
        history: ``"none"``: the agent sees only its input; ``"full"``: the outer
            conversation before the call too (it is not copied back into the outer one).
        **options: Tool options (``timeout=``, ``requires_approval=``, ...).

    The inner run uses the agent's own instructions, tools, limits and model, with the outer
    run's ``deps``. Its events appear in the outer stream as NestedEvents, its usage counts
    in the outer usage, its calls are kept on ``ToolTrace.inner_trace``, and a call inside it
    that needs a decision pauses the outer run (whose checkpoint holds the inner one).
    """
    if history not in ("none", "full"):
        raise ValueError(f"history must be 'none' or 'full', got {history!r}")
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
    handler = AgentTool(agent, schema, parameters, history)
    return ToolEntry(schema.spec, handler, schema.options, origin=f"agent tool {name!r}")


def nest(path: tuple[str, ...], call_ids: tuple[str, ...], event: Event) -> NestedEvent:
    """``event`` of the agent tool at ``path``, as the outer stream shows it (kept flat)."""
    if isinstance(event, NestedEvent):
        return NestedEvent((*path, *event.path), (*call_ids, *event.call_ids), event.event)
    return NestedEvent(path, call_ids, event)


def decisions_inside(call_id: str, decisions: Mapping[str, Decision]) -> dict[str, Decision]:
    """The decisions on the calls inside the agent-tool call ``call_id``, keyed for its run."""
    prefix = f"{call_id}/"
    size = len(prefix)
    return {key[size:]: value for key, value in decisions.items() if key.startswith(prefix)}


def check_nested(checkpoint: Checkpoint, view: ToolView) -> None:
    """Refuse, before anything runs, a paused inner run that its agent cannot go on from."""
    for pending in checkpoint.turn.pending:
        if pending.nested is None:
            continue
        entry = view.dispatch.get(pending.call.name)
        handler = entry.handler if entry is not None else None
        if not isinstance(handler, AgentTool):
            raise CheckpointError(
                f"pending call {pending.call.id!r} holds the paused run of an agent tool, but "
                f"{pending.call.name!r} is not an agent tool of this agent"
            )
        handler.agent._check_paused(pending.nested)


def _drop(event: NestedEvent) -> None:
    del event
