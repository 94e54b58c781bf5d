"""The simulator's HTTP side: a Starlette application answering as the OpenAI API does.

``POST /v1/chat/completions`` and ``POST /v1/responses`` (streamed or not) take the next
step; ``GET /v1/models`` lists the simulated model. Every request is recorded in the
``Ledger`` before its answer starts, so a test can wait for a request to arrive (and, for
a hanging step, kill the client then) without sleeping.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from openai.types import ErrorObject
from openai.types import Model as ModelInfo
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tooldeck.testing import _chat_wire, _responses_wire
from tooldeck.testing._answer import Planned, fresh_id, plan
from tooldeck.testing.exchanges import Exchange, Ledger
from tooldeck.testing.request import Api, SimMessage, SimRequest, read_request
from tooldeck.testing.rules import Script, resolve
from tooldeck.testing.steps import (
    Answer,
    CutStream,
    Hang,
    SlowFirstByte,
    Status,
    Step,
)

OWNER = "tooldeck-simulator"


class Stopping:
    """Set when the simulator stops: held requests (a hang, a slow first byte) end then."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self.ready = threading.Event()
        """Set once the server's loop runs (requests that came before wait in the backlog)."""

    def attach(self) -> None:
        """Called in the server's loop as it starts."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self.ready.set()

    async def wait(self) -> None:
        if self._event is not None:
            await self._event.wait()

    def set(self) -> None:
        """Called from any thread."""
        if self._loop is not None and self._event is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._event.set)


def build_app(model: str, script: Script, ledger: Ledger, stopping: Stopping) -> Starlette:
    """The application: the routes, the OpenAI error format for 404 and 405."""
    answering = _Answering(model, script, ledger, stopping)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stopping.attach()
        yield

    async def not_found(request: Request, error: Exception) -> Response:
        status = error.status_code if isinstance(error, HTTPException) else 404
        detail = f"{request.method} {request.url.path} is not an endpoint of the simulator"
        return error_response(status, detail, "invalid_request_error")

    routes = [
        Route("/v1/chat/completions", answering.chat, methods=["POST"]),
        Route("/v1/responses", answering.responses, methods=["POST"]),
        Route("/v1/models", answering.models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", answering.one_model, methods=["GET"]),
    ]
    return Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found}
    )


def error_response(
    status: int,
    message: str,
    kind: str,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error in the API's format: ``{"error": {"message", "type", "param", "code"}}``."""
    error = ErrorObject(message=message, type=kind, param=None, code=code)
    return JSONResponse(
        {"error": error.model_dump(mode="json", exclude_unset=True)},
        status_code=status,
        headers={"x-request-id": fresh_id("req_"), **(headers or {})},
    )


_KINDS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def status_response(step: Status) -> JSONResponse:
    kind, code = _KINDS.get(step.status, ("server_error", None))
    message = step.message or f"HTTP {step.status}, on demand (tooldeck.testing fail.status)"
    headers = {} if step.retry_after is None else {"retry-after": f"{step.retry_after:g}"}
    return error_response(step.status, message, kind, code, headers)


