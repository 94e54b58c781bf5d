"""Sessions in a SQLite file: the embedded default (standard-library ``sqlite3``).

Every SQLiteSession of one file in a process shares one connection, owned by one thread
(the event loop never waits on the database). The file is in WAL mode (readers never wait
for the writer) with a busy timeout for writers of other processes, and every write is one
``BEGIN IMMEDIATE`` transaction, rolled back on any error so no lock outlives it.

Durability: ``synchronous=NORMAL`` by default. A committed run survives the process being
killed at any point (SIGKILL included); a power cut or an operating-system crash may lose
the runs committed since the last WAL checkpoint, but never leaves half a run or a damaged
file. ``synchronous="FULL"`` adds an fsync to every commit (power-cut safe), which on this
machine's disk costs more than the whole commit otherwise does.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from tooldeck.errors import SessionError
from tooldeck.messages import ToolResult
from tooldeck.results import Checkpoint
from tooldeck.run.session import History, RecordedCall, StoredRun
from tooldeck.sessions import _calls, _journal, _log, _states
from tooldeck.sessions._stored import StoredSession, check_session_id
from tooldeck.sessions._thread import ConnectionThread

if TYPE_CHECKING:
    from tooldeck.sessions._listing import SessionInfo

T = TypeVar("T")
Synchronous = Literal["NORMAL", "FULL"]


class SQLiteSession(StoredSession):
    """One conversation kept in a SQLite file (created, or migrated from an older tooldeck,
    on first use).

    Args:
        path: The database file; several sessions (and processes) may share it. The
            file and its missing folders are created on first use.
        session_id: Which conversation of the file this is.
        synchronous: ``"NORMAL"`` (default: survives a killed process, may lose the latest
            runs stored on a power cut) or ``"FULL"`` (an fsync per commit: survives a power cut).
        busy_timeout_s: How long a write waits for another process's write to finish
            before it fails with SessionError.

    Runs on one session never interleave: a run that finds the session changed when it
    commits gets ``SessionConflict`` (it does not wait); see ``tooldeck.sessions``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        session_id: str,
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout_s: float = 5.0,
    ) -> None:
        check_session_id(session_id)
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if busy_timeout_s < 0:
            raise ValueError(f"busy_timeout_s must be >= 0, got {busy_timeout_s!r}")
        self.path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._key = (os.path.abspath(self.path), synchronous, busy_timeout_s)
        where = f"SQLite database {str(self.path)!r}"
        super().__init__(session_id, where, ("sqlite", *self._key, session_id))
        self._attach()

    def _attach(self) -> None:
        """Use the file's shared connection thread, until ``aclose()`` or garbage collection."""
        self._database = _shared.take(self._key)
        self._release = weakref.finalize(self, _shared.give_back, self._key, self._database)

    def __repr__(self) -> str:
        return f"SQLiteSession({str(self.path)!r}, {self._session_id!r})"

    async def _load(self) -> History:
        return await self._run(self._read)

    def _read(self, db: sqlite3.Connection) -> History:
        """LOAD, read and decoded in the database's thread, with the latest run opened in
        the journal."""
        session_id = self._session_id
        rows = db.execute(_log.LOAD, self._stored.load_parameters(session_id)).fetchall()
        summary = db.execute(_log.READ_SUMMARY, (session_id,)).fetchone()
        journal = db.execute(_journal.LATEST, (session_id, session_id)).fetchall()
        states = db.execute(_states.READ, (session_id,)).fetchone()
        return self._history(rows, summary, journal, states)

    async def append(self, run: StoredRun, *, after: int) -> int:
        """Append ``run`` as entry ``after + 1``; SessionConflict if ``after`` is not the head."""
        parameters = (
            _log.append_parameters(self._session_id, run, after),
            _log.summary_parameters(self._session_id, run),
            _states.save_parameters(self._session_id, run, after + 1),
        )
        if not await self._run(lambda db: self._commit(db, _append, parameters, run)):
            raise _log.conflict(self._session_id, after)
        return after + 1

    async def _keep_step(self, parameters: tuple[Any, ...]) -> None:
        await self._run(lambda db: _write(db, _write_journal, parameters))

    async def _close_then_open(
        self, closing: StoredRun, after: int, opened: tuple[Any, ...]
    ) -> None:
        parameters = (
            _log.append_parameters(self._session_id, closing, after),
            None,
            _states.save_parameters(self._session_id, closing, after + 1),
        )
        close_then_open = _then_open(_append, opened)
        if not await self._run(lambda db: self._commit(db, close_then_open, parameters, closing)):
            raise _log.conflict(self._session_id, after)

    async def claim_run(self, run_id: str, opening: str, *, after: int) -> int:
        """``consume``, with the resumed run's opening kept (see ``RunJournal``)."""
        parameters = (_log.claim_parameters(self._session_id, run_id, after), None, None)
        claim_and_open = _then_open(
            _claim, _journal.write_parameters(self._session_id, run_id, 0, opening)
        )
        if not await self._run(lambda db: self._commit(db, claim_and_open, parameters, None)):
            raise _log.already_claimed(self._session_id, run_id)
        return after + 1

    async def read_steps(self, run_id: str) -> tuple[str, ...]:
        """The bodies of run ``run_id``'s steps, in order."""
        parameters = (self._session_id, run_id)
        rows = await self._run(lambda db: db.execute(_journal.READ_STEPS, parameters).fetchall())
        return _journal.step_bodies(rows, self._place)

    async def drop_run(self, run_id: str) -> None:
        """Forget run ``run_id``'s journal."""
        parameters = (self._session_id, run_id)
        await self._run(lambda db: _write(db, _drop_run, parameters))

    async def pending(self) -> Checkpoint | None:
        """The checkpoint of the paused run that waits for decisions, if any."""
        session_id = self._session_id
        row = await self._run(lambda db: db.execute(_log.HEAD, (session_id,)).fetchone())
        return _log.read_pending(row, self._where, session_id=self._session_id)

    async def consume(self, run_id: str, *, after: int) -> int:
        """Claim paused run ``run_id`` (entry ``after``) for one resume; CheckpointError if
        it was claimed or cleared first."""
        parameters = (_log.claim_parameters(self._session_id, run_id, after), None, None)
        if not await self._run(lambda db: self._commit(db, _claim, parameters, None)):
            raise _log.already_claimed(self._session_id, run_id)
        return after + 1

    def _commit(
        self,
        db: sqlite3.Connection,
        insert: Callable[[sqlite3.Connection, _Entry], bool],
        parameters: _Entry,
        run: StoredRun | None,
    ) -> bool:
        """Write one entry, in the database's thread; remember a stored run it wrote."""
        written = _write(db, insert, parameters)
        if written:
            self._wrote(parameters[0][1], run)
        return written

    async def start_call(self, key: str, tool_name: str) -> RecordedCall | None:
        """Record that the ``side_effects`` call ``key`` starts; None if it never had, else
        what was recorded of it (see ``tooldeck.run.session.CallRecords``)."""
        parameters = _calls.start_parameters(self._session_id, key, tool_name)
        row = await self._run(lambda db: _write(db, _start_call, parameters))
        return _calls.recorded(row, key, self._where)

    async def finish_call(self, key: str, result: ToolResult) -> None:
        """Record the result of the ``side_effects`` call ``key``."""
        parameters = _calls.finish_parameters(self._session_id, key, result)
        await self._run(lambda db: _write(db, _finish_call, parameters))

    async def clear(self) -> None:
        """Delete every entry of this session (numbering goes on after the old head)."""
        session_id = self._session_id
        await self._run(lambda db: _write(db, _clear, session_id))
        self._cleared()

    async def aclose(self) -> None:
        """Let go of the shared connection (closed with the file's last session); using the
        session again takes it again."""
        self._release()

    @staticmethod
    async def list_sessions(
        path: str | os.PathLike[str], *, limit: int | None = 100, busy_timeout_s: float = 5.0
    ) -> list[SessionInfo]:
        """The conversations the file holds, the most recently changed first (at most
        ``limit``; None: all). A cleared session is not listed; a missing file holds none.

        Raises:
            SessionError: The file cannot be read, or holds a newer tooldeck's sessions.
        """
        from tooldeck.sessions import _listing  # only a listing pays for it

        query = _listing.limited(limit)
        where = f"SQLite database {str(path)!r}"
        if not Path(path).exists():
            return []
        key = (os.path.abspath(path), "NORMAL", busy_timeout_s)
        database = _shared.take(key)
        try:
            rows = await database.run(lambda db: db.execute(query).fetchall())
        except sqlite3.Error as error:
            raise _database_error(error, where, busy_timeout_s) from error
        finally:
            _shared.give_back(key, database)
        return _listing.read_sessions(rows, where)

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if not self._release.alive:
            self._attach()
        try:
            return await self._database.run(work)
        except sqlite3.Error as error:
            raise _database_error(error, self._where, self._busy_timeout_s) from error


