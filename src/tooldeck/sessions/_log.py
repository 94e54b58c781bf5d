"""The session log as both databases store it: its SQL, its rows, and their versions.

One table, ``tooldeck_session_log``, keyed by (session id, entry number); each row carries
the run id, its kind, a JSON body and the schema version it was written in. The SQL is
written once, with ``?`` placeholders and types both SQLite and PostgreSQL read the same.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from itertools import chain, groupby
from operator import itemgetter
from typing import Any

from pydantic import ValidationError

from tooldeck.errors import CheckpointError, SessionConflict, SessionError
from tooldeck.messages import Message
from tooldeck.results import Checkpoint, HistorySummary
from tooldeck.run.session import History, StoredRun
from tooldeck.sessions._rows import (
    CLEARED,
    PAUSED,
    RESUMED,
    RUN_MESSAGES,
    STORED_RUN,
    Place,
    Row,
    checked_row,
    decode_runs,
    first_problem,
)

SCHEMA_VERSION = 2
"""The layout and row format this tooldeck writes (0: one row per message, before stored runs;
1: no stored history summary)."""


CREATE = (
    """CREATE TABLE IF NOT EXISTS tooldeck_session_log (
    session_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('turn', 'paused', 'resumed', 'cleared')),
    body TEXT,
    schema_version INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, seq)
)""",
    "CREATE TABLE IF NOT EXISTS tooldeck_session_schema (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS tooldeck_session_summary (
    session_id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
)""",
)
SCHEMA_TABLE = "tooldeck_session_schema"
GET_VERSION = "SELECT max(version) FROM tooldeck_session_schema"
SET_VERSION = (
    "DELETE FROM tooldeck_session_schema",
    "INSERT INTO tooldeck_session_schema VALUES (?)",
)
V0_TABLE = "tooldeck_session_messages"
"""Schema 0's table: (session_id, position, run_id, message) — one row per message."""
READ_V0 = (
    "SELECT session_id, position, run_id, message FROM tooldeck_session_messages "
    "ORDER BY session_id, position"
)
LOAD = (
    "SELECT seq, run_id, kind, schema_version, CASE WHEN seq > ? OR kind <> 'turn' THEN body END "
    "FROM tooldeck_session_log WHERE session_id = ? AND (kind = 'turn' OR seq = ("
    "SELECT max(seq) FROM tooldeck_session_log WHERE session_id = ?)) ORDER BY seq"
)
"""Every stored run's entry and the head entry; the bodies of those the reader has not seen
yet."""
HEAD = (
    "SELECT seq, run_id, kind, schema_version, body FROM tooldeck_session_log WHERE session_id = ? "
    "ORDER BY seq DESC LIMIT 1"
)
SAVE_SUMMARY = (
    "INSERT INTO tooldeck_session_summary VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE "
    "SET body = excluded.body, schema_version = excluded.schema_version, "
    "created_at = excluded.created_at"
)
"""Keep the latest summary of the session's earlier runs (``Summarize``), with its stored run."""
READ_SUMMARY = "SELECT schema_version, body FROM tooldeck_session_summary WHERE session_id = ?"
DELETE_SUMMARY = "DELETE FROM tooldeck_session_summary WHERE session_id = ?"
MAX_SEQ = "SELECT coalesce(max(seq), 0) FROM tooldeck_session_log WHERE session_id = ?"
INSERT = "INSERT INTO tooldeck_session_log VALUES (?, ?, ?, ?, ?, ?, ?)"
APPEND = (
    "INSERT INTO tooldeck_session_log SELECT ?, ?, ?, ?, ?, ?, ? WHERE coalesce(("
    "SELECT max(seq) FROM tooldeck_session_log WHERE session_id = ?), 0) = ?"
)
"""Insert entry ``after + 1`` only if ``after`` is still the head (one statement: atomic)."""
CLAIM = APPEND + (
    " AND EXISTS (SELECT 1 FROM tooldeck_session_log WHERE session_id = ? AND seq = ? "
    "AND kind = 'paused' AND run_id = ?)"
)
"""Insert the ``resumed`` entry after a paused run's entry, if that entry is still the head."""
DELETE = "DELETE FROM tooldeck_session_log WHERE session_id = ?"

SummaryRow = tuple[int, str]
"""schema_version, body (READ_SUMMARY)."""


class StaleCache(Exception):
    """The session's entries changed under a StoredRunCache (a hand edit): load again, in full."""


