"""A real HTTP server on 127.0.0.1 that answers like the OpenAI API, for the adapter tests.

A test queues replies (a JSON body, a server-sent event stream, or an error status), runs
the real ``openai`` SDK against ``server.url``, and reads back every request the SDK sent:
its path, headers and JSON body. The bodies built here follow the shapes in the API
reference (Responses objects and streaming events, Chat Completions objects and chunks).
"""

from __future__ import annotations

import json
import select
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tooldeck import FunctionTool, ToolSpec

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
"""The argument schema of the add_numbers tool both adapters' tests use."""


def weather_spec() -> ToolSpec:
    return ToolSpec(
        name="get_weather",
        description="Current temperature for a city.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    )


def add_numbers_tool() -> FunctionTool[..., int]:
    return FunctionTool(
        name="add_numbers",
        description="Add two integers.",
        parameters=ADD_SCHEMA,
        handler=lambda a, b: a + b,
    )


CREATED = 1741476542


@dataclass
class Reply:
    """One scripted answer: a JSON body, or an event stream when ``events`` is set."""

    status: int = 200
    body: Any = None
    events: list[tuple[str | None, Any]] | None = None
    """(event name or None, data) pairs; data is JSON, or a str sent as it is (``[DONE]``)."""
    headers: dict[str, str] = field(default_factory=dict)
    hold_after: int | None = None
    """Send this many events, then keep the response open until the client goes away."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeOpenAI:
    """The server: queue replies with ``reply()``, read what came in from ``requests``."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.client_left = threading.Event()
        """Set when a client closed a held response (see ``Reply.hold_after``)."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def root(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def url(self) -> str:
        """The API base URL, as ``base_url=`` takes it."""
        return f"{self.root}/v1"

    def reply(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def bodies(self) -> list[Any]:
        """The JSON body of every request, in order."""
        return [request.body for request in self.requests]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def running() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {key.lower(): value for key, value in self.headers.items()}
            server.requests.append(Recorded("POST", self.path, headers, body))
            if not server.replies:
                self._send_json(500, error_body("the test queued no reply", "server_error"))
                return
            reply = server.replies.popleft()
            if reply.events is not None:
                self._send_events(reply)
            else:
                self._send_json(reply.status, reply.body, reply.headers)

        def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_events(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for sent, (event, data) in enumerate(reply.events or []):
                if sent == reply.hold_after:
                    self._hold_until_client_leaves()
                    return
                text = data if isinstance(data, str) else json.dumps(data)
                prefix = f"event: {event}\n" if event else ""
                self.wfile.write(f"{prefix}data: {text}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

        def _hold_until_client_leaves(self, limit_s: float = 30.0) -> None:
            """Wait (bounded) until the client closes the connection, then record it."""
            self.close_connection = True
            deadline = time.monotonic() + limit_s
            while time.monotonic() < deadline:
                readable, _, _ = select.select([self.connection], [], [], 0.05)
                if readable and not self.connection.recv(1024):
                    server.client_left.set()
                    return

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read the recorded requests instead."""

    return Handler


def error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """An API error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def error_reply(status: int, message: str, type_: str, code: str | None = None) -> Reply:
    """An error status; ``retry-after-ms`` keeps the SDK's retries fast."""
    return Reply(status, error_body(message, type_, code), headers={"retry-after-ms": "5"})


# --- Responses API -------------------------------------------------------------------------


def message_item(text: str, id: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "message",
        "id": id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def refusal_item(refusal: str, id: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "message",
        "id": id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": refusal}],
    }


def call_item(call_id: str, name: str, arguments: str, id: str | None = None) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": id or f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def response_body(
    output: list[dict[str, Any]],
    *,
    id: str = "resp_1",
    status: str = "completed",
    usage: tuple[int, int] | None = (12, 5),
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Response object as ``POST /v1/responses`` returns it."""
    return {
        "id": id,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-4.1-mini-2025-04-14",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _response_usage(usage),
        "user": None,
        "metadata": {},
    }


def _response_usage(usage: tuple[int, int] | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage[0],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage[1],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage[0] + usage[1],
    }


def response_events(final: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The event stream that produces ``final``: created, each item added/deltas/done, completed."""
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(final["output"]):
        events.extend(_item_events(index, item))
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete"}
    events.append({"type": terminal.get(final["status"], "response.failed"), "response": final})
    return [(event["type"], {**event, "sequence_number": n}) for n, event in enumerate(events)]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    where = {"item_id": item["id"], "output_index": index}
    events: list[dict[str, Any]] = []
    if item["type"] == "function_call":
        added = {**item, "arguments": "", "status": "in_progress"}
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        for piece in _halves(item["arguments"]):
            events.append(
                {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            )
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **where,
                "name": item["name"],
                "arguments": item["arguments"],
            }
        )
    elif item["type"] == "message" and item["content"][0]["type"] == "output_text":
        added = {**item, "status": "in_progress", "content": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        part = where | {"content_index": 0}
        text = item["content"][0]["text"]
        empty = {"type": "output_text", "text": "", "annotations": []}
        events.append({"type": "response.content_part.added", **part, "part": empty})
        for piece in _halves(text):
            events.append({"type": "response.output_text.delta", **part, "delta": piece})
        events.append({"type": "response.output_text.done", **part, "text": text})
        events.append({"type": "response.content_part.done", **part, "part": item["content"][0]})
    else:
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [text[:middle], text[middle:]] if middle else [text]


# --- Chat Completions ----------------------------------------------------------------------


def chat_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def completion_body(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    finish_reason: str | None = None,
    refusal: str | None = None,
    usage: tuple[int, int] | None = (20, 7),
) -> dict[str, Any]:
    """A ChatCompletion object as ``POST /v1/chat/completions`` returns it."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": refusal,
        "annotations": [],
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": CREATED,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": _chat_usage(usage),
        "service_tier": "default",
        "system_fingerprint": "fp_1",
    }


def _chat_usage(usage: tuple[int, int] | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": usage[0],
        "completion_tokens": usage[1],
        "total_tokens": usage[0] + usage[1],
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def completion_chunks(final: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The chunk stream that produces ``final``, a usage chunk, then ``[DONE]``."""
    choice = final["choices"][0]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": "", "refusal": None}]
    for piece in _halves(message["content"] or ""):
        if piece:
            deltas.append({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {"index": index, "id": call["id"], "type": "function"}
        deltas.append(
            {
                "tool_calls": [
                    {**head, "function": {"name": call["function"]["name"], "arguments": ""}}
                ]
            }
        )
        for piece in _halves(call["function"]["arguments"]):
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    chunks = [
        _chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])
        for delta in deltas
    ]
    chunks.append(
        _chunk(
            [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}]
        )
    )
    chunks.append(_chunk([], usage=final["usage"]))
    return [(None, chunk) for chunk in chunks] + [(None, "[DONE]")]


def _chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "gpt-4.1-mini-2025-04-14",
        "system_fingerprint": "fp_1",
        "choices": choices,
        "usage": usage,
    }