class _Answering:
    def __init__(self, model: str, script: Script, ledger: Ledger, stopping: Stopping) -> None:
        self.model = model
        self.script = script
        self.ledger = ledger
        self.stopping = stopping
        self.stored: dict[str, tuple[SimMessage, ...]] = {}
        """Each stored Responses answer's conversation, by response id."""

    async def chat(self, request: Request) -> Response:
        return await self._answer(request, "chat")

    async def responses(self, request: Request) -> Response:
        return await self._answer(request, "responses")

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._model_info()]})

    async def one_model(self, request: Request) -> Response:
        if request.path_params["model_id"] != self.model:
            detail = f"The model {request.path_params['model_id']!r} does not exist"
            return error_response(404, detail, "invalid_request_error", "model_not_found")
        return JSONResponse(self._model_info())

    def _model_info(self) -> dict[str, Any]:
        info = ModelInfo(id=self.model, created=0, object="model", owned_by=OWNER)
        return info.model_dump(mode="json", exclude_unset=True)

    async def _answer(self, request: Request, api: Api) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError as error:
            return error_response(400, f"the body is not JSON: {error}", "invalid_request_error")
        if not isinstance(body, dict):
            return error_response(400, "the body is not a JSON object", "invalid_request_error")
        headers = {key.lower(): value for key, value in request.headers.items()}
        previous = body.get("previous_response_id") if api == "responses" else None
        earlier: tuple[SimMessage, ...] = ()
        if previous is not None:
            found = self.stored.get(previous) if isinstance(previous, str) else None
            if found is None:
                detail = f"Previous response with id {previous!r} not found."
                return error_response(
                    400, detail, "invalid_request_error", "previous_response_not_found"
                )
            earlier = found
        number = self.ledger.next_number()
        sim_request = read_request(number, api, request.url.path, headers, body, earlier)
        chosen = self.script.take(sim_request)
        if chosen is None:
            return self._unscripted(sim_request, self.script.exhausted(sim_request))
        try:
            step = resolve(chosen, sim_request)
        except Exception as error:
            return self._unscripted(sim_request, f"the step function raised {error!r}")
        return await self._perform(step, sim_request, request.receive)

    def _store(self, planned: Planned, request: SimRequest) -> None:
        """Keep a Responses answer's conversation for ``previous_response_id`` (unless the
        request said ``store: false``), as the API keeps it: without its instructions."""
        if request.body.get("store") is False:
            return
        said = [message for message in request.messages if message.role != "system"]
        calls = tuple((call.name, call.arguments) for call in planned.calls)
        self.stored[planned.id] = (*said, SimMessage("assistant", planned.text, calls))

    def _unscripted(self, request: SimRequest, problem: str) -> Response:
        self.ledger.add(Exchange(request, None), problem)
        return error_response(
            500, f"tooldeck simulator: {problem}", "server_error", "simulator_unscripted"
        )

    async def _perform(self, step: Step, request: SimRequest, receive: Receive) -> Response:
        if isinstance(step, Status):
            self.ledger.add(Exchange(request, step))
            return status_response(step)
        if isinstance(step, Hang):
            self.ledger.add(Exchange(request, step))
            await _first_of(self.stopping.wait(), _disconnected(receive))
            return error_response(503, "the simulator stopped", "server_error")
        answer: Answer = step.answer if isinstance(step, CutStream | SlowFirstByte) else step
        planned = plan(answer, request, self.model)
        self.ledger.add(Exchange(request, step, tuple(call.id for call in planned.calls)))
        if request.api == "responses" and not isinstance(step, CutStream):
            self._store(planned, request)
        if isinstance(step, SlowFirstByte):
            waited = await _first_of(
                asyncio.sleep(step.seconds), self.stopping.wait(), _disconnected(receive)
            )
            if waited != 0:
                return error_response(503, "the simulator stopped", "server_error")
        cut = step.after_chunks if isinstance(step, CutStream) else None
        return _respond(planned, request, cut)


def _respond(planned: Planned, request: SimRequest, cut: int | None) -> Response:
    """The answer as a whole body or an event stream; cut short when ``cut`` is set."""
    headers = {"x-request-id": fresh_id("req_")}
    if not request.stream:
        body = (
            _chat_wire.completion(planned)
            if request.api == "chat"
            else _responses_wire.response(planned, request.body)
        )
        data = json.dumps(body).encode()
        if cut is not None:
            return _CutResponse([data[: len(data) // 2]], len(data), "application/json", headers)
        return Response(data, media_type="application/json", headers=headers)
    events = _sse(planned, request)
    if cut is not None:
        return _CutResponse(events[:cut], None, "text/event-stream", headers)
    return StreamingResponse(_paced(events), media_type="text/event-stream", headers=headers)


def _sse(planned: Planned, request: SimRequest) -> list[bytes]:
    if request.api == "chat":
        lines = [
            f"data: {json.dumps(chunk)}\n\n" for chunk in _chat_wire.chunks(planned, request.body)
        ]
        return [line.encode() for line in [*lines, "data: [DONE]\n\n"]]
    return [
        f"event: {kind}\ndata: {json.dumps(event)}\n\n".encode()
        for kind, event in _responses_wire.events(planned, request.body)
    ]


async def _paced(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event
        await asyncio.sleep(0)  # each event its own write, as a provider's tokens come


class ConnectionCut(Exception):
    """Raised to make uvicorn close the connection mid-response (a cut stream)."""


class _CutResponse(Response):
    """The status line, the headers and ``parts``, then the connection closed."""

    def __init__(
        self, parts: list[bytes], length: int | None, media_type: str, headers: dict[str, str]
    ) -> None:
        super().__init__(None, media_type=media_type, headers=headers)
        if length is not None:
            self.headers["content-length"] = str(length)
        else:
            del self.headers["content-length"]
        self.parts = parts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        for part in self.parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0)
        raise ConnectionCut("the simulator cut the response on demand (fail.cut_stream)")


async def _disconnected(receive: Receive) -> None:
    """Until the client goes away (the request's body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        continue


async def _first_of(*waits: Awaitable[None]) -> int:
    """The index of the first wait to finish; the others are cancelled."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return next(index for index, task in enumerate(tasks) if task in done)
    finally:
        for task in tasks:
            task.cancel()


class QuietCuts(logging.Filter):
    """Keeps uvicorn from logging a cut the simulator made on purpose as an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        return not isinstance(error, ConnectionCut)
