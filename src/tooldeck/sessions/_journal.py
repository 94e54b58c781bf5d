"""The journal of a session's runs, as both databases keep it (``tooldeck.run._engine.journal``).

One table, ``tooldeck_session_journal``, keyed by (session id, run id, step): step 0 is a
run's opening (a JSON body the run layer writes and reads: who runs it, from which head,
its prompt or its resume), steps 1, 2... what it did since. The runs inside an agent tool's
calls write steps under ids derived from the outer run's (no opening). A session's journal
is dropped whole when a run commits (every other opening then belongs to a run that lost
the head, or a crashed run the committing one closed first) and when the session is
cleared. Created with the session schema, or on first use by a database of an older tooldeck
(the log itself is unchanged, so the schema's version is too).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tooldeck.errors import SessionError
from tooldeck.run.session import History, UnfinishedRun

CREATE = """CREATE TABLE IF NOT EXISTS tooldeck_session_journal (
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    body TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, run_id, step)
)"""
LATEST = (
    "SELECT run_id, step, body FROM tooldeck_session_journal WHERE session_id = ? AND run_id = "
    "(SELECT run_id FROM tooldeck_session_journal WHERE session_id = ? AND step = 0 "
    "ORDER BY created_at DESC LIMIT 1) ORDER BY step"
)
"""The latest opened run of the session: its opening and steps."""
READ_STEPS = (
    "SELECT run_id, step, body FROM tooldeck_session_journal WHERE session_id = ? AND "
    "run_id = ? AND step > 0 ORDER BY step"
)
WRITE = (
    "INSERT INTO tooldeck_session_journal VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (session_id, run_id, step) DO UPDATE SET body = excluded.body, "
    "created_at = excluded.created_at"
)
"""Write a step (or rewrite an opening: a run that stopped says so in it)."""
DROP = "DELETE FROM tooldeck_session_journal WHERE session_id = ?"
DROP_RUN = "DELETE FROM tooldeck_session_journal WHERE session_id = ? AND run_id = ?"

Row = tuple[Any, ...]
"""run_id, step, body."""


def write_parameters(session_id: str, run_id: str, step: int, body: str) -> tuple[Any, ...]:
    return (session_id, run_id, step, body, time.time())


def with_unfinished(history: History, rows: Sequence[Row], where: str) -> History:
    """``history`` with the session's latest opened run (LATEST's rows), if it has one."""
    if not rows:
        return history
    run_id = rows[0][0]
    bodies = [_body(row, where) for row in rows]
    opened, steps = None, []
    for (_, step, _), body in zip(rows, bodies, strict=True):
        if step == 0:
            opened = body
        else:
            steps.append(body)
    if opened is None:
        return history
    unfinished = UnfinishedRun(str(run_id), opened, tuple(steps), where=where)
    return replace(history, unfinished=unfinished)


def step_bodies(rows: Sequence[Row], where: str) -> tuple[str, ...]:
    """READ_STEPS' rows as text, each checked."""
    return tuple(_body(row, where) for row in rows)


def _body(row: Row, where: str) -> str:
    run_id, step, body = row
    if isinstance(body, bytes | bytearray | memoryview):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            body = None
    if type(body) is not str or type(step) is not int or type(run_id) is not str:
        raise SessionError(
            f"step {step!r} of run {run_id!r} in the journal of {where} cannot be read: "
            "it is not what tooldeck writes (a run id, a step number and JSON text)"
        )
    return body
