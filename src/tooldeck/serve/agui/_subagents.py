"""The runs inside agent tools' calls, as AG-UI subagents.

An agent tool's run (``agent.as_tool``), called by the model or by a code-mode program, is a
subagent of the run, told apart by the ``subagentRunId`` every event of it carries:

- ``SUBAGENT_STARTED`` at its first event: ``subagentRunId`` is the ids of the calls it runs
  inside, joined by ``/`` as ``PendingCall.id`` joins them (``"c1"``; ``"c1/c4"`` for a run
  inside the agent tool ``c1`` runs; ``"c1/c1.2"`` for an agent tool a program of ``run_code``
  ``c1`` called); ``name`` the agent tool's; ``parentToolCallId`` the call;
  ``parentSubagentRunId`` the subagent it runs inside, if any;
- its turns' text and calls and their results, as the run's own are sent, under message ids of
  its own (``<subagentRunId>:msg-<n>``, its conversation's positions). Its text is sent whole
  with the calls of its turn; its answer once its call finished well (its output guardrails,
  which the relay does not know, passed it), just before the call's ``TOOL_CALL_RESULT``;
- ``SUBAGENT_FINISHED`` with the call's result then (``SUBAGENT_ERROR`` with the error code for
  a call that failed); or, when the run pauses inside it, ``SUBAGENT_FINISHED`` with the
  ``suspended`` outcome and the ids of the interrupts it raised itself, before ``RUN_FINISHED``.
  The run that goes on after the decision starts it again, under the same id.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ag_ui.core import (
    BaseEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
)

from tooldeck.results import PendingCall, RunResult, ToolTrace
from tooldeck.run.events import Event, NestedEvent, ToolCallFinished


class Relay(Protocol):
    """What a subagent needs of ``_relay.Relay`` (named here, not imported: ``_relay`` imports
    this module)."""

    def events(self, event: Event) -> Iterator[BaseEvent]: ...
    def inside(self, run_id: str) -> Relay: ...
    def turn_message(self) -> str: ...
    def answer(self) -> Iterator[BaseEvent]: ...
    def call_path(self, call_id: str) -> str: ...


@dataclass
class Subagents:
    """The subagents of one run's stream that started and have not finished, each with the
    relay that translates its events."""

    open: dict[str, Relay] = field(default_factory=dict)
    """Subagent run id -> its relay, outermost first."""

    def events(self, event: NestedEvent, outer: Relay) -> Iterator[BaseEvent]:
        """The AG-UI events of one event of a run inside calls: the subagents it runs in
        started if new, then the event, attributed to the innermost."""
        relay, parent = outer, ""
        for name, call_id in zip(event.path, event.call_ids, strict=True):
            run_id = f"{parent}/{relay.call_path(call_id)}" if parent else relay.call_path(call_id)
            inner = self.open.get(run_id)
            if inner is None:
                inner = self.open[run_id] = relay.inside(run_id)
                yield SubagentStartedEvent(
                    subagent_run_id=run_id,
                    name=name,
                    parent_subagent_run_id=parent or None,
                    parent_tool_call_id=call_id,
                    parent_message_id=relay.turn_message(),
                )
            relay, parent = inner, run_id
        if isinstance(event.event, ToolCallFinished):  # a call inside it may be a subagent
            trace = event.event.trace
            yield from self.finished(f"{parent}/{relay.call_path(trace.call.id)}", trace)
        for translated in relay.events(event.event):
            yield translated.model_copy(update={"subagent_run_id": parent})

    def finished(self, run_id: str, trace: ToolTrace) -> Iterator[BaseEvent]:
        """The subagent ``run_id`` (if the call ``trace`` shows ran one) ends with its call:
        its answer, then SUBAGENT_FINISHED, or SUBAGENT_ERROR for a call that failed."""
        relay = self.open.pop(run_id, None)
        if relay is None:
            return
        for inside in [each for each in self.open if each.startswith(f"{run_id}/")][::-1]:
            del self.open[inside]  # its run ended first (cancelled, stopped): so did theirs
            yield SubagentErrorEvent(subagent_run_id=inside, message="its call's run ended first")
        if not trace.result.ok:
            code = str(trace.result.error_code) if trace.result.error_code else None
            yield SubagentErrorEvent(subagent_run_id=run_id, message=trace.result.output, code=code)
            return
        for held in relay.answer():
            yield held.model_copy(update={"subagent_run_id": run_id})
        yield SubagentFinishedEvent(subagent_run_id=run_id, result=trace.result.output)

    def ended(self, result: RunResult[Any]) -> Iterator[BaseEvent]:
        """The run ended with subagents open: each suspended, innermost first, with the
        interrupts it raised, when the run paused; else (it stopped first) failed."""
        for run_id in reversed(list(self.open)):
            if result.checkpoint is not None:
                raised = [p.digest for p in result.pending if _raised_in(p, run_id)]
                outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=raised)
                yield SubagentFinishedEvent(subagent_run_id=run_id, outcome=outcome)
            else:
                message = f"the run ended ({result.stop_reason}) before its call finished"
                yield SubagentErrorEvent(subagent_run_id=run_id, message=message)
        self.open.clear()


def _raised_in(pending: PendingCall, run_id: str) -> bool:
    """Whether the interrupt of ``pending`` is the subagent ``run_id``'s own: the call waits
    in its run, not in a run inside it (its id is ``<run_id>/<call id>``)."""
    return pending.kind == "approval" and pending.id.rpartition("/")[0] == run_id
