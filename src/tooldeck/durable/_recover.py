"""Handing a dead worker's unfinished runs to the workers that are alive."""

from __future__ import annotations

from dbos import DBOS


async def recover_runs(executor_id: str, *, queue: str) -> list[str]:
    """Put the unfinished workflows of a worker that is gone back on ``queue``, where the
    live workers take them; returns their ids.

    DBOS tags each workflow with the executor id of the process running it, and a process
    recovers only its own at launch. Call this (from any process with DBOS launched) when a
    worker will not come back with its executor id. Only for a worker known to be dead: a
    live one would go on running the same runs.
    """
    if not executor_id:
        raise ValueError("executor_id must name the worker whose runs to recover")
    pending = await DBOS.list_workflows_async(
        status="PENDING", executor_id=executor_id, load_input=False, load_output=False
    )
    ids = [status.workflow_id for status in pending]
    for workflow_id in ids:
        await DBOS.resume_workflow_async(workflow_id, queue_name=queue)
    return ids
