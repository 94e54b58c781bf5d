"""A proxy in front of an A2A server that ends every SendStreamingMessage answer after its
first event, cleanly, while the task goes on (as a load balancer that closes long
responses does); with ``no-subscribe`` it also answers every SubscribeToTask with an A2A
error (UnsupportedOperation), so a caller must ask for the task (GetTask) instead.

    python tests/_a2a_cut_proxy.py PORT UPSTREAM_URL [no-subscribe]

prints ``ready http://127.0.0.1:PORT`` once listening.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

port, upstream = int(sys.argv[1]), sys.argv[2].rstrip("/")
REFUSE_SUBSCRIBE = sys.argv[3:] == ["no-subscribe"]
http = httpx.AsyncClient(timeout=None)


async def forward(request: Request) -> Response:
    body = await request.body()
    method = _rpc_method(body)
    headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
    url = upstream + request.url.path
    if method == "SubscribeToTask" and REFUSE_SUBSCRIBE:
        error = {"code": -32004, "message": "this proxy does not carry subscriptions"}
        event = {"jsonrpc": "2.0", "id": json.loads(body).get("id"), "error": error}
        return Response(f"data: {json.dumps(event)}\n\n", media_type="text/event-stream")
    if method != "SendStreamingMessage":
        answer = await http.request(request.method, url, content=body, headers=headers)
        kept = {k: v for k, v in answer.headers.items() if k.lower() == "content-type"}
        return Response(answer.content, answer.status_code, headers=kept)
    sent = http.build_request("POST", url, content=body, headers=headers)
    answer = await http.send(sent, stream=True)
    return StreamingResponse(_first_event(answer), media_type="text/event-stream")


async def _first_event(answer: httpx.Response) -> AsyncIterator[bytes]:
    """The stream's bytes up to the end of its first event; then the stream ends."""
    seen = b""
    try:
        async for chunk in answer.aiter_raw():
            seen += chunk
            end = seen.replace(b"\r\n", b"\n").find(b"\n\n")
            if end >= 0:
                yield seen.replace(b"\r\n", b"\n")[: end + 2]
                return
    finally:
        await answer.aclose()


def _rpc_method(body: bytes) -> str:
    try:
        method = json.loads(body).get("method", "")
    except (ValueError, AttributeError):
        return ""
    return method if isinstance(method, str) else ""


app = Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


async def serve() -> None:
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():  # it could not start (the port is taken): say so, do not wait
            raise SystemExit(f"could not serve on 127.0.0.1:{port}")
        await asyncio.sleep(0.02)
    print(f"ready http://127.0.0.1:{port}", flush=True)
    await task


asyncio.run(serve())
