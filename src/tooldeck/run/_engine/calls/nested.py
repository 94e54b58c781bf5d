"""Calls made inside a call: a code-mode program's calls of the run's tools, each through the
same steps as a model's call — checked (budgets, limits, schema), its arguments guarded, the
untrusted-content policy applied, held back for a person's approval, run (at most once, as
a span, within its timeout) and its result guarded — with its own ``ToolCallStarted`` and
``ToolCallFinished`` events in the run's stream (so the display, the run log and the traces
show it as the run's own call) and counted by the run's policy.

``NestedCalls`` is the ``ToolCaller`` a ``calls_tools`` entry's handler is given
(``RunContext.caller``); ``round.py`` makes one per such call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tooldeck.messages import ToolCall
from tooldeck.results import Decision, PendingCall, ToolTrace
from tooldeck.run._engine.calls.check import check_decided, check_new, hold_back
from tooldeck.run._engine.calls.execute import execute
from tooldeck.run._engine.calls.guard import execute_guarded, guard_arguments
from tooldeck.run._engine.calls.shared import CallRound, Emit, Ready, emitter
from tooldeck.run._engine.calls.trust import after_untrusted
from tooldeck.run.events import ToolCallFinished, ToolCallStarted
from tooldeck.safety import UntrustedSource
from tooldeck.tools.registry import ToolEntry, ToolView

Outcome = ToolTrace | PendingCall


class NestedCalls:
    """Runs the calls one call (``parent``) makes of the tools it is given, as the run's own."""

    def __init__(self, round_: CallRound, put: Emit, parent: ToolCall) -> None:
        self._round, self._put, self._parent = round_, put, parent
        self._views: dict[tuple[str, ...], CallRound] = {}
        self.tainted_by: UntrustedSource | None = round_.tainted_by
        """The call that first brought untrusted content into the run, this program's too."""

    async def call(self, call: ToolCall, tools: Mapping[str, Any]) -> Outcome:
        """Check, guard, hold back or run ``call``; its trace, or the PendingCall it waits as."""
        round_ = self._round_for(tools)
        checked = check_new(0, call, round_)
        if not isinstance(checked, Ready):
            done, signature = checked
            return self._answered(done, round_, signature)
        item: Ready | ToolTrace = checked
        if round_.view.guarded or round_.options.tool_guardrails:
            item = await self._guarded(checked, round_)
        if isinstance(item, ToolTrace):
            return self._answered(item, round_, checked.signature)
        source = round_.tainted_by
        if source is not None and round_.options.after_untrusted != "allow":
            going, refusals = after_untrusted([item], round_, source)
            if refusals:
                return self._answered(refusals[0][1], round_, checked.signature)
            item = going[0]
        if round_.view.may_pause or item.ask:
            _, waiting = await hold_back([item], round_)
            if waiting:
                return waiting[0][1]
        return await self._run(item, round_)

    async def decided(
        self, pending: PendingCall, decisions: Mapping[str, Decision], tools: Mapping[str, Any]
    ) -> Outcome | None:
        """Run an approved call that waited (an edit validated and guarded again), answer a
        rejected one without running it, or go on with an agent tool's paused run (the
        decisions on its calls keyed ``<call id>/<inner id>``); None while it has none."""
        round_ = self._round_for(tools)
        checked = check_decided(0, pending, decisions, round_)
        if checked is None:
            return None
        if isinstance(checked, ToolTrace):
            return self._answered(checked, round_, None)
        item: Ready | ToolTrace = checked
        if checked.edited and (round_.view.guarded or round_.options.tool_guardrails):
            item = await self._guarded(checked, round_)
        if isinstance(item, ToolTrace):
            return self._answered(item, round_, None)
        return await self._run(item, round_)

    async def _guarded(self, item: Ready, round_: CallRound) -> Ready | ToolTrace:
        judged, events, stop = await guard_arguments(item, round_)
        for event in events:
            self._put(event)
        if stop is not None:
            raise stop
        return judged

    async def _run(self, item: Ready, round_: CallRound) -> Outcome:
        self._put(ToolCallStarted(round_.round, item.call, remembered=item.remembered))
        guarded = bool(round_.view.guarded or round_.options.tool_guardrails)
        emit = emitter(item, self._put)  # an agent tool's run: its events nested under it
        if guarded:  # its result judged too (a stop raises GuardrailTripped: the run stops)
            ran = await execute_guarded(item, round_, emit, self._put)
        else:
            ran = await execute(item, round_, emit)
        if isinstance(ran, PendingCall):  # an agent tool inside, paused
            return ran
        return self._answered(ran, round_, item.signature, started=True)

    def _answered(
        self, done: ToolTrace, round_: CallRound, signature: Any, started: bool = False
    ) -> ToolTrace:
        """Count the call with the run's policy and show it; note untrusted content."""
        round_.policy.record(done.call.name, done.result, signature)
        if round_.observer is not None and not started:
            round_.observer.answered(done)
        self._put(ToolCallFinished(round_.round, done))
        entry = round_.view.dispatch.get(done.call.name)
        if done.result.ok and self.tainted_by is None and _untrusted(entry, done):
            self.tainted_by = UntrustedSource(
                call_id=done.call.id, tool_name=done.call.name, round=round_.round
            )
        return done

    def _round_for(self, tools: Mapping[str, Any]) -> CallRound:
        """The round as the nested calls see it: the tools they may call, and the taint."""
        key = tuple(tools)
        round_ = self._views.get(key)
        if round_ is None:
            entries: list[ToolEntry] = list(tools.values())
            round_ = self._views[key] = replace(self._round, view=ToolView.of(entries))
        if round_.tainted_by is not self.tainted_by:
            round_ = self._views[key] = replace(round_, tainted_by=self.tainted_by)
        return round_


def _untrusted(entry: ToolEntry | None, done: ToolTrace) -> bool:
    return entry is not None and (entry.options.trust == "untrusted" or done.untrusted)
