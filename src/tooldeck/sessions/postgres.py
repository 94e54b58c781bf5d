"""Sessions in PostgreSQL (psycopg 3, async, with a connection pool), for many processes or
machines sharing conversations.

The schema and the rules are SQLiteSession's: one ``tooldeck_session_log`` table (in the
connection's ``search_path``), an append that succeeds only if the session's head is the
one the run started from, every write one transaction. Durability is the server's: with
PostgreSQL's default ``synchronous_commit=on`` a committed run is flushed to its WAL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakSet

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.errors import UniqueViolation
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from tooldeck.errors import SessionError
from tooldeck.messages import ToolResult
from tooldeck.results import Checkpoint
from tooldeck.run.session import History, RecordedCall, StoredRun
from tooldeck.sessions import _calls, _journal, _log, _states
from tooldeck.sessions._stored import StoredSession, check_session_id

if TYPE_CHECKING:
    from tooldeck.sessions._listing import SessionInfo

T = TypeVar("T")
Connection = psycopg.AsyncConnection[TupleRow]
Pool = AsyncConnectionPool[Connection]

_SCHEMA_LOCK = 0x7D5E5510
"""The advisory lock that serializes creating or migrating the schema across processes."""
_prepared: WeakSet[Pool] = WeakSet()
_with_calls: WeakSet[Pool] = WeakSet()
"""Pools whose database has the side-effect calls' table (made by the first such call)."""
"""Pools whose database has the current schema (checked once per pool)."""


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


_LOAD, _HEAD, _APPEND, _CLAIM = map(_pg, (_log.LOAD, _log.HEAD, _log.APPEND, _log.CLAIM))
_MAX_SEQ, _INSERT, _DELETE = map(_pg, (_log.MAX_SEQ, _log.INSERT, _log.DELETE))
_SAVE_SUMMARY, _READ_SUMMARY, _DELETE_SUMMARY = map(
    _pg, (_log.SAVE_SUMMARY, _log.READ_SUMMARY, _log.DELETE_SUMMARY)
)
_SAVE_STATES, _READ_STATES, _DELETE_STATES = map(_pg, (_states.SAVE, _states.READ, _states.DELETE))
_LATEST, _READ_STEPS, _WRITE_JOURNAL, _DROP_JOURNAL, _DROP_RUN = map(
    _pg, (_journal.LATEST, _journal.READ_STEPS, _journal.WRITE, _journal.DROP, _journal.DROP_RUN)
)