class StoredRunCache:
    """The stored runs read or written by the session objects of one conversation, by entry
    number.

    An entry never changes once written (the log is append-only and its numbers are never
    reused, not even by a clear), so loading again reads and decodes only the stored runs added
    since by others. An entry is known by its number and run id: if the log was rewritten by
    hand, the next load reads everything again. Each load keeps only the stored runs the log still
    holds (another process may have cleared some). Shared by the session objects of one
    conversation in a process (``tooldeck.sessions.stored_run_cache``); ``lock`` is held while a
    load or a write updates it.
    """

    __slots__ = ("__weakref__", "lock", "runs", "seen", "size")

    def __init__(self) -> None:
        _every_cache.add(self)
        self.seen = 0
        """Every stored run's entry up to this number is in ``runs``."""
        self.runs: dict[tuple[int, str], tuple[Message, ...]] = {}
        """(entry number, run id) -> the stored run's messages."""
        self.size = 0
        """How many messages ``runs`` holds."""
        self.lock = threading.Lock()

    def forget(self) -> None:
        with self.lock:
            self._forget()

    def _forget(self) -> None:
        self.seen = 0
        self.runs = {}
        self.size = 0

    def wrote(self, seq: int, run: StoredRun | None) -> None:
        """A session object committed entry ``seq`` (a stored run, or another kind: None)."""
        with self.lock:
            if run is not None and run.checkpoint is None:
                self.runs[seq, run.run_id] = run.messages
                self.size += len(run.messages)
            if self.seen == seq - 1:
                self.seen = seq

    def load_parameters(self, session_id: str) -> tuple[Any, ...]:
        """The parameters of LOAD for this session and what this cache holds."""
        return (self.seen, session_id, session_id)


_every_cache: weakref.WeakSet[StoredRunCache] = weakref.WeakSet()


def _unlock_after_fork() -> None:
    """In a forked child: a cache's lock may have been held by a thread that is not there."""
    for cache in list(_every_cache):
        cache.lock = threading.Lock()


os.register_at_fork(after_in_child=_unlock_after_fork)


def encode_messages(messages: tuple[Message, ...]) -> str:
    """A stored run's messages as a JSON array of ``Message.model_dump(mode="json")``, leaving out
    fields at their defaults (empty tool calls, no call id...): a third less to read back."""
    return RUN_MESSAGES.dump_json(messages, exclude_defaults=True).decode()


def append_parameters(session_id: str, run: StoredRun, after: int) -> tuple[Any, ...]:
    """The parameters of APPEND for ``run`` as entry ``after + 1``."""
    if run.checkpoint is not None:
        kind, body = PAUSED, run.checkpoint.to_json()
    else:
        kind, body = STORED_RUN, encode_messages(run.messages)
    row = (session_id, after + 1, run.run_id, kind, body, SCHEMA_VERSION, time.time())
    return (*row, session_id, after)


def summary_parameters(session_id: str, run: StoredRun) -> tuple[Any, ...] | None:
    """The parameters of SAVE_SUMMARY for a stored run that carries a history summary."""
    if run.summary is None:
        return None
    return (session_id, run.summary.model_dump_json(), SCHEMA_VERSION, time.time())


def claim_parameters(session_id: str, run_id: str, after: int) -> tuple[Any, ...]:
    """The parameters of CLAIM: the ``resumed`` entry of ``run_id`` after its paused entry."""
    row = (session_id, after + 1, run_id, RESUMED, None, SCHEMA_VERSION, time.time())
    return (*row, session_id, after, session_id, after, run_id)


def cleared_row(session_id: str, head: int) -> tuple[Any, ...]:
    """The entry that marks a clear: entry numbers go on from the old head, never reused."""
    return (session_id, head + 1, "", CLEARED, None, SCHEMA_VERSION, time.time())


def read_history(
    rows: Sequence[Row],
    where: str,
    cache: StoredRunCache,
    summary: SummaryRow | None = None,
    *,
    session_id: str = "",
) -> History:
    """The History of LOAD's rows (and READ_SUMMARY's row): every stored run's messages, the
    head, a paused run, the summary of earlier runs."""
    place = Place(where, session_id)
    rows = [checked_row(row, place) for row in rows]
    _check_versions(rows, where)
    with cache.lock:
        messages, stored = _messages(rows, place, cache)
    if not rows:
        return History((), 0)
    head = rows[-1]
    pending = _pending(head, place)
    return History(messages, head[0], pending, _summary(summary, where), stored)


