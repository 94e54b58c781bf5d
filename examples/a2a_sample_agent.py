"""An A2A server built only from a2a-sdk: its request handler, its JSON-RPC and agent-card
routes, an in-memory task store, and the small sample executor below (no tooldeck). The
remote agent of docs/a2a.md's examples and of tests/test_a2a_client.py.

``python examples/a2a_sample_agent.py PORT [CARD_RPC_URL]`` serves it on 127.0.0.1:PORT (a
free port for ``0``) and prints ``ready http://127.0.0.1:PORT`` once listening.
``CARD_RPC_URL`` replaces the RPC URL the card names (to test a caller's refusal of a card
that points elsewhere). With ``A2A_SAMPLE_TOKEN`` set, every request needs
``Authorization: Bearer <token>``.

What the sample agent does with the user's text:
- ``ask ...``: asks a plain question (input required, no data part).
- ``approve ...``: asks for input (``INPUT_REQUIRED``), listing one pending call in the
  data part of docs/a2a.md (``{"kind": "tooldeck.pending", "calls": [...]}``); the reply's
  ``{"kind": "tooldeck.decisions", "decisions": [...]}`` ends the task with a text saying
  what was decided (an answer to a question: what was answered).
- ``garbled ...``: asks for input with a data part that breaks that shape.
- ``slow ...``: streams a chunk, then works for a minute (a caller cancels it).
- ``late ...``: says nothing for 3 s (its task not yet made), then works as ``slow``.
- ``steady ...``: streams a chunk, works 2 s, streams another, completes.
- ``fail ...``: the task fails, saying why.
- anything else: streams ``echo: <text>`` back in two artifact chunks.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import Awaitable, Callable

import uvicorn
from a2a.helpers import (
    get_data_parts,
    new_data_part,
    new_task_from_user_message,
    new_text_message,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

PENDING = {
    "id": "p1",
    "name": "send_email",
    "arguments": {"to": "ops@example.com"},
    "kind": "approval",
    "why": "it mails",
    "digest": "sample-digest-p1",
    "path": [],
}


class SampleExecutor(AgentExecutor):
    """Echoes, streams, fails, or asks for a decision, by the first word of the text."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None and context.get_user_input().startswith("late"):
            await asyncio.sleep(3)  # a remote slow to make its task: nothing names it yet
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await self._decided(context, updater)
            return
        text = context.get_user_input()
        word = text.split(" ", 1)[0]
        if word == "approve":
            ids = {"context_id": task.context_id, "task_id": task.id}
            question = new_text_message("May I send the e-mail?", **ids)
            question.parts.append(new_data_part({"kind": "tooldeck.pending", "calls": [PENDING]}))
            await updater.requires_input(question)
        elif word == "ask":
            ids = {"context_id": task.context_id, "task_id": task.id}
            await updater.requires_input(new_text_message("What is your name?", **ids))
        elif word == "garbled":  # an input request whose data part breaks the shape
            ids = {"context_id": task.context_id, "task_id": task.id}
            question = new_text_message("Decide?", **ids)
            question.parts.append(
                new_data_part({"kind": "tooldeck.pending", "calls": [{"name": "x"}]})
            )
            await updater.requires_input(question)
        elif word in ("slow", "late"):
            await updater.start_work()
            await updater.add_artifact([Part(text="working...")], artifact_id="a1")
            await asyncio.sleep(60)
            await updater.complete()
        elif word == "steady":
            await updater.start_work()
            await updater.add_artifact([Part(text="step one, ")], artifact_id="a1")
            await asyncio.sleep(2)
            await updater.add_artifact([Part(text="step two")], artifact_id="a1", append=True)
            await updater.complete()
        elif word == "fail":
            ids = {"context_id": task.context_id, "task_id": task.id}
            await updater.failed(new_text_message("the database is down", **ids))
        else:
            await updater.start_work()
            await updater.add_artifact([Part(text="echo: ")], artifact_id="a1")
            await updater.add_artifact([Part(text=text)], artifact_id="a1", append=True)
            await updater.complete()

    async def _decided(self, context: RequestContext, updater: TaskUpdater) -> None:
        assert context.message is not None
        data = get_data_parts(list(context.message.parts))
        text = "".join(part.text for part in context.message.parts)
        said = json.dumps(data[0]["decisions"], sort_keys=True) if data else f"answer: {text}"
        await updater.add_artifact([Part(text=f"decided: {said}")], artifact_id="a2")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        assert task is not None
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def app(rpc_url: str) -> Starlette:
    card = AgentCard(
        name="sample",
        description="A sample agent made only from a2a-sdk. " + "x" * 3000,
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=rpc_url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["echo"])],
    )
    handler = DefaultRequestHandler(SampleExecutor(), InMemoryTaskStore(), card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/rpc")]
    token = os.environ.get("A2A_SAMPLE_TOKEN")
    middleware = [Middleware(BaseHTTPMiddleware, dispatch=_bearer(token))] if token else []
    return Starlette(routes=routes, middleware=middleware)


def _bearer(token: str) -> Callable[[Request, RequestResponseEndpoint], Awaitable[Response]]:
    """With ``A2A_SAMPLE_TOKEN`` set, every request (the card too) needs that bearer token."""

    async def dispatch(request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"error": "a bearer token is required"}, status_code=401)
        return await call_next(request)

    return dispatch


def main() -> None:
    port = int(sys.argv[1]) or _free_port()
    rpc_url = sys.argv[2] if len(sys.argv) > 2 else f"http://127.0.0.1:{port}/rpc"
    config = uvicorn.Config(app(rpc_url), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():  # it could not start (the port is taken): say so, do not wait
                raise SystemExit(f"could not serve on 127.0.0.1:{port}")
            await asyncio.sleep(0.02)
        print(f"ready http://127.0.0.1:{port}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