class PostgresSession(StoredSession):
    """One conversation kept in a PostgreSQL database (schema created, or migrated from an
    older tooldeck, on first use).

    Args:
        dsn: A connection string (``postgresql://user@host/db``), or an open
            ``psycopg_pool.AsyncConnectionPool`` to share between sessions.
        session_id: Which conversation of the database this is.
        max_connections: The size of the pool the session makes from a connection string.
        connect_timeout_s: How long to wait for a connection before SessionError.

    Runs on one session never interleave: a run that finds the session changed when it
    commits gets ``SessionConflict`` (it does not wait); see ``tooldeck.sessions``.
    """

    def __init__(
        self,
        dsn: str | Pool,
        session_id: str,
        *,
        max_connections: int = 4,
        connect_timeout_s: float = 10.0,
    ) -> None:
        check_session_id(session_id)
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections!r}")
        self._timeout = connect_timeout_s
        if isinstance(dsn, str):
            self._dsn: str | None = dsn
            self._pool: Pool | None = None
            self._owns_pool = True
            where = f"PostgreSQL database {_describe(dsn)}"
        else:
            self._dsn, self._pool, self._owns_pool = None, dsn, False
            where = f"PostgreSQL pool {dsn.name!r}"
        self._max_connections = max_connections
        database = dsn if isinstance(dsn, str) else getattr(dsn, "conninfo", id(dsn))
        super().__init__(session_id, where, ("postgres", database, session_id))

    def __repr__(self) -> str:
        return f"PostgresSession({self._where!r}, {self._session_id!r})"

    async def _load(self) -> History:
        session_id = self._session_id
        async with self._connection() as db:
            cursor = await db.execute(_LOAD, self._stored.load_parameters(session_id))
            rows = await cursor.fetchall()
            cursor = await db.execute(_READ_SUMMARY, (session_id,))
            summary = await cursor.fetchone()
            journal = await (await db.execute(_LATEST, (session_id, session_id))).fetchall()
            states = await (await db.execute(_READ_STATES, (session_id,))).fetchone()
        return self._history(rows, summary, journal, states)

    async def append(self, run: StoredRun, *, after: int) -> int:
        """Append ``run`` as entry ``after + 1``; SessionConflict if ``after`` is not the head."""
        parameters = _log.append_parameters(self._session_id, run, after)
        summary = _log.summary_parameters(self._session_id, run)
        states = _states.save_parameters(self._session_id, run, after + 1)
        written = await self._write(_insert_with_summary, (parameters, summary, states, None))
        if not written:
            raise _log.conflict(self._session_id, after)
        self._wrote(after + 1, run)
        return after + 1

    async def _keep_step(self, parameters: tuple[Any, ...]) -> None:
        async with self._connection() as db:
            await db.execute(_WRITE_JOURNAL, parameters)

    async def _close_then_open(
        self, closing: StoredRun, after: int, opened: tuple[Any, ...]
    ) -> None:
        parameters = _log.append_parameters(self._session_id, closing, after)
        states = _states.save_parameters(self._session_id, closing, after + 1)
        if not await self._write(_insert_with_summary, (parameters, None, states, opened)):
            raise _log.conflict(self._session_id, after)
        self._wrote(after + 1, closing)

    async def claim_run(self, run_id: str, opening: str, *, after: int) -> int:
        """``consume``, with the resumed run's opening kept (see ``RunJournal``)."""
        parameters = _log.claim_parameters(self._session_id, run_id, after)
        opened = _journal.write_parameters(self._session_id, run_id, 0, opening)
        if not await self._write(_claim_and_open, (parameters, opened)):
            raise _log.already_claimed(self._session_id, run_id)
        self._stored.wrote(after + 1, None)
        return after + 1

    async def read_steps(self, run_id: str) -> tuple[str, ...]:
        """The bodies of run ``run_id``'s steps, in order."""
        async with self._connection() as db:
            cursor = await db.execute(_READ_STEPS, (self._session_id, run_id))
            rows = await cursor.fetchall()
        return _journal.step_bodies(rows, self._place)

    async def drop_run(self, run_id: str) -> None:
        """Forget run ``run_id``'s journal."""
        async with self._connection() as db:
            await db.execute(_DROP_RUN, (self._session_id, run_id))

    async def pending(self) -> Checkpoint | None:
        """The checkpoint of the paused run that waits for decisions, if any."""
        async with self._connection() as db:
            cursor = await db.execute(_HEAD, (self._session_id,))
            row = await cursor.fetchone()
        return _log.read_pending(row, self._where, session_id=self._session_id)

    async def consume(self, run_id: str, *, after: int) -> int:
        """Claim paused run ``run_id`` (entry ``after``) for one resume; CheckpointError if
        it was claimed or cleared first."""
        parameters = _log.claim_parameters(self._session_id, run_id, after)
        if not await self._write(_insert_if_head, (_CLAIM, parameters), one_statement=True):
            raise _log.already_claimed(self._session_id, run_id)
        self._stored.wrote(after + 1, None)
        return after + 1

    async def start_call(self, key: str, tool_name: str) -> RecordedCall | None:
        """Record that the ``side_effects`` call ``key`` starts; None if it never had, else
        what was recorded of it (see ``tooldeck.run.session.CallRecords``)."""
        parameters = _calls.start_parameters(self._session_id, key, tool_name)
        async with self._connection() as db:
            if self._pool not in _with_calls:
                async with db.transaction():
                    await db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    await db.execute(_calls.CREATE)
                if self._pool is not None:
                    _with_calls.add(self._pool)
            cursor = await db.execute(_pg(_calls.START), parameters)
            if cursor.rowcount == 1:
                return None
            cursor = await db.execute(_pg(_calls.READ), parameters[:2])
            row = await cursor.fetchone()
        return _calls.recorded(row, key, self._where)

    async def finish_call(self, key: str, result: ToolResult) -> None:
        """Record the result of the ``side_effects`` call ``key``."""
        parameters = _calls.finish_parameters(self._session_id, key, result)
        async with self._connection() as db:
            await db.execute(_pg(_calls.FINISH), parameters)

    async def clear(self) -> None:
        """Delete every entry of this session (numbering goes on after the old head)."""
        while not await self._write(_clear, self._session_id):
            pass  # a writer appended meanwhile: clear again, after it
        self._cleared()

    async def aclose(self) -> None:
        """Close the pool the session made (a pool that was given stays open)."""
        if self._owns_pool and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    @staticmethod
    async def list_sessions(
        dsn: str | Pool, *, limit: int | None = 100, connect_timeout_s: float = 10.0
    ) -> list[SessionInfo]:
        """The conversations the database holds, the most recently changed first (at most
        ``limit``; None: all). A cleared session is not listed.

        Raises:
            SessionError: The database cannot be reached or read, or holds a newer
                tooldeck's sessions.
        """
        from tooldeck.sessions import _listing  # only a listing pays for it

        query = _listing.limited(limit)
        where = (
            f"PostgreSQL database {_describe(dsn)}"
            if isinstance(dsn, str)
            else f"PostgreSQL pool {dsn.name!r}"
        )
        try:
            async with _one_connection(dsn, connect_timeout_s) as db:
                await _prepare_schema(db, where)
                rows = await (await db.execute(query)).fetchall()
        except PoolTimeout as error:
            raise SessionError(f"could not connect to the {where}: {error}") from error
        except psycopg.Error as error:
            raise SessionError(f"{where}: {type(error).__name__}: {error}") from error
        return _listing.read_sessions(rows, where)

    async def _write(
        self,
        work: Callable[[Connection, T], Awaitable[bool]],
        argument: T,
        *,
        one_statement: bool = False,
    ) -> bool:
        """``work`` in one transaction, rolled back on any error; False if it hit a taken
        entry number. With autocommit, one statement is a transaction of its own."""
        async with self._connection() as db:
            try:
                if one_statement and db.autocommit:
                    return await work(db, argument)
                async with db.transaction():
                    return await work(db, argument)
            except UniqueViolation:
                return False

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Connection]:
        try:
            pool = await self._ready_pool()
            async with pool.connection(timeout=self._timeout) as db:
                yield db
        except PoolTimeout as error:
            raise SessionError(
                f"could not connect to the {self._where} within {self._timeout} s: "
                f"{await self._why_no_connection(error)}"
            ) from error
        except psycopg.Error as error:
            raise SessionError(f"{self._where}: {type(error).__name__}: {error}") from error

    async def _why_no_connection(self, timeout: PoolTimeout) -> str:
        """Why the pool had no connection to give: the server's refusal, which the pool only
        logs, read from one connection of our own (a pool that was given keeps its reasons)."""
        if self._dsn is None:
            return f"{timeout} (the pool's log says why)"
        try:
            probe = await asyncio.wait_for(psycopg.AsyncConnection.connect(self._dsn), 5.0)
        except psycopg.Error as refused:
            return str(refused).strip()
        except TimeoutError:
            return f"{timeout} (the server did not answer)"
        await probe.close()
        return (
            f"every connection of the session's pool (max_connections={self._max_connections}) "
            "stayed in use; give the session more, or hold them for shorter"
        )

    async def _ready_pool(self) -> Pool:
        pool = self._pool
        if pool is None:
            assert self._dsn is not None  # a session without a pool was given a dsn
            pool = AsyncConnectionPool(
                self._dsn,
                min_size=1,
                max_size=self._max_connections,
                kwargs={"autocommit": True},
                open=False,
                name=f"tooldeck-session-{self._session_id}",
            )
            await pool.open()
            self._pool = pool
        if pool not in _prepared:
            async with pool.connection(timeout=self._timeout) as db:
                await _prepare_schema(db, self._where)
            _prepared.add(pool)
        return pool


