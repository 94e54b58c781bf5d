"""A tooldeck A2A server as a person runs it: ``tooldeck a2a serve -t shop.py`` in a real
process on 127.0.0.1, its model the provider simulator (fresh call ids), its tasks and
conversations in a SQLite file the test names (two servers on one file share them); and
a2a-sdk's own client, authenticated with the server's bearer token.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_message, new_text_part
from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest, StreamResponse, Task

from helpers import stop
from tooldeck.testing import ProviderSimulator, call

TOKEN = "test-token-" + "x" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MODEL = "openai-chat:shop-model"
SHOP = '''
import os
import time
from pathlib import Path
from tooldeck import external_tool, tool


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: paid, 250 dollars"


@tool(requires_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    with Path(os.environ["SHOP_EFFECTS"]).open("a") as effects:
        effects.write(f"refund {order} {amount} pid={os.getpid()}\\n")
    return f"refunded {amount} dollars of order {order}"


ask_warehouse = external_tool(
    "ask_warehouse",
    "Ask the warehouse (the client's own people) where an order is.",
    {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"],
     "additionalProperties": False},
)


@tool
async def slow_count(to: int) -> str:
    """Count slowly."""
    import asyncio
    await asyncio.sleep(float(os.environ.get("SHOP_SLOW_S", "30")))
    return f"counted to {to}"
'''


@contextmanager
def served(
    folder: Path,
    sim: ProviderSimulator,
    *options: str,
    store: str | None = None,
    slow_s: float = 30,
    key: str = "a key shared by the servers",
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``tooldeck a2a serve -t shop.py`` in ``folder``; its URL and process, stopped after.
    ``slow_count`` sleeps ``slow_s`` seconds; tasks and sessions are kept in ``store`` (a
    PostgreSQL connection string), else in ``tasks.db`` in ``folder``; ``key`` signs the
    checkpoints of paused runs."""
    shop = folder / "shop.py"
    if not shop.exists():
        shop.write_text(SHOP, encoding="utf-8")
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    env = {
        **base,
        **sim.env,
        "TOOLDECK_HOME": str(folder / "home"),
        "TOOLDECK_A2A_TOKEN": TOKEN,
        "TOOLDECK_CHECKPOINT_KEY": key,
        "SHOP_EFFECTS": str(folder / "effects.txt"),
        "SHOP_SLOW_S": str(slow_s),
    }
    command = [sys.executable, "-m", "tooldeck.cli", "a2a", "serve", "-t", "shop.py"]
    command += ["--model", MODEL, "--base-url", sim.base_url, "--port", "0"]
    command += ["--session-db", store or str(folder / "tasks.db"), *options]
    process = subprocess.Popen(
        command, cwd=folder, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    try:
        url = _url(process)
        yield url, process
    finally:
        stop(process)
        if process.stderr is not None:
            process.stderr.close()


def _url(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        found = re.search(r" at (http://\S+) \(card", line)
        if found:
            return found.group(1)
    raise AssertionError(f"the server did not start: {''.join(seen)[-3000:]}")


@asynccontextmanager
async def a2a_client(
    url: str,
    headers: dict[str, str] | None = None,
    *,
    streaming: bool = True,
    binding: str = "JSONRPC",
    paths: list[str] | None = None,
) -> AsyncIterator[Client]:
    """a2a-sdk's client of the server at ``url`` (streaming unless told), with the bearer
    token, over ``binding`` (``JSONRPC``, the SDK's default, or ``HTTP+JSON``); the path of
    each request it makes is added to ``paths`` when given."""

    async def note(request: httpx.Request) -> None:
        if paths is not None:
            paths.append(request.url.path)

    async with httpx.AsyncClient(
        headers=AUTH if headers is None else headers, timeout=60, event_hooks={"request": [note]}
    ) as http:
        config = ClientConfig(
            httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
        )
        client = await create_client(url, config)
        try:
            yield client
        finally:
            await client.close()


def prompt(text: str, context_id: str = "") -> SendMessageRequest:
    message = new_message([new_text_part(text)], context_id=context_id or None, role=Role.ROLE_USER)
    return SendMessageRequest(message=message)


def decisions(task: Task, *given: dict[str, Any]) -> SendMessageRequest:
    """A reply to ``task`` with a ``tooldeck.decisions`` data part."""
    part = new_data_part({"kind": "tooldeck.decisions", "decisions": list(given)})
    message = new_message([part], context_id=task.context_id, task_id=task.id, role=Role.ROLE_USER)
    return SendMessageRequest(message=message)


async def send(client: Client, request: SendMessageRequest) -> tuple[list[StreamResponse], Task]:
    """Send and read the stream to its end: the events, and the task they ended with."""
    events = [event async for event in client.send_message(request)]
    task_id = next(
        e.task.id if e.HasField("task") else e.status_update.task_id
        for e in events
        if e.HasField("task") or e.HasField("status_update")
    )
    return events, await client.get_task(GetTaskRequest(id=task_id))


def pending_calls(task: Task) -> list[dict[str, Any]]:
    """The calls the ``tooldeck.pending`` data part of the task's status lists."""
    parts = [p for p in get_data_parts(task.status.message.parts) if p.get("kind")]
    assert [p["kind"] for p in parts] == ["tooldeck.pending"], parts
    calls: list[dict[str, Any]] = parts[0]["calls"]
    return calls


def status_text(task: Task) -> str:
    return "".join(get_text_parts(task.status.message.parts))


def message_data(message: Message) -> list[Any]:
    return get_data_parts(message.parts)


REFUND_A1 = call("refund", {"order": "A1", "amount": 250})
"""The model's turn that pauses the shop's run: a refund, which needs approval."""


async def paused_refund(client: Client) -> tuple[Task, dict[str, Any]]:
    """Ask for a refund (the model's next turn is ``REFUND_A1``): the paused task, and the
    call it waits for."""
    _, paused = await send(client, prompt("Refund order A1."))
    [waiting] = pending_calls(paused)
    return paused, waiting


async def until_the_call_starts(client: Client, request: SendMessageRequest) -> str:
    """Stream ``request`` until its tool call starts; the task's id (the stream is closed)."""
    stream = client.send_message(request)
    try:
        async for event in stream:
            if event.HasField("status_update"):
                kinds = [d.get("kind") for d in message_data(event.status_update.status.message)]
                if "tooldeck.tool_call" in kinds:
                    return str(event.status_update.task_id)
    finally:
        await stream.aclose()
    raise AssertionError("the stream ended before the call started")


async def counting(client: Client) -> Task:
    """A task of the shop's model counting to 3 (its first turn is ``slow_count``), once
    the call has started (the task is ``WORKING``)."""
    task_id = await until_the_call_starts(client, prompt("Count to 3."))
    return await client.get_task(GetTaskRequest(id=task_id))


@asynccontextmanager
async def counting_on(
    folder: Path, sim: ProviderSimulator, slow_s: float = 30
) -> AsyncIterator[tuple[str, subprocess.Popen[str], Client, Task]]:
    """A server (``served``: its URL and process), a2a-sdk's client of it, and a task
    counting there."""
    with served(folder, sim, slow_s=slow_s) as (url, process):
        async with a2a_client(url) as client:
            yield url, process, client, await counting(client)


def to_task(task: Task, text: str) -> SendMessageRequest:
    """A text message to ``task``."""
    message = new_message(
        [new_text_part(text)], context_id=task.context_id, task_id=task.id, role=Role.ROLE_USER
    )
    return SendMessageRequest(message=message)
