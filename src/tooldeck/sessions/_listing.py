"""The conversations a session database holds, as both stores list them.

A conversation is listed while it holds a stored run or a paused run: a cleared session keeps
only the entry that marks the clear (entry numbers are never reused), so it is not listed.
Its title is the first user message of its first stored run (or of the paused run it began with).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tooldeck.errors import SessionError
from tooldeck.sessions._log import SCHEMA_VERSION, newer_schema

_TITLE_LENGTH = 200
"""Characters of the first user message kept as a conversation's title."""

LIST = (
    "SELECT g.session_id, g.runs, f.created_at, g.updated_at, h.kind, f.kind, f.body, "
    "f.schema_version FROM (SELECT session_id, "
    "sum(CASE WHEN kind = 'turn' THEN 1 ELSE 0 END) AS runs, "
    "min(CASE WHEN kind IN ('turn', 'paused') THEN seq END) AS first_seq, "
    "max(seq) AS head_seq, max(created_at) AS updated_at "
    "FROM tooldeck_session_log GROUP BY session_id) g "
    "JOIN tooldeck_session_log h ON h.session_id = g.session_id AND h.seq = g.head_seq "
    "JOIN tooldeck_session_log f ON f.session_id = g.session_id AND f.seq = g.first_seq "
    "ORDER BY g.updated_at DESC, g.session_id"
)
"""Every listed conversation, the most recently changed first (``limited`` adds a LIMIT)."""

ListRow = tuple[str, int, float, float, str, str, str | None, int]
"""session_id, runs, started_at, updated_at, head kind, first kind, first body, its version."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One conversation of a session database (``SQLiteSession.list_sessions``...)."""

    session_id: str
    title: str
    """The start of its first user message ('' if it cannot be told)."""
    runs: int
    """Finished runs stored (a paused run counts once it is resumed and finishes)."""
    started_at: float
    """When its first run was stored (Unix seconds)."""
    updated_at: float
    """When it last changed."""
    paused: bool
    """Its last run paused: calls wait for decisions before it can go on."""

    @property
    def turns(self) -> int:
        """``runs``, by its earlier name (a turn is a model's, not a stored run)."""
        warnings.warn("SessionInfo.turns is now SessionInfo.runs", DeprecationWarning, stacklevel=2)
        return self.runs


def limited(limit: int | None) -> str:
    """LIST with at most ``limit`` conversations (None: all)."""
    if limit is None:
        return LIST
    if limit < 1:
        raise ValueError(f"limit must be at least 1 (or None for all), got {limit!r}")
    return f"{LIST} LIMIT {int(limit)}"


def read_sessions(rows: list[Any], where: str) -> list[SessionInfo]:
    """The SessionInfo of each row of LIST."""
    listed = []
    for row in rows:
        session_id, runs, started, updated, head, first_kind, body, version = row
        problem = _wrong_types(row)
        if problem:
            raise SessionError(
                f"session {session_id!r} in {where} cannot be listed: {problem} (a row tooldeck "
                "did not write)"
            )
        if version > SCHEMA_VERSION:
            raise SessionError(newer_schema(where, version))
        listed.append(
            SessionInfo(
                session_id=session_id,
                title=_title(first_kind, body, session_id, where),
                runs=int(runs),
                started_at=float(started),
                updated_at=float(updated),
                paused=head == "paused",
            )
        )
    return listed


def _wrong_types(row: tuple[Any, ...]) -> str:
    """What in a row of LIST is not of the type tooldeck writes ('' when all is)."""
    session_id, runs, started, updated, _, _, body, version = row
    if type(session_id) is not str:
        return f"its id is {type(session_id).__name__}, not text"
    if type(version) is not int:
        return f"its first entry's schema version is {version!r}, not an integer"
    for name, value in (("runs", runs), ("created_at", started), ("updated_at", updated)):
        if type(value) not in (int, float, Decimal):  # PostgreSQL sums to numeric
            return f"its {name} is {type(value).__name__} {value!r}, not a number"
    if body is not None and not isinstance(body, str | bytes):
        return f"its first entry's body is {type(body).__name__}, not JSON text"
    return ""


def _title(kind: str, body: str | bytes | None, session_id: str, where: str) -> str:
    """The first user message of a stored run's body (a JSON array of messages) or a paused run's
    (a checkpoint: its ``messages``)."""
    try:
        data = json.loads(body or "null")
        messages = data.get("messages") if kind == "paused" else data
        first = next(m for m in messages if m.get("role") == "user")
        text = first.get("content", "")
    except (ValueError, TypeError, AttributeError, StopIteration, RecursionError):
        raise SessionError(
            f"the first entry of session {session_id!r} in {where} cannot be read: its body is "
            f"not a {'checkpoint' if kind == 'paused' else 'stored run'} with a user message"
        ) from None
    if not isinstance(text, str):
        raise SessionError(
            f"the first user message of session {session_id!r} in {where} has no text content"
        )
    return " ".join(text.split())[:_TITLE_LENGTH]
