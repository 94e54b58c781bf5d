"""A message to a task of ``tooldeck a2a serve`` while it works, with a2a-sdk's client: it
joins the running run (``RunHandle.send``) before the run's next model request; a finished
task refuses it; and a task whose server was killed is marked FAILED by a server that finds
it. (A message to a task another server process runs: tests/test_a2a_serve_cross.py.)
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from a2a.types import GetTaskRequest, TaskState
from a2a.utils.errors import A2AError

from _a2a import (
    a2a_client,
    counting_on,
    decisions,
    message_data,
    prompt,
    send,
    served,
    status_text,
    to_task,
)
from tooldeck.serve.a2a._runners import Runner, start_stamp, this_process
from tooldeck.testing import ProviderSimulator, call, reply

FIRST = "Count in English."
ADDED = "Also count to 5, please."


def _roles_and_texts(sim: ProviderSimulator, index: int) -> list[tuple[str, str]]:
    return [(m["role"], str(m.get("content") or "")) for m in sim.requests[index]["messages"]]


async def test_a_message_to_a_working_task_joins_its_run_before_the_next_request(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counted to 3; 5 next.")])
    async with counting_on(tmp_path, sim, slow_s=4) as (url, _, client, running):
        with pytest.raises(A2AError) as not_text:
            await send(client, decisions(running, {"id": "call_1", "decision": "approve"}))
        async with a2a_client(url, streaming=False) as plain:  # SendMessage: the task as it is
            _, first = await send(plain, to_task(running, FIRST))
        events, done = await send(client, to_task(running, ADDED))
        with pytest.raises(A2AError) as finished:
            await send(client, to_task(running, "And to 7?"))
    assert running.status.state == TaskState.TASK_STATE_WORKING
    assert first.status.state == TaskState.TASK_STATE_WORKING
    assert str(not_text.value) == (
        f"task {running.id!r} is WORKING and waits for no decisions: a pause takes one reply, "
        "and if it paused, another reply answered it; this one was not used"
    )
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING  # the stream, joined
    parts = [
        d
        for e in events
        if e.HasField("status_update")
        for d in message_data(e.status_update.status.message)
    ]
    assert {"kind": "tooldeck.message_joined", "texts": [FIRST, ADDED], "round": 2.0} in parts
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(done) == "Counted to 3; 5 next."
    assert len(sim.requests) == 2
    said = _roles_and_texts(sim, 1)
    assert said[-3:] == [("tool", "counted to 3"), ("user", FIRST), ("user", ADDED)]
    assert str(finished.value) == (
        f"task {running.id!r} is COMPLETED: only a task in INPUT_REQUIRED takes a reply, and a "
        f"WORKING one a message; send a new message without a task id (context "
        f"{running.context_id!r}) to start a run"
    )
    assert len(sim.requests) == 2  # the refused message reached no model


@pytest.mark.parametrize("met_by", ["a message to it", "the next task of its context"])
async def test_a_task_whose_server_was_killed_fails_when_a_running_server_meets_it(
    tmp_path: Path, provider, met_by: str
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counting was cut off.")])
    # the other server's heartbeat also fails the tasks of dead servers (every 2 s by
    # default; tests/test_a2a_serve_cross.py proves it): slowed here, so it is the meeting
    # that fails the task, not a beat between the kill and the first look
    quiet_beat = ("--heartbeat", "600", "--lease", "3000")
    with served(tmp_path, sim, *quiet_beat) as (other_url, _):  # started before the kill
        async with counting_on(tmp_path, sim) as (_, killed, _, killed_task):
            killed.send_signal(signal.SIGKILL)
            killed.wait()
        async with a2a_client(other_url) as other:
            before = await other.get_task(GetTaskRequest(id=killed_task.id))
            if met_by == "a message to it":
                with pytest.raises(A2AError) as refused:
                    await send(other, to_task(before, ADDED))
                assert str(refused.value).startswith(f"task {killed_task.id!r} is FAILED: ")
                assert len(sim.requests) == 1  # the message reached no model
            else:
                _, next_task = await send(other, prompt("Did you finish?", before.context_id))
                assert next_task.status.state == TaskState.TASK_STATE_COMPLETED
            after = await other.get_task(GetTaskRequest(id=killed_task.id))
    assert before.status.state == TaskState.TASK_STATE_WORKING
    assert after.status.state == TaskState.TASK_STATE_FAILED
    assert status_text(after).startswith(
        f"The server running this task stopped (pid {killed.pid} on "
    )


def test_a_runner_row_is_judged_alive_only_while_its_own_process_runs() -> None:
    """A killed process not yet reaped (a zombie) is gone; a pid reused by another process
    is not the old one; a process on another machine is not judged."""
    me = this_process()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        row = Runner(me.machine, child.pid, start_stamp(child.pid))
        alive_before = row.alive()
        child.kill()
        deadline = time.monotonic() + 10
        while row.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        unreaped = Path(f"/proc/{child.pid}").exists()  # nothing waited for it yet
        zombie = row.alive()
    finally:
        child.kill()
        child.wait()
    assert me.alive() is True
    assert alive_before is True
    assert unreaped
    assert zombie is False  # killed, not reaped by its parent yet
    assert row.alive() is False
    assert Runner(me.machine, me.pid, "another boot/1").alive() is False  # a reused pid
    assert Runner("elsewhere pid:[1]", 1, "").alive() is None


async def test_a_task_whose_server_was_stopped_mid_run_fails_at_the_next_server(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counting was cut off.")])
    async with counting_on(tmp_path, sim) as (_, stopped, _, running):
        stopped.terminate()  # SIGTERM: the server stops its runs and exits
        stopped.wait(timeout=30)
    with served(tmp_path, sim) as (url, _):
        async with a2a_client(url) as client:
            after = await client.get_task(GetTaskRequest(id=running.id))
            _, later = await send(client, prompt("Did you finish?", running.context_id))
    assert after.status.state == TaskState.TASK_STATE_FAILED
    assert status_text(after).startswith(
        f"The server running this task stopped (pid {stopped.pid} on "
    )
    assert later.status.state == TaskState.TASK_STATE_COMPLETED
    assert "error[cancelled]: the run was cancelled (the A2A server stopped)" in str(
        sim.requests[-1]["messages"]
    )
