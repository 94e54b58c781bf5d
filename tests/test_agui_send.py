"""``POST /messages`` beside the AG-UI endpoint: a message added to a thread's run going on
joins it before its next model request (read on the provider simulator's recorded request),
streams as a user text message under the client's id (every event validated with the
protocol's own types, tests/_agui.py), and keeps that id in the snapshot; what cannot be
added is refused with a status and a code the client can act on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    MessagesSnapshotEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    UserMessage,
)

from _agui import new_input, of_type, post
from tooldeck import Agent, tool
from tooldeck.serve.agui import app
from tooldeck.testing import ProviderSimulator, call, reply

started = threading.Event()
release = threading.Event()


@tool
def survey(area: str) -> str:
    """Survey an area (waits until the test lets it finish)."""
    started.set()
    if not release.wait(10):
        raise TimeoutError("never released")
    return f"{area}: calm"


@pytest.fixture(autouse=True)
def _gates() -> Any:
    started.clear()
    release.clear()
    yield
    release.set()


@pytest.fixture
async def sim() -> AsyncIterator[ProviderSimulator]:
    async with ProviderSimulator([call("survey", {"area": "bay"}), reply("Calm, briefly.")]) as s:
        yield s


def client_of(sim: ProviderSimulator, tmp_path: Path) -> httpx.AsyncClient:
    served = app(Agent(sim.model(), [survey]), data_dir=tmp_path)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=served), base_url="http://t")


def message(text: str, id_: str = "u-late") -> dict[str, Any]:
    return {"id": id_, "role": "user", "content": text}


def refused(answer: httpx.Response, status: int, code: str) -> str:
    """The error text of a refusal, once its status and code are the ones expected."""
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert sorted(body) == ["code", "error"]
    assert body["code"] == code
    return str(body["error"])


async def run_working(client: httpx.AsyncClient) -> tuple[dict[str, Any], asyncio.Task[Any]]:
    """A run of thread t1 started, its stream read in a task, once its tool works."""
    body = new_input("t1", "Survey the bay")
    running = asyncio.create_task(post(client, body))
    while not started.is_set():
        await asyncio.sleep(0.01)
    return body, running


async def test_a_message_posted_while_the_run_works_joins_it(
    sim: ProviderSimulator, tmp_path: Path
) -> None:
    async with client_of(sim, tmp_path) as client:
        body, running = await run_working(client)
        sent = {"threadId": "t1", "runId": body["runId"], "message": message("Be brief")}
        queued = await client.post("/messages", json=sent)
        release.set()
        events = await running
    assert queued.status_code == 202, queued.text
    assert queued.json() == {
        "status": "queued",
        "threadId": "t1",
        "runId": body["runId"],
        "messageId": "u-late",
    }
    last = sim.requests[1]["messages"]
    assert [m["role"] for m in last][-2:] == ["tool", "user"]
    assert last[-1]["content"] == "Be brief"
    (start,) = [e for e in of_type(events, TextMessageStartEvent) if e.role == "user"]
    assert start.message_id == "u-late"
    assert start.metadata == {"tooldeck": {"sent": True}}
    content = [
        e.delta for e in of_type(events, TextMessageContentEvent) if e.message_id == "u-late"
    ]
    assert content == ["Be brief"]
    (snapshot,) = of_type(events, MessagesSnapshotEvent)
    users = [m for m in snapshot.messages if isinstance(m, UserMessage)]
    assert [(m.id, m.content) for m in users] == [
        (body["messages"][-1]["id"], "Survey the bay"),
        ("u-late", "Be brief"),
    ]
    assert isinstance(events[-1], RunFinishedEvent)


async def test_a_message_for_a_thread_without_a_run_going_on_is_refused(
    sim: ProviderSimulator, tmp_path: Path
) -> None:
    async with client_of(sim, tmp_path) as client:
        sent = {"threadId": "idle", "runId": "r1", "message": message("hello?")}
        answer = await client.post("/messages", json=sent)
    assert refused(answer, 404, "no_run") == (
        "thread 'idle' has no run going on: send the message as the next run's prompt (POST /)"
    )


async def test_a_message_naming_another_run_or_without_text_is_refused(
    sim: ProviderSimulator, tmp_path: Path
) -> None:
    async with client_of(sim, tmp_path) as client:
        body, running = await run_working(client)
        wrong = {"threadId": "t1", "runId": "run-old", "message": message("x")}
        other = await client.post("/messages", json=wrong)
        empty = {"threadId": "t1", "runId": body["runId"], "message": message("")}
        blank = await client.post("/messages", json=empty)
        shaped = await client.post("/messages", json={"threadId": "t1", "message": "hi"})
        release.set()
        await running
    assert other.status_code == 409
    assert other.json()["code"] == "other_run"
    assert "is " + repr(body["runId"]) + ", not 'run-old'" in other.json()["error"]
    assert blank.status_code == 422
    assert blank.json()["code"] == "invalid_message"
    assert shaped.status_code == 422
    assert "runId" in shaped.json()["error"]
    assert [m["content"] for m in sim.requests[1]["messages"] if m["role"] == "user"] == [
        "Survey the bay"
    ]


async def test_a_message_for_a_run_that_just_ended_is_refused_saying_why() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Route

    from tooldeck.run._engine.inbox import Inbox
    from tooldeck.run.cancel import CancelSignal
    from tooldeck.serve.agui._send import LiveRun, send_message

    inbox = Inbox()
    inbox.run_id = "r-7"
    inbox.close("it has ended with its answer")  # its answer is out; its stream not yet closed
    live = {"t1": LiveRun("run-1", inbox, CancelSignal())}

    async def endpoint(request: Any) -> Any:
        return await send_message(request, live)

    site = Starlette(routes=[Route("/messages", endpoint, methods=["POST"])])
    transport = httpx.ASGITransport(app=site)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        body = {"threadId": "t1", "runId": "run-1", "message": message("too late")}
        answer = await client.post("/messages", json=body)
    assert refused(answer, 409, "run_ended") == (
        "cannot send a message to run 'r-7': it has ended with its answer; it was not added"
    )
    assert not live["t1"].waiting
    assert not inbox.waiting