def _messages(
    rows: Sequence[Row], place: Place, cache: StoredRunCache
) -> tuple[tuple[Message, ...], tuple[tuple[str, int], ...]]:
    """Every stored run's messages: decoded from the rows that have a body, the rest from the
    cache; and each one's run id and message count."""
    runs = cache.runs
    fresh = [row for row in rows if row[2] == STORED_RUN and row[0] > cache.seen]
    if fresh:
        decoded = decode_runs(fresh, place)
        runs.update(zip([(seq, run) for seq, run, *_ in fresh], decoded, strict=True))
    keys = [(seq, run) for seq, run, kind, *_ in rows if kind == STORED_RUN]
    try:
        found = [runs[key] for key in keys]
    except KeyError:  # the log was rewritten by hand under this cache
        cache._forget()
        raise StaleCache from None
    if len(runs) > len(keys):  # runs cleared (by another process) since: let them go
        cache.runs = dict(zip(keys, found, strict=True))
    messages = tuple(chain.from_iterable(found))
    if rows:
        cache.seen = rows[-1][0]
    cache.size = len(messages)
    stored = tuple((run, len(messages)) for (_, run), messages in zip(keys, found, strict=True))
    return messages, stored


def _summary(row: SummaryRow | None, where: str) -> HistorySummary | None:
    if row is None:
        return None
    version, body = row
    if version > SCHEMA_VERSION:
        raise SessionError(newer_schema(where, version))
    try:
        return HistorySummary.model_validate_json(body)
    except ValidationError as error:
        raise SessionError(
            f"the history summary stored in {where} cannot be read: {first_problem(error)}"
        ) from None


def read_pending(row: Row | None, where: str, *, session_id: str = "") -> Checkpoint | None:
    """The paused run's checkpoint, if the head row (HEAD's row) is one."""
    if row is None:
        return None
    place = Place(where, session_id)
    row = checked_row(row, place)
    _check_versions([row], where)
    return _pending(row, place)


def _pending(head: Row, place: Place) -> Checkpoint | None:
    seq, _, kind, _, body = head
    if kind != PAUSED:
        return None
    if body is None:
        raise SessionError(
            f"{place.entry(seq)} cannot be read: it is a paused run with no checkpoint (NULL "
            "body). Clear the session to go on"
        )
    try:
        return Checkpoint.from_json(body)
    except CheckpointError as error:
        raise SessionError(
            f"the paused run stored as {place.entry(seq)} cannot be read: {error}"
        ) from None


def _check_versions(rows: Iterable[Row], where: str) -> None:
    newest = max((row[3] for row in rows), default=0)
    if newest > SCHEMA_VERSION:
        raise SessionError(newer_schema(where, newest))


def check_schema(where: str, version: int | None) -> None:
    """Refuse a database whose session schema is newer than this tooldeck's."""
    if version is not None and version > SCHEMA_VERSION:
        raise SessionError(newer_schema(where, version))


def newer_schema(where: str, version: int) -> str:
    return (
        f"{where} holds sessions in schema version {version}, newer than this tooldeck reads "
        f"({SCHEMA_VERSION}): it was written by a newer tooldeck. Upgrade tooldeck to read "
        "it, or use another database."
    )


def conflict(session_id: str, after: int) -> SessionConflict:
    return SessionConflict(
        f"session {session_id!r} changed while this run ran: the run started after entry "
        f"{after}, but another run or resume stored entry {after + 1} first. This run "
        "was not stored (it is in this error's .result): run the prompt again to continue from "
        "the session as it is now."
    )


def already_claimed(session_id: str, run_id: str) -> CheckpointError:
    return CheckpointError(
        f"the paused run {run_id!r} of session {session_id!r} was already resumed (or the "
        "session was cleared): a checkpoint is resumed exactly once"
    )


def runs_from_v0(rows: Iterable[tuple[str, int, str, str]], where: str) -> list[tuple[Any, ...]]:
    """Schema 0's message rows grouped into schema 1's stored runs: a run's messages, one
    entry.

    Rows come ordered by session and position. Each message is read and written again as
    this tooldeck's Message, so a row that does not parse stops the migration (nothing is
    changed: the migration is one transaction).
    """
    entries: list[tuple[Any, ...]] = []
    now = time.time()
    for session_id, session_rows in groupby(rows, key=itemgetter(0)):
        runs = groupby(session_rows, key=itemgetter(2))
        for seq, (run_id, run_rows) in enumerate(runs, start=1):
            messages = tuple(_v0_message(row, where) for row in run_rows)
            body = encode_messages(messages)
            entries.append((session_id, seq, run_id, STORED_RUN, body, SCHEMA_VERSION, now))
    return entries


def _v0_message(row: tuple[str, int, str, str], where: str) -> Message:
    try:
        return Message.model_validate_json(row[3])
    except ValidationError as error:
        raise SessionError(
            f"cannot migrate {where} from schema 0: the message at position {row[1]} of "
            f"session {row[0]!r} cannot be read ({first_problem(error)}); nothing was changed"
        ) from None
