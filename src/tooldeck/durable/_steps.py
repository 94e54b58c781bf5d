"""Each model request and each tool call of a durable run as a DBOS step.

The agent's model and tool handlers are wrapped (``Agent.wrapped``), so the one loop runs
unchanged and calls them where it always does. DBOS keys a workflow's steps by their order
(a step id counted from the workflow's start) and checks each step's name on replay:

- a model request is the step named ``<agent>.model``; the loop asks the model only when no
  call is running, so its step ids are the same in every execution;
- a tool call is the step named ``<agent>.tool:<tool>:<call id>``; its id is reserved
  (``DBOS.reserve_step``) when the model's turn arrives, one per call in the model's order,
  so calls that run concurrently, or after a pause, keep the same ids whatever order they
  start and finish in. A replay that met another call at a recorded id would fail loudly
  (DBOS compares the names), never return another call's result.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from dbos import DBOS, StepOptions, StepReservation
from pydantic import BaseModel

from tooldeck.durable._once import Work, at_most_once
from tooldeck.errors import ErrorCode, ModelError
from tooldeck.messages import AssistantOutput, ToolCall, ToolResult, ToolSpec
from tooldeck.models.base import Ask, AskModel, Model, answer_of
from tooldeck.models.wrapper import WrapperModel
from tooldeck.results import RecordedError
from tooldeck.run._engine.calls.texts import timeout_text
from tooldeck.run.agent_tool import NestingHandler
from tooldeck.tools.context import RunContext
from tooldeck.tools.handler import HandlerOutput, ToolHandler, ToolOutcome
from tooldeck.tools.registry import EntryWrapper, ToolEntry

CallSteps = dict[tuple[str, str], list[StepReservation]]
"""(agent name, call id) -> the step ids reserved for the call (a list: a model may reuse an
id); the agent name tells an agent tool's inner calls from the outer ones."""

reserved_steps: ContextVar[CallSteps | None] = ContextVar("tooldeck_durable_steps", default=None)
"""The step ids reserved for the current workflow's calls, set when the workflow starts
(tasks the loop creates for concurrent calls share the same dict)."""


class DurableModel(WrapperModel):
    """A model whose every request is a DBOS step: a recovered run reads the recorded turn
    instead of asking again, and the turn's calls get their step ids."""

    def __init__(self, inner: Model, agent_name: str) -> None:
        super().__init__(inner)
        self.agent_name = agent_name
        self._options: StepOptions = {"name": f"{agent_name}.model"}

    async def answer(self, ask: Ask) -> AssistantOutput:
        asked: list[AssistantOutput] = []
        recorded = await DBOS.run_step_async(self._options, self._ask, ask, asked)
        # The turn as the model gave it, or, in a replay, as the database kept it.
        if asked:
            output = asked[0]
        else:
            kept = _recorded_turn(recorded)
            _check_same_tools(kept, ask.tools)
            output = kept.turn
        if output.tool_calls:
            _reserve(self.agent_name, output.tool_calls)
        return output

    stream_answer = AskModel.stream_answer
    """AskModel's own: the turn as one item from ``answer``, the step (a step records a
    whole turn), never the wrapped model's chunks."""

    async def _ask(self, ask: Ask, asked: list[AssistantOutput]) -> str:
        """The step: ask the model; its turn is recorded as JSON (plain, readable in the
        database, and cheaper to write than a pickle)."""
        try:
            output = await answer_of(self.wrapped, ask)
        except Exception as error:
            if _survives_pickling(error):
                raise
            failure = ModelError(f"the model call failed: {type(error).__name__}: {error}")
            raise failure from error
        asked.append(output)
        return RecordedTurn(turn=output, called=_called(output, ask.tools)).model_dump_json()


class RecordedTurn(BaseModel):
    """A model request's step result, as the database keeps it."""

    turn: AssistantOutput
    called: dict[str, str] = {}
    """Each tool the turn calls -> a digest of its parameters as the model was shown them
    ("" for a name it was not shown)."""


def _called(output: AssistantOutput, tools: Sequence[ToolSpec]) -> dict[str, str]:
    if not output.tool_calls:
        return {}
    names = {call.name for call in output.tool_calls}
    shown = {spec.name: _digest(spec) for spec in tools if spec.name in names}
    return {name: shown.get(name, "") for name in sorted(names)}