@asynccontextmanager
async def _one_connection(dsn: str | Pool, timeout_s: float) -> AsyncIterator[Connection]:
    """A connection of the pool given, or one of its own for a connection string."""
    if not isinstance(dsn, str):
        async with dsn.connection(timeout=timeout_s) as pooled:
            yield pooled
        return
    connection = await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, connect_timeout=max(1, round(timeout_s))
    )
    try:
        yield connection
    finally:
        await connection.close()


async def _insert_if_head(db: Connection, statement: tuple[str, tuple[Any, ...]]) -> bool:
    cursor = await db.execute(*statement)
    return cursor.rowcount == 1


async def _insert_with_summary(
    db: Connection,
    entry: tuple[
        tuple[Any, ...], tuple[Any, ...] | None, tuple[Any, ...] | None, tuple[Any, ...] | None
    ],
) -> bool:
    """APPEND, the session's journal dropped, the stored run's summary and capability states
    kept and (for a run closed as the next one opens) the next run's opening written, in the
    caller's transaction."""
    parameters, summary, states, opened = entry
    if not await _insert_if_head(db, (_APPEND, parameters)):
        return False
    await db.execute(_DROP_JOURNAL, (parameters[0],))
    if summary is not None:
        await db.execute(_SAVE_SUMMARY, summary)
    if states is not None:
        await db.execute(_SAVE_STATES, states)
    if opened is not None:
        await db.execute(_WRITE_JOURNAL, opened)
    return True


