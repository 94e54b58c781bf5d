"""The paths across server processes over a2a-sdk's HTTP+JSON binding (``/rest``), as
test_a2a_serve_cross.py drives them over JSON-RPC (the SDK client's default): a2a-sdk's own
client, configured for HTTP+JSON only, sends to server B a cancel of, a message to, a
subscription to a task server A runs, and the reply to a pause made at A. Every request B's
client makes is checked to have gone to ``/rest``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from a2a.client import Client
from a2a.helpers import get_text_parts
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import A2AError

from _a2a import (
    REFUND_A1,
    counting,
    decisions,
    paused_refund,
    send,
    status_text,
    to_task,
)
from _a2a_cross import (
    ADDED,
    assert_cancelled_where_it_runs,
    assert_followed_to_the_end,
    servers,
    statuses,
)
from tooldeck.testing import ProviderSimulator, call, reply

REST = "HTTP+JSON"


def _over_rest(paths: list[str]) -> bool:
    """Whether the client's requests (its card aside) all went to the HTTP+JSON routes."""
    calls = [path for path in paths if path != AGENT_CARD_WELL_KNOWN_PATH]
    return bool(calls) and all(path.startswith("/rest/") for path in calls)


@asynccontextmanager
async def _over_http_json(
    folder: Path, sim: ProviderSimulator, paths: list[str], **options: Any
) -> AsyncIterator[tuple[str, Any, Client, Any, Client]]:
    """``servers`` on a SQLite file in ``folder``, their clients over HTTP+JSON (B's noting
    the path of each request in ``paths``): (the store, A, A's client, B, B's client)."""
    store = str(folder / "tasks.db")
    async with servers(folder, sim, store, binding=REST, paths=paths, **options) as (
        a,
        a_client,
        b,
        b_client,
    ):
        yield store, a, a_client, b, b_client


async def test_a_cancel_over_http_json_at_another_server_cancels_the_run_where_it_runs(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Cancelled, as you asked.")])
    paths: list[str] = []
    async with _over_http_json(tmp_path, sim, paths, slow_s=60) as (
        store,
        a,
        a_client,
        _,
        b_client,
    ):
        await assert_cancelled_where_it_runs(store, sim, a, b_client, await counting(a_client))
    assert _over_rest(paths), paths


async def test_a_message_over_http_json_at_another_server_joins_the_run_and_its_history(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counted to 3; 5 next.")])
    paths: list[str] = []
    async with _over_http_json(tmp_path, sim, paths, slow_s=4) as (_, _, a_client, _, b_client):
        running = await counting(a_client)
        message = to_task(running, ADDED)
        events, done = await send(b_client, message)  # B streams A's updates to the end
        seen = await b_client.get_task(GetTaskRequest(id=running.id))
    assert _over_rest(paths), paths
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert {"kind": "tooldeck.message_joined", "texts": [ADDED], "round": 2.0} in statuses(events)
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(done) == "Counted to 3; 5 next."
    said_next = [(m["role"], str(m.get("content") or "")) for m in sim.requests[1]["messages"]]
    assert said_next[-2:] == [("tool", "counted to 3"), ("user", ADDED)]
    users = [m for m in seen.history if m.role == Role.ROLE_USER]
    assert ["".join(get_text_parts(m.parts)) for m in users] == ["Count to 3.", ADDED]
    assert users[1].message_id == message.message.message_id


async def test_subscribing_over_http_json_after_a_reconnect_streams_the_task_to_its_end(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("slow_count", {"to": 3}), reply("Counted to 3.")])
    paths: list[str] = []
    async with _over_http_json(tmp_path, sim, paths, slow_s=3) as (_, _, a_client, _, b_client):
        running = await counting(a_client)  # its stream, at A, is closed once the call starts
        events = [e async for e in b_client.subscribe(SubscribeToTaskRequest(id=running.id))]
    assert _over_rest(paths), paths
    assert_followed_to_the_end(events, running.id)


async def test_a_pause_is_decided_by_a_reply_over_http_json_at_another_server(
    tmp_path: Path, provider
) -> None:
    sim = provider([REFUND_A1, reply("Refunded.")])
    paths: list[str] = []
    async with _over_http_json(tmp_path, sim, paths) as (_, _, a_client, b, b_client):
        paused, waiting = await paused_refund(a_client)
        with pytest.raises(A2AError) as refused:
            await send(b_client, decisions(paused, {"id": "call_guess", "decision": "approve"}))
        still = await b_client.get_task(GetTaskRequest(id=paused.id))
        _, done = await send(
            b_client, decisions(paused, {"id": waiting["id"], "decision": "approve"})
        )
        listed = await b_client.list_tasks(ListTasksRequest(context_id=paused.context_id))
    assert _over_rest(paths), paths
    assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert str(refused.value) == (
        f"call 'call_guess' is not pending in task {paused.id!r} (decided already, or "
        f"of another run): it waits for refund (call {waiting['id']!r}, approval)"
    )
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # the refusal left it
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(done) == "Refunded."
    effects = (tmp_path / "effects.txt").read_text().splitlines()
    assert effects == [f"refund A1 250 pid={b.pid}"]  # run where the reply arrived, once
    assert [t.id for t in listed.tasks] == [paused.id]
