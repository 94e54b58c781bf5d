"""A durable run's ``side_effects`` calls: at most once across the workflow's executions.

DBOS records a step when it finishes, so a step whose process died mid-call runs again when
the workflow is recovered (at least once). A side-effect call is therefore two steps: a
marker, ``<agent>.started:<tool>:<call id>``, which records a value drawn fresh by each
execution, then the call's own step. An execution that reads back another execution's value
knows the call started before: its step, if recorded, gives the call's result without
running; if not (the process died in it), the step settles the call instead — the tool's
``reconcile`` decides, or the model reads ``error[interrupted]`` — and records that.

The marker takes the workflow's next step id, so the tool's calls run one at a time
(``sequential``), like an agent tool's: the ids are then the same in every execution.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any, Protocol

from dbos import DBOS, StepOptions

from tooldeck.run._engine.once import reconciled
from tooldeck.tools.context import RunContext
from tooldeck.tools.handler import HandlerOutput
from tooldeck.tools.options import Reconcile
from tooldeck.tools.registry import ToolEntry

Work = Callable[[dict[str, Any], RunContext[Any]], Coroutine[Any, Any, HandlerOutput]]
"""What a call's step runs: the call, or (a side-effect call met again) its settling."""


class CallStep(Protocol):
    """A durable call's step (``DurableHandler``)."""

    @property
    def agent_name(self) -> str:
        """Names the agent's steps."""
        ...

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]: ...

    async def run_step(
        self, work: Work, arguments: dict[str, Any], context: RunContext[Any]
    ) -> HandlerOutput: ...

    async def call(self, arguments: dict[str, Any], context: RunContext[Any]) -> HandlerOutput: ...


@dataclass(frozen=True, slots=True)
class OnceHandler:
    """Runs a ``side_effects`` call of a durable run at most once (see the module)."""

    step: CallStep
    reconcile: Reconcile | None

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.step.validate(arguments)

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> HandlerOutput:
        drawn = uuid.uuid4().hex
        name = f"{self.step.agent_name}.started:{context.tool_name}:{context.call_id}"
        options: StepOptions = {"name": name}
        marked = await DBOS.run_step_async(options, _mark, drawn)
        if marked == drawn:  # this execution starts the call
            return await self.step.run_step(self.step.call, arguments, context)
        return await self.step.run_step(self._settle, arguments, context)

    async def _settle(self, arguments: dict[str, Any], context: RunContext[Any]) -> HandlerOutput:
        """The step of a call an earlier execution started and never recorded."""
        settled = await reconciled(self.reconcile, context)
        if settled is None:  # its reconcile says it did not happen
            return await self.step.call(arguments, context)
        return settled


async def _mark(drawn: str) -> str:
    return drawn


def at_most_once(entry: ToolEntry, step: CallStep) -> ToolEntry:
    """The entry of a ``side_effects`` tool in a durable run."""
    handler = OnceHandler(step, entry.options.reconcile)
    options = replace(entry.options, timeout=None, sequential=True)
    return replace(entry, handler=handler, options=options)
