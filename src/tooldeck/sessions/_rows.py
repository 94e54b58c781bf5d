"""A row of the session log, read back: each column checked, each stored run's body decoded.

The database is a file (or a server) other programs may write: a row may hold any type in
any column. Each is checked before it is used, and a row that is not what tooldeck writes
is a SessionError naming the session and the entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from tooldeck.errors import SessionError
from tooldeck.messages import Message

STORED_RUN, PAUSED, RESUMED, CLEARED = "turn", "paused", "resumed", "cleared"
"""The ``kind`` column's values, as written to disk: a stored run's is ``'turn'`` (a name
from before the word; stored sessions hold it, so it stays)."""
_KINDS = frozenset((STORED_RUN, PAUSED, RESUMED, CLEARED))

Row = tuple[int, str, str, int, str | None]
"""seq, run_id, kind, schema_version, body."""

RUN_MESSAGES = TypeAdapter(tuple[Message, ...])


class Place:
    """Where a stored row is, for the errors that name it: the database and the session."""

    __slots__ = ("session_id", "where")

    def __init__(self, where: str, session_id: str) -> None:
        self.where = where
        self.session_id = session_id

    def entry(self, seq: object) -> str:
        return f"entry {seq!r} of session {self.session_id!r} in {self.where}"


def checked_row(row: Sequence[Any], place: Place) -> Row:
    """A row of LOAD or HEAD as stored data: each column of its type (a hand edit or another
    program may have written anything), the body as text (a BLOB must be UTF-8)."""
    seq, run_id, kind, version, body = row
    problem = None
    if type(seq) is not int or seq < 1:  # entries are numbered from 1
        problem = f"its entry number is {type(seq).__name__} {seq!r}, not a positive integer"
    elif type(run_id) is not str:
        problem = f"its run id is {type(run_id).__name__}, not text"
    elif kind not in _KINDS:
        problem = f"its kind {kind!r} is none of {sorted(_KINDS)}"
    elif type(version) is not int:
        problem = f"its schema version is {type(version).__name__} {version!r}, not an integer"
    elif isinstance(body, bytes | bytearray | memoryview):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as error:
            problem = f"its body is a BLOB that is not UTF-8 text ({error})"
    elif body is not None and type(body) is not str:
        problem = f"its body is {type(body).__name__}, not JSON text"
    if problem is not None:
        raise SessionError(f"{place.entry(seq)} cannot be read: {problem}")
    return (seq, run_id, kind, version, body)


def decode_runs(rows: Sequence[Row], place: Place) -> list[tuple[Message, ...]]:
    """The messages of stored run entries, each body decoded on its own: no body can run into the
    next (as ``[a],[b`` and ``c]`` would, joined in one array)."""
    return [_run_messages(body, seq, place) for seq, _, _, _, body in rows]


def _run_messages(body: str | None, seq: int, place: Place) -> tuple[Message, ...]:
    if body is None:
        raise SessionError(
            f"{place.entry(seq)} cannot be read: it is a stored run with no body (NULL); "
            "its messages are lost. Delete the entry, or clear the session, to go on"
        )
    try:
        return RUN_MESSAGES.validate_json(body)
    except ValidationError as error:
        raise SessionError(f"{place.entry(seq)} cannot be read: {first_problem(error)}") from None


def first_problem(error: ValidationError) -> str:
    detail = error.errors()[0]
    where = ".".join(map(str, detail["loc"]))
    return f"{where}: {detail['msg']}" if where else detail["msg"]
