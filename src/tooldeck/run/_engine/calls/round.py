"""A round's calls: checked, held back or run — concurrently by default, a ``sequential``
tool alone — and summed up in the model's order.

``run_round`` yields the round's events as they happen and, as its last item, the
``RoundOutcome``. ``answer_call`` runs one call outside a run (a tool
served over MCP) through the same checks and the same execution.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, replace

from tooldeck.errors import ErrorCode
from tooldeck.messages import ToolCall, ToolResult
from tooldeck.results import Decision, PendingCall, ToolTrace
from tooldeck.run._engine.calls.check import check_decided, check_new, hold_back
from tooldeck.run._engine.calls.execute import Ran, execute
from tooldeck.run._engine.calls.guard import answer_guarded, execute_guarded, guard_arguments
from tooldeck.run._engine.calls.nested import NestedCalls
from tooldeck.run._engine.calls.shared import CallRound, Ready, emitter, trace
from tooldeck.run._engine.calls.trust import after_untrusted
from tooldeck.run._engine.state import OpenTurn
from tooldeck.run.events import Event, ToolCallFinished, ToolCallStarted, UntrustedContent
from tooldeck.run.policy import CallSignature
from tooldeck.safety import UntrustedSource


@dataclass(slots=True)  # treat as read-only (a frozen record costs more to make, every round)
class RoundOutcome:
    """What a round of calls ended with (the round's last item)."""

    traces: tuple[ToolTrace, ...]
    """The calls answered in this round, in the model's order."""
    pending: tuple[PendingCall, ...]
    """Calls that still wait for a decision or a result."""
    raised: tuple[tuple[str, BaseException], ...]
    """(tool name, exception) of tools with ``on_error="raise"`` that raised."""
    over_call_limit: bool
    untrusted: tuple[tuple[str, str], ...] = ()
    """(call id, tool name) of the calls whose results are untrusted content."""


RoundItem = Event | RoundOutcome


@dataclass(slots=True)
class _Admitted:
    """A round's calls after their checks: the ones to run, and the others' outcomes."""

    ready: list[Ready]
    done: list[Ran | None]
    """By the calls' order: how each call ended, as it ends (None while it has not)."""
    announced: list[ToolTrace]
    """The calls answered without running, to announce before the others run."""
    signatures: list[CallSignature | None]
    over_limit: bool = False


async def run_round(
    turn: OpenTurn, decisions: Mapping[str, Decision], round_: CallRound
) -> AsyncGenerator[RoundItem, None]:
    """Run a turn's calls: a new turn's checked calls (but a final_answer already
    answered), or a paused turn's decided ones. Yields the round's events, then its outcome."""
    guarded = round_.view.guarded or round_.options.tool_guardrails
    if turn.started:
        admitted = _admit_decided(turn, decisions, round_)
        if guarded:  # a person's edit is judged
            async for event in _guard_arguments(admitted, round_, edited_only=True):
                yield event
    else:
        turn.started = True
        admitted = _admit_new(turn, round_)
        if guarded and admitted.ready:
            async for event in _guard_arguments(admitted, round_):
                yield event
        asks = round_.tainted_by is not None and _hold_untrusted(admitted, round_)
        if (round_.view.may_pause or asks) and admitted.ready:  # those needing a decision wait
            admitted.ready, waiting = await hold_back(admitted.ready, round_)
            for index, pending in waiting:
                admitted.done[index] = pending
    for answered in admitted.announced:
        yield _not_run(answered, round_)
    done = admitted.done
    ready = admitted.ready
    for group in (ready,) if len(ready) == 1 else _groups(ready):
        for item in group:  # positional: this runs for every call of every round
            yield ToolCallStarted(round_.round, item.call, "", item.remembered)
        entry = group[0].entry  # entry.streams inlined, for the same reason
        if len(group) == 1 and not (entry.emits_events or entry.calls_tools) and not guarded:
            item = group[0]  # the common case: no tasks, no queue
            ran = done[item.index] = await execute(item, round_)
            if isinstance(ran, ToolTrace):
                yield ToolCallFinished(round_.round, ran)
            continue
        together = _run_guarded if guarded else _run_together  # guarded: results judged
        async with aclosing(together(group, round_)) as running:
            async for got in running:
                if not isinstance(got, tuple):
                    yield got
                    continue
                ran = done[got[0]] = got[1]
                if isinstance(ran, ToolTrace):
                    yield ToolCallFinished(round_.round, ran)
    outcome = _outcome(done, admitted.signatures, round_, admitted.over_limit)
    if outcome.untrusted and round_.tainted_by is None:  # the first untrusted content
        call_id, name = outcome.untrusted[0]
        source = UntrustedSource(call_id=call_id, tool_name=name, round=round_.round)
        yield UntrustedContent(round_.round, source)
    yield outcome


def _admit_new(turn: OpenTurn, round_: CallRound) -> _Admitted:
    """A new turn's calls, checked."""
    calls = turn.calls
    if turn.answered:
        calls = tuple(call for call in calls if call.id not in turn.answered)
    size = len(calls)
    admitted = _Admitted([], [None] * size, [], [None] * size)
    for index, call in enumerate(calls):
        checked = check_new(index, call, round_)
        if isinstance(checked, Ready):
            admitted.ready.append(checked)
            admitted.signatures[index] = checked.signature
            continue
        refusal, admitted.signatures[index] = checked
        admitted.done[index] = refusal
        admitted.announced.append(refusal)
        if refusal.result.error_code is ErrorCode.CALL_LIMIT and round_.policy.calls_spent:
            admitted.over_limit = True
    return admitted


async def _guard_arguments(
    admitted: _Admitted, round_: CallRound, edited_only: bool = False
) -> AsyncGenerator[Event, None]:
    """Judge the ready calls' arguments (``edited_only``: those a person edited at approval):
    the decisions as events; a refused call is answered, a stop raises (no call of the round
    has run)."""
    ready: list[Ready] = []
    for item in admitted.ready:
        if edited_only and not item.edited:
            ready.append(item)
            continue
        judged, events, stop = await guard_arguments(item, round_)
        for event in events:
            yield event
        if stop is not None:
            raise stop
        if isinstance(judged, Ready):
            ready.append(judged)
        else:
            admitted.done[item.index] = judged
            admitted.announced.append(judged)
    admitted.ready = ready


def _hold_untrusted(admitted: _Admitted, round_: CallRound) -> bool:
    """In a conversation with untrusted content, apply ``after_untrusted`` to the ready
    calls: those refused are answered; True when some must wait for a person's approval."""
    source = round_.tainted_by
    if source is None or round_.options.after_untrusted == "allow":
        return False
    admitted.ready, refusals = after_untrusted(admitted.ready, round_, source)
    for index, refusal in refusals:
        admitted.done[index] = refusal
        admitted.announced.append(refusal)
    return any(item.ask for item in admitted.ready)


def _admit_decided(
    turn: OpenTurn, decisions: Mapping[str, Decision], round_: CallRound
) -> _Admitted:
    """A paused turn's calls with the decisions made on them; the others stay pending."""
    waiting = turn.pending
    size = len(waiting)
    admitted = _Admitted([], [None] * size, [], [None] * size)
    for index, pending in enumerate(waiting):
        checked = check_decided(index, pending, decisions, round_)
        if isinstance(checked, Ready):
            admitted.ready.append(checked)
        elif checked is None:
            admitted.done[index] = pending
        else:
            admitted.done[index] = checked
            admitted.announced.append(checked)
    return admitted


async def answer_call(call: ToolCall, round_: CallRound) -> ToolTrace:
    """One call, checked and run as a model's call is, with nothing to wait on: a call that
    would wait for a decision is answered as not run."""
    checked = check_new(0, call, round_)
    if not isinstance(checked, Ready):
        done, signature = checked
    else:
        if round_.view.guarded or round_.options.tool_guardrails:
            ran = await answer_guarded(checked, round_)
        else:
            ran = await execute(checked, round_)
        done, signature = _as_trace(ran), checked.signature
    round_.policy.record(call.name, done.result, signature)
    return done


def _as_trace(ran: Ran) -> ToolTrace:
    if isinstance(ran, ToolTrace):
        return ran
    text = "not run: a call inside this tool waits for a person's decision, which is not asked here"
    return trace(ran.call, ToolResult.failure(ErrorCode.TOOL_ERROR, text), 0.0)


def _not_run(done: ToolTrace, round_: CallRound) -> ToolCallFinished:
    """The event of a call answered without running (refused, rejected, or given a result)."""
    if round_.observer is not None:
        round_.observer.answered(done)
    return ToolCallFinished(round_.round, done)


def _outcome(
    slots: list[Ran | None],
    signatures: list[CallSignature | None],
    round_: CallRound,
    over_limit: bool,
) -> RoundOutcome:
    """Record the answered calls with the policy, in the model's order; sum up the round."""
    answered: list[ToolTrace] = []
    pending: list[PendingCall] = []
    raised: list[tuple[str, BaseException]] = []
    for index, ran in enumerate(slots):
        if not isinstance(ran, ToolTrace):
            if ran is not None:
                pending.append(ran)
            continue
        answered.append(ran)
        name = ran.call.name
        round_.policy.record(name, ran.result, signatures[index])
        if ran.error is not None:
            entry = round_.view.dispatch.get(name)
            if entry is not None and entry.options.on_error == "raise":
                raised.append((name, ran.error))
    untrusted = _untrusted(answered, round_) if round_.view.untrusted else ()
    return RoundOutcome(tuple(answered), tuple(pending), tuple(raised), over_limit, untrusted)


def _untrusted(answered: list[ToolTrace], round_: CallRound) -> tuple[tuple[str, str], ...]:
    """(call id, tool name) of the answered calls of untrusted tools that succeeded, and of
    agent tools whose inner runs read untrusted content."""
    dispatch = round_.view.dispatch
    return tuple(
        (done.call.id, done.call.name)
        for done in answered
        if done.result.error_code is None
        and (entry := dispatch.get(done.call.name)) is not None
        and (entry.options.trust == "untrusted" or done.untrusted)
    )


def _groups(ready: list[Ready]) -> list[list[Ready]]:
    """Split into groups that may run together; a sequential tool is a group of its own."""
    groups: list[list[Ready]] = []
    current: list[Ready] = []
    for item in ready:
        if item.entry.options.sequential:
            if current:
                groups.append(current)
                current = []
            groups.append([item])
        else:
            current.append(item)
    if current:
        groups.append(current)
    return groups


def _run_together(
    group: list[Ready], round_: CallRound
) -> AsyncGenerator[Event | tuple[int, Ran], None]:
    """Run a group's calls concurrently: the events calls pass on as they happen, and each
    (index, outcome) as a call finishes."""
    return _concurrently(group, round_, False)


def _run_guarded(
    group: list[Ready], round_: CallRound
) -> AsyncGenerator[Event | tuple[int, Ran], None]:
    """``_run_together``, each call's result judged by its guardrails."""
    return _concurrently(group, round_, True)


async def _concurrently(
    group: list[Ready], round_: CallRound, guard: bool
) -> AsyncGenerator[Event | tuple[int, Ran], None]:
    queue: asyncio.Queue[Event | tuple[int, Ran] | Exception] = asyncio.Queue()
    limit = round_.options.max_concurrency
    semaphore = asyncio.Semaphore(limit) if limit is not None and limit < len(group) else None

    async def run(item: Ready) -> None:
        try:
            async with semaphore or contextlib.nullcontext():
                emit = emitter(item, queue.put_nowait)
                if item.entry.calls_tools:  # its calls of other tools: the run's own
                    item = replace(item, caller=NestedCalls(round_, queue.put_nowait, item.call))
                if guard:
                    ran = await execute_guarded(item, round_, emit, queue.put_nowait)
                else:
                    ran = await execute(item, round_, emit)
            queue.put_nowait((item.index, ran))
        except Exception as error:  # a middleware's failure: the round ends with it
            queue.put_nowait(error)

    tasks = [asyncio.ensure_future(run(item)) for item in group]
    try:
        left = len(tasks)
        while left:
            got = await queue.get()
            if isinstance(got, Exception):
                raise got
            left -= isinstance(got, tuple)
            yield got
    finally:
        for task in tasks:
            task.cancel()
