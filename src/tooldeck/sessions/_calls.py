"""The record of a session's ``side_effects`` calls, as both databases keep it.

One row per call, keyed by the session and the call's idempotency key: written (without a
result) as the call starts, by one transaction that inserts it only if no row is there —
so of two processes starting the same call, one runs it — and given the call's result when
it reports. The table is created by the first such call (a session without side-effect
tools never has it, and the session schema's version is unchanged).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import ValidationError

from tooldeck.errors import SessionError
from tooldeck.messages import ToolResult
from tooldeck.run.session import RecordedCall

CREATE = """CREATE TABLE IF NOT EXISTS tooldeck_session_calls (
    session_id TEXT NOT NULL,
    call_key TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    result TEXT,
    started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    PRIMARY KEY (session_id, call_key)
)"""
START = (
    "INSERT INTO tooldeck_session_calls (session_id, call_key, tool_name, started_at) "
    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
READ = "SELECT result FROM tooldeck_session_calls WHERE session_id = ? AND call_key = ?"
FINISH = (
    "UPDATE tooldeck_session_calls SET result = ?, finished_at = ? "
    "WHERE session_id = ? AND call_key = ?"
)


def start_parameters(session_id: str, key: str, tool_name: str) -> tuple[Any, ...]:
    return (session_id, key, tool_name, time.time())


def finish_parameters(session_id: str, key: str, result: ToolResult) -> tuple[Any, ...]:
    return (result.model_dump_json(), time.time(), session_id, key)


def recorded(row: tuple[Any, ...] | None, key: str, where: str) -> RecordedCall | None:
    """What the record says of a call that had started (``row``: its READ row), or None for
    a call that starts now (no row was there)."""
    if row is None:
        return None
    (body,) = row
    if body is None:
        return RecordedCall(None)
    try:
        return RecordedCall(ToolResult.model_validate_json(body))
    except ValidationError as error:
        raise SessionError(
            f"the recorded result of call {key!r} in {where} (table tooldeck_session_calls) "
            f"cannot be read: {error.errors()[0]['msg']}"
        ) from None
