"""The Anthropic Messages API as the loopback server speaks it, for the adapter tests.

The bodies follow the API reference: a Message from ``POST /v1/messages``, the same
message as server-sent events (``message_start``, ``content_block_start`` / ``_delta`` /
``_stop``, ``message_delta``, ``message_stop``, with a ``ping``), and error bodies
``{"type": "error", "error": {"type", "message"}, "request_id"}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _loopback import LoopbackServer, Reply, running

MODEL = "claude-sonnet-5"


@contextmanager
def anthropic_server(keep_alive: bool = False) -> Iterator[LoopbackServer]:
    with running(error_reply(500, "api_error", "the test queued no reply"), keep_alive) as server:
        yield server


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id: str, name: str, input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def thinking(value: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def redacted_thinking(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def message_body(
    content: list[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    usage: tuple[int, int] = (25, 9),
    cached: int = 0,
    stop_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Message; ``stop_reason`` defaults to ``tool_use`` when a block is one, else ``end_turn``."""
    calls = any(block["type"] == "tool_use" for block in content)
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
        "stop_details": stop_details,
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
            "service_tier": "standard",
        },
    }


def message_events(final: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The event stream that produces ``final``, each block's text or input in two pieces."""
    start_usage = {**final["usage"], "output_tokens": 1}
    started = {**final, "content": [], "stop_reason": None, "stop_details": None}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**started, "usage": start_usage}},
        {"type": "ping"},
    ]
    for index, block in enumerate(final["content"]):
        events.extend(_block_events(index, block))
    delta = {
        "stop_reason": final["stop_reason"],
        "stop_sequence": None,
        "stop_details": final["stop_details"],
    }
    usage = {"output_tokens": final["usage"]["output_tokens"]}
    events.append({"type": "message_delta", "delta": delta, "usage": usage})
    events.append({"type": "message_stop"})
    return [(event["type"], event) for event in events]


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    kind = block["type"]
    if kind == "text":
        start, deltas = (
            text(""),
            [{"type": "text_delta", "text": p} for p in _halves(block["text"])],
        )
    elif kind in ("tool_use", "server_tool_use"):
        raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
        start = {**block, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *_halves(raw)]]
    elif kind == "thinking":
        start = thinking("", "")
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _halves(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        start, deltas = block, []
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _halves(value: str) -> list[str]:
    middle = len(value) // 2
    return [value[:middle], value[middle:]] if middle else [value]


def error_body(type_: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": type_, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


def error_reply(status: int, type_: str, message: str) -> Reply:
    """An error status; ``retry-after-ms`` keeps the SDK's retries fast."""
    return Reply(status, error_body(type_, message), headers={"retry-after-ms": "5"})


def stream_error(type_: str, message: str) -> Reply:
    """A stream that starts, then reports an ``error`` event (as on overload mid-stream)."""
    started = {**message_body([]), "stop_reason": None}
    return Reply(
        events=[
            ("message_start", {"type": "message_start", "message": started}),
            ("error", {"type": "error", "error": {"type": type_, "message": message}}),
        ]
    )
