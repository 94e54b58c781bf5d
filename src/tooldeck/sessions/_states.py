"""The capability states a session keeps: those its last stored run ended with, which its
next run starts from (``Capability.next_run_state``).

One table, ``tooldeck_session_states``, one row per session: the entry number of the stored
run the states belong to, and the states as JSON (written as a checkpoint writes them).
The row is written with a stored run that has states, in the append's transaction, and
deleted with a clear. Only the row of the session's last stored run counts: a later stored
run without states (or one written by an older tooldeck, which knows no such table) leaves
a row that belongs to an earlier run, read as none kept. Created on first use by a database
of an older tooldeck, as the journal is (the log is unchanged, so the schema's version is
too); a database without the row reads as none kept.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from tooldeck.errors import SessionError
from tooldeck.results import states_json
from tooldeck.run.session import StoredRun
from tooldeck.sessions._log import SCHEMA_VERSION, newer_schema
from tooldeck.sessions._rows import Place, first_problem

CREATE = """CREATE TABLE IF NOT EXISTS tooldeck_session_states (
    session_id TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    body TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
)"""
SAVE = (
    "INSERT INTO tooldeck_session_states VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO "
    "UPDATE SET seq = excluded.seq, body = excluded.body, "
    "schema_version = excluded.schema_version, created_at = excluded.created_at"
)
READ = "SELECT seq, schema_version, body FROM tooldeck_session_states WHERE session_id = ?"
DELETE = "DELETE FROM tooldeck_session_states WHERE session_id = ?"

Row = Sequence[Any]
"""seq, schema_version, body (READ), as stored: any type in any column."""

_STATES = TypeAdapter(dict[str, dict[str, Any]])


def save_parameters(session_id: str, run: StoredRun, seq: int) -> tuple[Any, ...] | None:
    """The parameters of SAVE for a stored run (entry ``seq``) that ended with states.

    Raises:
        TypeError: a state is not a JSON-able dict (naming the capability), before anything
            is written.
    """
    if run.capability_states is None:
        return None
    return (session_id, seq, states_json(run.capability_states), SCHEMA_VERSION, time.time())


def read_states(row: Row | None, last_run: int, place: Place) -> dict[str, Any] | None:
    """The states of the last stored run (entry ``last_run``), if READ's row is theirs.

    Raises:
        SessionError: the row is not what tooldeck writes (naming the session and the entry).
    """
    if row is None or last_run == 0:
        return None
    seq, version, body = row
    if type(seq) is not int:
        problem = f"its entry number is {type(seq).__name__} {seq!r}, not an integer"
        raise SessionError(f"the capability states kept for {place.entry(last_run)}: {problem}")
    if seq != last_run:
        return None  # an earlier run's: the last one kept none
    what = f"the capability states kept with {place.entry(seq)} cannot be read"
    if type(version) is not int:
        raise SessionError(
            f"{what}: its schema version is {type(version).__name__} {version!r}, not an integer"
        )
    if version > SCHEMA_VERSION:
        raise SessionError(newer_schema(place.where, version))
    if isinstance(body, bytes | bytearray | memoryview):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as error:
            problem = f"its body is a BLOB that is not UTF-8 text ({error})"
            raise SessionError(f"{what}: {problem}") from None
    if type(body) is not str:
        raise SessionError(f"{what}: its body is {type(body).__name__}, not JSON text")
    try:
        return _STATES.validate_json(body)
    except ValidationError as error:
        raise SessionError(
            f"{what}: {first_problem(error)} (each capability's state is a JSON object). "
            "Clear the session, or delete its row of tooldeck_session_states, to go on"
        ) from None