async def _claim_and_open(db: Connection, entry: tuple[tuple[Any, ...], tuple[Any, ...]]) -> bool:
    parameters, opened = entry
    if not await _insert_if_head(db, (_CLAIM, parameters)):
        return False
    await db.execute(_WRITE_JOURNAL, opened)
    return True


async def _clear(db: Connection, session_id: str) -> bool:
    cursor = await db.execute(_MAX_SEQ, (session_id,))
    row = await cursor.fetchone()
    head = row[0] if row is not None else 0
    await db.execute(_DROP_JOURNAL, (session_id,))
    if head:
        await db.execute(_DELETE, (session_id,))
        await db.execute(_DELETE_SUMMARY, (session_id,))
        await db.execute(_DELETE_STATES, (session_id,))
        await db.execute(_INSERT, _log.cleared_row(session_id, head))
    return True


async def _prepare_schema(db: Connection, where: str) -> None:
    """Create the schema, or migrate it, once, under a lock other processes wait for."""
    async with db.transaction():
        await db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        version = await _schema_version(db)
        _log.check_schema(where, version)
        await db.execute(_journal.CREATE)  # a database of an older tooldeck has none yet
        await db.execute(_states.CREATE)  # nor this
        if version == _log.SCHEMA_VERSION:
            return
        for statement in _log.CREATE:
            await db.execute(statement)
        if version == 0:
            old_rows = await (await db.execute(_log.READ_V0)).fetchall()
            async with db.cursor() as cursor:
                await cursor.executemany(_INSERT, _log.runs_from_v0(old_rows, where))
            await db.execute(f"DROP TABLE {_log.V0_TABLE}")
        await db.execute(_log.SET_VERSION[0])
        await db.execute(_pg(_log.SET_VERSION[1]), (_log.SCHEMA_VERSION,))


async def _schema_version(db: Connection) -> int | None:
    """The database's session schema: None for a database without sessions."""
    cursor = await db.execute(
        "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL",
        (_log.SCHEMA_TABLE, _log.V0_TABLE),
    )
    found = await cursor.fetchone()
    has_schema, has_v0 = found if found is not None else (False, False)
    if has_schema:
        row = await (await db.execute(_log.GET_VERSION)).fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0
    return 0 if has_v0 else None


def _describe(dsn: str) -> str:
    """Where a connection string points, without its password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(an unreadable connection string)"
    name, host, port = (
        parts.get("dbname") or "(default)",
        parts.get("host") or "localhost",
        parts.get("port"),
    )
    return f"{name} at {host}:{port}" if port else f"{name} at {host}"