def _digest(spec: ToolSpec) -> str:
    text = json.dumps(spec.parameters, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _recorded_turn(recorded: object) -> RecordedTurn:
    """The model turn a replay reads from the database; a ModelError naming the run when it
    is not one (the run cannot go on from a turn it cannot read)."""
    try:
        if not isinstance(recorded, str | bytes):
            raise TypeError(f"a {type(recorded).__name__}, not JSON text")
        kept = RecordedTurn.model_validate_json(recorded)
        kept.model_dump_json()  # a replay sends it on: it must be writable again
    except (TypeError, ValueError, RecursionError) as error:  # ValidationError: a ValueError
        raise ModelError(
            f"durable run {DBOS.workflow_id!r} cannot be replayed: the model turn its step "
            f"{DBOS.step_id} recorded in the DBOS system database cannot be read ({error}); "
            "cancel the run"
        ) from None
    return kept


def _check_same_tools(kept: RecordedTurn, tools: Sequence[ToolSpec]) -> None:
    """Refuse to replay a recorded turn whose calls would meet other tools than it was made
    with: the run would go on from results that never happened."""
    now = _called(kept.turn, tools)
    if now == kept.called:
        return
    kinds = {
        "gone": [name for name, was in kept.called.items() if was and not now[name]],
        "other parameters": [
            n for n, was in kept.called.items() if was and now[n] not in ("", was)
        ],
        "new": [name for name, was in kept.called.items() if not was and now[name]],
    }
    differences = "; ".join(
        f"{kind}: {', '.join(map(repr, names))}" for kind, names in kinds.items() if names
    )
    raise ModelError(
        f"durable run {DBOS.workflow_id!r} cannot be replayed: a recorded model turn calls "
        f"tools that changed since it ran ({differences}). A recovered run needs "
        "the tools it ran with: run this process with those tools (then recover or fork the "
        "run again), or cancel the run"
    )


def _reserve(agent_name: str, calls: Sequence[ToolCall]) -> None:
    steps = reserved_steps.get()
    if steps is None:  # not inside a durable run: each call takes the next step id
        return
    for call in calls:
        steps.setdefault((agent_name, call.id), []).append(DBOS.reserve_step())


def _take(agent_name: str, call_id: str) -> StepReservation | None:
    steps = reserved_steps.get()
    reserved = steps.get((agent_name, call_id)) if steps is not None else None
    if not reserved:
        return None
    return reserved.pop(0)


@dataclass(frozen=True, slots=True)
class DurableHandler:
    """Runs a tool call as a DBOS step at the id reserved for it.

    The tool's own timeout is applied inside the step, so a call that timed out is recorded
    as such (``tool_timeout``) and not run again after a recovery.
    """

    inner: ToolHandler
    agent_name: str
    timeout: float | None = None
    timeout_text: str = ""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.inner.validate(arguments)

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> HandlerOutput:
        return await self.run_step(self._call, arguments, context)

    async def run_step(
        self, work: Work, arguments: dict[str, Any], context: RunContext[Any]
    ) -> HandlerOutput:
        """``work`` (the call, or what stands for it) as the call's step: recorded, or, in a
        replay, read back."""
        options: StepOptions = {
            "name": f"{self.agent_name}.tool:{context.tool_name}:{context.call_id}"
        }
        reserved = _take(self.agent_name, context.call_id)
        if reserved is None:
            return await DBOS.run_step_async(options, work, arguments, context)
        return await reserved.run_async(options, work, arguments, context)

    async def call(self, arguments: dict[str, Any], context: RunContext[Any]) -> HandlerOutput:
        """The call itself, as its step runs it (within the tool's timeout)."""
        return await self._call(arguments, context)

    async def _call(self, arguments: dict[str, Any], context: RunContext[Any]) -> HandlerOutput:
        try:
            if self.timeout is None:
                output = await self.inner.run(arguments, context)
            else:
                output = await self._call_within(self.timeout, arguments, context)
        except Exception as error:
            if _survives_pickling(error):
                raise
            raise RecordedError(type(error).__name__, str(error)) from error
        return _picklable(output)

    async def _call_within(
        self, limit: float, arguments: dict[str, Any], context: RunContext[Any]
    ) -> HandlerOutput:
        scope = None
        try:
            async with asyncio.timeout(limit) as scope:
                return await self.inner.run(arguments, context)
        except TimeoutError:
            if scope is None or not scope.expired():
                raise  # the tool's own TimeoutError
            return ToolResult.failure(ErrorCode.TOOL_TIMEOUT, self.timeout_text)


def durable_entries(agent_name: str) -> EntryWrapper:
    """The wrapper that makes each tool entry's calls steps (external tools run elsewhere)."""

    def wrap(entry: ToolEntry) -> ToolEntry:
        if entry.external:
            return entry
        if isinstance(entry.handler, NestingHandler):  # its inner run's steps are ours
            return _durable_nesting(entry, entry.handler, agent_name)
        timeout = entry.options.timeout
        text = timeout_text(entry) if timeout is not None else ""
        handler = DurableHandler(entry.handler, agent_name, timeout, text)
        if entry.options.side_effects:
            return at_most_once(entry, handler)
        return replace(entry, handler=handler, options=replace(entry.options, timeout=None))

    return wrap


def _durable_nesting(entry: ToolEntry, handler: NestingHandler, agent_name: str) -> ToolEntry:
    """A tool whose calls run a run of their own (an agent tool): that run's requests and
    calls are steps of the outer workflow, named ``<agent>/<tool>.model`` and
    ``<agent>/<tool>.tool:...``, and its id is derived from the call's. Its calls run one at
    a time (``sequential``): an inner run's requests take the next step ids, so two inner
    runs at once would take them in an order a replay could not repeat."""
    inner_name = f"{agent_name}/{entry.spec.name}"
    durable = handler.wrapped(
        lambda model: DurableModel(model, inner_name),
        durable_entries(inner_name),
        derived_run_ids=True,
    )
    return replace(entry, handler=durable, options=replace(entry.options, sequential=True))


def _picklable(output: HandlerOutput) -> HandlerOutput:
    """A handler's output as DBOS can record it: an exception kept beside a result that
    would not survive pickling is kept as its type's name and message."""
    if not isinstance(output, ToolOutcome) or not isinstance(output.error, Exception):
        return output
    if _survives_pickling(output.error):
        return output
    kept = RecordedError(type(output.error).__name__, str(output.error))
    return ToolOutcome(output.result, kept, output.inner_trace)


def _survives_pickling(error: Exception) -> bool:
    """DBOS records a step's exception with pickle and raises it again on replay; one that
    cannot be read back would make the recovery itself fail."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return False
    return True
