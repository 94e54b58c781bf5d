"""At-most-once calls: a tool with ``side_effects=True`` has its call's start and result
recorded, so that no call runs twice.

The record is kept by the run's session (``tooldeck.run.session.CallRecords``, which the
SQLite and PostgreSQL sessions implement) or, in a durable run, by the workflow
(``tooldeck.durable``). Before a call runs, its start is recorded under its idempotency
key; after, its result. A call met again (in a run retried with the same run id, a resume,
a durable replay) is answered from the record: its result if it reported one; if it started
and never reported (the process died mid-call), the tool's ``reconcile`` function says
whether it happened, and without one the model reads ``error[interrupted]`` instead of the
call running blindly again.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from tooldeck.errors import ErrorCode
from tooldeck.messages import ToolResult
from tooldeck.results import PendingCall, ToolTrace
from tooldeck.run._engine.calls.shared import Ready, trace
from tooldeck.run.session import CallRecords
from tooldeck.tools.context import RunContext
from tooldeck.tools.options import Reconcile


def interrupted_text(key: str) -> str:
    """What the model reads for a call that started but never reported."""
    return (
        "the call may have completed: it started before the process running it stopped, "
        f"and never reported a result (idempotency key {key!r}). It is not run again "
        "automatically, as it has side effects: check whether it happened before calling it "
        "again"
    )


Ran = ToolTrace | PendingCall


async def run_once(
    records: CallRecords, item: Ready, context: RunContext[Any], run: Callable[[], Awaitable[Ran]]
) -> Ran:
    """Run a ``side_effects`` call at most once: ``run()`` only if its record says it never
    started (or its reconcile says it did not happen); its result recorded after."""
    key = context.idempotency_key
    before = await records.start_call(key, item.call.name)
    if before is not None and before.result is not None:  # it ran: what it said, again
        return trace(item.call, before.result, 0.0)
    if before is not None and item.resumed is None:  # (a paused call going on started so)
        settled = await reconciled(item.entry.options.reconcile, context)
        if settled is not None:
            await records.finish_call(key, settled)
            return trace(item.call, settled, 0.0)
    ran = await run()
    if isinstance(ran, ToolTrace):
        await records.finish_call(key, ran.result)
    return ran


async def reconciled(reconcile: Reconcile | None, context: RunContext[Any]) -> ToolResult | None:
    """For a call that started and never reported: the tool's ``reconcile``'s answer (None:
    it did not happen, so run it), or, without one, the interrupted result."""
    key = context.idempotency_key
    if reconcile is None:
        return ToolResult.failure(ErrorCode.INTERRUPTED, interrupted_text(key))
    try:
        answer = reconcile(context)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as error:
        failure = f"{type(error).__name__}: {error}"
        text = f"{interrupted_text(key)}. Its reconcile function failed: {failure}"
        return ToolResult.failure(ErrorCode.INTERRUPTED, text)
    if answer is not None and not isinstance(answer, ToolResult):
        text = (
            f"{interrupted_text(key)}. Its reconcile function returned {answer!r}, not a "
            "ToolResult or None"
        )
        return ToolResult.failure(ErrorCode.INTERRUPTED, text)
    return answer