_Entry = tuple[tuple[Any, ...], tuple[Any, ...] | None, tuple[Any, ...] | None]
"""An entry's parameters, its summary's (SAVE_SUMMARY) and its capability states' (the
states' SAVE), if it carries them."""


def _append(db: sqlite3.Connection, entry: _Entry) -> bool:
    """Insert the entry if its ``after`` is still the head (keep its summary and states,
    drop the session's journal); False when another came first."""
    parameters, summary, states = entry
    written = _insert_if_head(db, _log.APPEND, parameters)
    if written:
        db.execute(_journal.DROP, (parameters[0],))
        if summary is not None:
            db.execute(_log.SAVE_SUMMARY, summary)
        if states is not None:
            db.execute(_states.SAVE, states)
    return written


def _then_open(
    write: Callable[[sqlite3.Connection, _Entry], bool], opened: tuple[Any, ...]
) -> Callable[[sqlite3.Connection, _Entry], bool]:
    """``write``, then, if it wrote, a run's opening (``opened``) in the same transaction."""

    def write_then_open(db: sqlite3.Connection, entry: _Entry) -> bool:
        if not write(db, entry):
            return False
        db.execute(_journal.WRITE, opened)
        return True

    return write_then_open


def _write_journal(db: sqlite3.Connection, parameters: tuple[Any, ...]) -> None:
    db.execute(_journal.WRITE, parameters)


