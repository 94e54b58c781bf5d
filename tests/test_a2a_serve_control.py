"""Cancelling and reconnecting to tasks of ``tooldeck a2a serve``, with a2a-sdk's client: a
cancel is the run's cancellation (a running tool is stopped, a paused run closed, and the
conversation goes on with what happened), and a client that lost its stream subscribes to
the task again and reads it to its end.
"""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from _a2a import (
    REFUND_A1,
    a2a_client,
    message_data,
    paused_refund,
    prompt,
    send,
    served,
    status_text,
    until_the_call_starts,
)
from tooldeck.testing import ProviderSimulator, call, reply


def _said(sim: ProviderSimulator) -> str:
    return str(sim.requests[-1]["messages"])


async def test_cancel_stops_the_running_tool_and_the_conversation_goes_on(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("I stopped counting.")])
    with served(tmp_path, sim) as (url, _):
        async with a2a_client(url) as client:
            task_id = await until_the_call_starts(client, prompt("Count to 3."))
            began = time.monotonic()
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
            took = time.monotonic() - began
            stored = await client.get_task(GetTaskRequest(id=task_id))
            _, later = await send(client, prompt("Did you finish?", stored.context_id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert stored.status.state == TaskState.TASK_STATE_CANCELED
    assert took < 10  # the 30-second tool was stopped, not waited for
    assert later.status.state == TaskState.TASK_STATE_COMPLETED
    assert "error[cancelled]: the run was cancelled (the A2A client cancelled the task)" in _said(
        sim
    )


async def test_cancelling_a_paused_task_closes_its_run_and_frees_the_conversation(
    tmp_path: Path, provider
) -> None:
    sim = provider([REFUND_A1, reply("Not refunded.")])
    with served(tmp_path, sim) as (url, _):
        async with a2a_client(url) as client:
            paused, waiting = await paused_refund(client)
            cancelled = await client.cancel_task(CancelTaskRequest(id=paused.id))
            _, later = await send(client, prompt("Was it refunded?", paused.context_id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert later.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(later) == "Not refunded."
    assert waiting["id"] in _said(sim)
    assert "error[cancelled]" in _said(sim)
    assert not (tmp_path / "effects.txt").exists()


async def test_a_client_that_lost_its_stream_subscribes_again_and_reads_the_end(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counted to 3.")])
    with served(tmp_path, sim, slow_s=3) as (url, _):
        async with a2a_client(url) as client:
            task_id = await until_the_call_starts(client, prompt("Count to 3."))
        async with a2a_client(url) as again:  # another connection, as after a reconnect
            events = [e async for e in again.subscribe(SubscribeToTaskRequest(id=task_id))]
            done = await again.get_task(GetTaskRequest(id=task_id))
    assert events[0].HasField("task")
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING
    results = [
        d
        for e in events
        if e.HasField("status_update")
        for d in message_data(e.status_update.status.message)
    ]
    assert [d["output"] for d in results if d["kind"] == "tooldeck.tool_result"] == ["counted to 3"]
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(done) == "Counted to 3."


async def test_a_server_killed_mid_run_loses_nothing_its_task_fails_and_the_next_goes_on(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counting was cut off.")])
    with served(tmp_path, sim) as (url, killed):
        async with a2a_client(url) as client:
            task_id = await until_the_call_starts(client, prompt("Count to 3."))
            first = await client.get_task(GetTaskRequest(id=task_id))
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    with served(tmp_path, sim) as (url, _):
        async with a2a_client(url) as client:
            failed = await client.get_task(GetTaskRequest(id=task_id))  # before any message
            _, later = await send(client, prompt("Did you finish?", first.context_id))
    assert first.status.state == TaskState.TASK_STATE_WORKING
    assert failed.status.state == TaskState.TASK_STATE_FAILED  # the new server marked it
    assert status_text(failed) == (
        f"The server running this task stopped (pid {killed.pid} on {socket.gethostname()}) "
        "before its run ended. What the run did is kept in the conversation: a new message in "
        f"context {first.context_id!r} goes on from it."
    )
    assert later.status.state == TaskState.TASK_STATE_COMPLETED
    said = _said(sim)
    assert "Count to 3." in said  # the killed run's prompt and call are kept
    assert "error[interrupted]" in said
    assert said.index("Count to 3.") < said.index("Did you finish?")
