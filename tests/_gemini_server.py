"""The Gemini API as the loopback server speaks it, for the adapter tests.

The bodies follow the API reference: a GenerateContentResponse from
``POST /{version}/models/{model}:generateContent``, the same response cut into chunks as
``:streamGenerateContent?alt=sse`` sends them (``data:`` lines ended by CRLF, text split
across chunks, the finish reason and usage on the last), and error bodies ``{"error": {"code", "message", "status"}}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _loopback import LoopbackServer, Reply, running

MODEL = "gemini-2.5-flash"
GENERATE = f"/v1/models/{MODEL}:generateContent"
STREAM = f"/v1/models/{MODEL}:streamGenerateContent?alt=sse"


@contextmanager
def gemini_server(keep_alive: bool = False) -> Iterator[LoopbackServer]:
    with running(error_reply(500, "INTERNAL", "the test queued no reply"), keep_alive) as server:
        yield server


def text_part(text: str, signature: str | None = None) -> dict[str, Any]:
    return _signed({"text": text}, signature)


def thought_part(text: str, signature: str | None = None) -> dict[str, Any]:
    return _signed({"text": text, "thought": True}, signature)


def call_part(
    name: str, args: Any, id: str | None = None, signature: str | None = None
) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": args}
    if id is not None:
        call["id"] = id
    return _signed({"functionCall": call}, signature)


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    return {**part, "thoughtSignature": signature} if signature else part


def response_body(
    parts: list[dict[str, Any]],
    *,
    finish_reason: str = "STOP",
    finish_message: str | None = None,
    usage: tuple[int, int, int] = (30, 8, 0),
) -> dict[str, Any]:
    """A GenerateContentResponse with one candidate; ``usage`` is (prompt, output, thoughts)."""
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": parts},
        "finishReason": finish_reason,
        "index": 0,
    }
    if finish_message is not None:
        candidate["finishMessage"] = finish_message
    return {
        "candidates": [candidate],
        "usageMetadata": _usage(usage),
        "modelVersion": MODEL,
        "responseId": "mdLHaMSPKZ7Mz7IPv5vHqAQ",
    }


def blocked_body(reason: str, message: str | None = None) -> dict[str, Any]:
    """A response to a prompt the API refused to answer: no candidates, a ``blockReason``."""
    feedback: dict[str, Any] = {"blockReason": reason}
    if message is not None:
        feedback["blockReasonMessage"] = message
    return {"promptFeedback": feedback, "usageMetadata": _usage((12, 0, 0)), "modelVersion": MODEL}


def _usage(usage: tuple[int, int, int]) -> dict[str, Any]:
    prompt, output, thoughts = usage
    counts = {"promptTokenCount": prompt, "candidatesTokenCount": output}
    if thoughts:
        counts["thoughtsTokenCount"] = thoughts
    return {**counts, "totalTokenCount": prompt + output + thoughts}


def response_chunks(final: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The stream that produces ``final``: text in two chunks (a signature on the second),
    each other part in its own chunk, the finish reason and usage on the last chunk."""
    candidate = final["candidates"][0]
    pieces: list[dict[str, Any]] = []
    for part in candidate["content"]["parts"]:
        if "text" in part and len(part["text"]) > 1:
            middle = len(part["text"]) // 2
            head = {key: value for key, value in part.items() if key != "thoughtSignature"}
            pieces.append({**head, "text": part["text"][:middle]})
            pieces.append({**part, "text": part["text"][middle:]})
        else:
            pieces.append(part)
    chunks = [_chunk([piece]) for piece in pieces]
    last = _chunk([text_part("")])
    last["candidates"][0]["finishReason"] = candidate["finishReason"]
    if "finishMessage" in candidate:
        last["candidates"][0]["finishMessage"] = candidate["finishMessage"]
    last["usageMetadata"] = final["usageMetadata"]
    return [(None, chunk) for chunk in [*chunks, last]]


def stream_reply(events: list[tuple[str | None, Any]], hold_after: int | None = None) -> Reply:
    """Chunks as ``streamGenerateContent?alt=sse`` sends them: ``data:`` lines ended by CRLF."""
    return Reply(events=events, line_end="\r\n", hold_after=hold_after)


def _chunk(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
        "modelVersion": MODEL,
        "responseId": "mdLHaMSPKZ7Mz7IPv5vHqAQ",
    }


def error_body(code: int, status: str, message: str, reason: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if reason is not None:
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
            }
        ]
    return {"error": error}


def error_reply(code: int, status: str, message: str, reason: str | None = None) -> Reply:
    return Reply(code, error_body(code, status, message, reason))