def _drop_run(db: sqlite3.Connection, parameters: tuple[Any, ...]) -> None:
    db.execute(_journal.DROP_RUN, parameters)


def _claim(db: sqlite3.Connection, entry: _Entry) -> bool:
    return _insert_if_head(db, _log.CLAIM, entry[0])


def _insert_if_head(db: sqlite3.Connection, statement: str, parameters: tuple[Any, ...]) -> bool:
    """One conditional insert; False if it inserted nothing or its entry number was taken.
    Any other failure (a constraint or trigger of the host's, a full disk) is raised."""
    try:
        return db.execute(statement, parameters).rowcount == 1
    except sqlite3.IntegrityError as error:
        if error.sqlite_errorname == "SQLITE_CONSTRAINT_PRIMARYKEY":
            return False
        raise


def _start_call(db: sqlite3.Connection, parameters: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Insert the call's row unless it is there: None if inserted, else its READ row."""
    db.execute(_calls.CREATE)
    if db.execute(_calls.START, parameters).rowcount == 1:
        return None
    row: tuple[Any, ...] = db.execute(_calls.READ, parameters[:2]).fetchone()
    return row


def _finish_call(db: sqlite3.Connection, parameters: tuple[Any, ...]) -> None:
    db.execute(_calls.FINISH, parameters)


def _clear(db: sqlite3.Connection, session_id: str) -> None:
    (head,) = db.execute(_log.MAX_SEQ, (session_id,)).fetchone()
    db.execute(_journal.DROP, (session_id,))
    if head:
        db.execute(_log.DELETE, (session_id,))
        db.execute(_log.DELETE_SUMMARY, (session_id,))
        db.execute(_states.DELETE, (session_id,))
        db.execute(_log.INSERT, _log.cleared_row(session_id, head))


def _write(
    db: sqlite3.Connection, work: Callable[[sqlite3.Connection, Any], T], argument: Any
) -> T:
    """``work`` in one write transaction: committed whole, or rolled back on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        result = work(db, argument)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return result


def _database_error(error: sqlite3.Error, where: str, busy_timeout_s: float) -> SessionError:
    text = str(error)
    if isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return SessionError(
            f"{where} stayed locked by another writer for longer than busy_timeout_s="
            f"{busy_timeout_s} ({text}); nothing was written. Try again, or give the session a "
            "longer busy_timeout_s."
        )
    return SessionError(f"{where}: {type(error).__name__}: {text}")


_Key = tuple[str, str, float]
"""The resolved file path, the synchronous level, the busy timeout."""


def _connect(key: _Key) -> sqlite3.Connection:
    """A connection in WAL mode with the schema ready (created, or migrated, in one write)."""
    path, synchronous, busy_timeout_s = key
    _make_folder(path)
    db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
    try:
        _use_wal(db, busy_timeout_s)
        db.execute(f"PRAGMA synchronous = {synchronous}")
        _write(db, _prepare_schema, f"SQLite database {path!r}")
    except BaseException:
        db.close()
        raise
    return db


def _make_folder(path: str) -> None:
    """Create the database's folder (and its parents) if missing, as the file itself is."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise SessionError(
            f"SQLite database {path!r}: its folder {folder!r} is missing and cannot be "
            f"created ({error.strerror or error}); create it, or give another path"
        ) from error


def _use_wal(db: sqlite3.Connection, busy_timeout_s: float) -> None:
    """Switch to WAL; the switch can find the file locked by another connection's setup."""
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _prepare_schema(db: sqlite3.Connection, where: str) -> None:
    version = _schema_version(db)
    _log.check_schema(where, version)
    db.execute(_journal.CREATE)  # a database of an older tooldeck has none yet
    db.execute(_states.CREATE)  # nor this
    if version == _log.SCHEMA_VERSION:
        return
    for statement in _log.CREATE:
        db.execute(statement)
    if version == 0:
        old_rows = db.execute(_log.READ_V0).fetchall()
        db.executemany(_log.INSERT, _log.runs_from_v0(old_rows, where))
        db.execute(f"DROP TABLE {_log.V0_TABLE}")
    db.execute(_log.SET_VERSION[0])
    db.execute(_log.SET_VERSION[1], (_log.SCHEMA_VERSION,))


def _schema_version(db: sqlite3.Connection) -> int | None:
    """The file's session schema: None for a file without sessions."""
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if _log.SCHEMA_TABLE in tables:
        (version,) = db.execute(_log.GET_VERSION).fetchone()
        return int(version) if version is not None else 0
    return 0 if _log.V0_TABLE in tables else None


class _SharedThreads:
    """One connection thread per (file, settings) in this process, while a session uses it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[_Key, tuple[ConnectionThread[sqlite3.Connection], int]] = {}

    def take(self, key: _Key) -> ConnectionThread[sqlite3.Connection]:
        with self._lock:
            thread, users = self._threads.get(key) or (_new_thread(key), 0)
            self._threads[key] = (thread, users + 1)
            return thread

    def give_back(self, key: _Key, thread: ConnectionThread[sqlite3.Connection]) -> None:
        with self._lock:
            taken, users = self._threads.get(key) or (None, 0)
            if taken is not thread:
                return
            if users > 1:
                self._threads[key] = (thread, users - 1)
            else:
                del self._threads[key]
                thread.stop()

    def after_fork(self) -> None:
        """In a forked child: the lock may have been held by a thread that is not there."""
        self._lock = threading.Lock()


def _new_thread(key: _Key) -> ConnectionThread[sqlite3.Connection]:
    return ConnectionThread(lambda: _connect(key), sqlite3.Connection.close, "tooldeck-sqlite")


_shared = _SharedThreads()
# A forked child has none of its parent's threads: each ConnectionThread starts its own.
os.register_at_fork(after_in_child=_shared.after_fork)
