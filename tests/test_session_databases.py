"""What each database adds to the shared rules: SQLite's WAL, durability level, busy timeout
and a loop that never waits on a lock; PostgreSQL's connection failures; and a run without a
session paying nothing for sessions."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from _stores import Store, execute
from helpers import answer
from tooldeck import Agent, Message, ScriptedModel
from tooldeck.errors import SessionConflict, SessionError
from tooldeck.sessions import PostgresSession, SQLiteSession, StoredRun

HELLO = StoredRun("r1", (Message.user("hello"),))


async def pragma(session: SQLiteSession, name: str) -> object:
    return await session._run(lambda db: db.execute(f"PRAGMA {name}").fetchone()[0])


async def test_sqlite_sessions_use_wal_at_the_stated_durability(tmp_path: Path) -> None:
    async with SQLiteSession(tmp_path / "a.db", "chat") as normal:
        assert await pragma(normal, "journal_mode") == "wal"
        assert await pragma(normal, "synchronous") == 1  # NORMAL
        assert await pragma(normal, "busy_timeout") == 5000
    async with SQLiteSession(tmp_path / "b.db", "chat", synchronous="FULL") as full:
        assert await pragma(full, "synchronous") == 2


def sqlite_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "tooldeck-sqlite"}


async def test_sessions_of_one_file_share_one_connection_closed_with_the_last(
    tmp_path: Path,
) -> None:
    before = sqlite_threads()
    sessions = [SQLiteSession(tmp_path / "s.db", f"user-{i}") for i in range(20)]
    for session in sessions:
        await session.append(HELLO, after=0)
    (thread,) = sqlite_threads() - before
    for session in sessions:
        await session.aclose()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert len((await sessions[0].load()).messages) == 1  # usable again after aclose
    await sessions[0].aclose()


async def test_the_event_loop_runs_while_a_write_waits_for_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteSession(path, "chat", busy_timeout_s=60) as session:
        await session.load()
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        ticker = asyncio.create_task(tick())
        append = asyncio.create_task(session.append(HELLO, after=0))
        while ticks < 10:
            await asyncio.sleep(0.005)
        assert not append.done()  # the loop ran on while the write waited
        blocker.execute("ROLLBACK")
        assert await append == 1
        ticker.cancel()
        blocker.close()


async def test_a_write_locked_out_past_the_busy_timeout_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteSession(path, "chat", busy_timeout_s=0.1) as session:
        await session.load()
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(SessionError) as locked:
            await session.append(HELLO, after=0)
        blocker.execute("ROLLBACK")
        blocker.close()
        assert str(locked.value) == (
            f"SQLite database {str(path)!r} stayed locked by another writer for longer than "
            "busy_timeout_s=0.1 (database is locked); nothing was written. Try again, or give "
            "the session a longer busy_timeout_s."
        )
        assert await session.append(HELLO, after=0) == 1


async def test_a_failed_write_leaves_no_lock_behind(store: Store) -> None:
    session = store.session()
    await session.append(HELLO, after=0)
    with pytest.raises(SessionConflict):
        await session.append(HELLO, after=0)  # refused inside its transaction
    if store.kind == "sqlite":  # another connection that will not wait gets the lock at once
        other = sqlite3.connect(store.where, isolation_level=None, timeout=0)
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        other.close()
    assert await session.append(HELLO, after=1) == 2


def refuse_inserts(store: Store) -> None:
    """Make every insert into the log fail from now on, as a full disk or a lost server would."""
    if store.kind == "sqlite":
        execute(
            store,
            "CREATE TRIGGER refuse BEFORE INSERT ON tooldeck_session_log "
            "BEGIN SELECT RAISE(ABORT, 'the disk is full'); END",
        )
    else:
        execute(
            store,
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$",
        )
        execute(
            store,
            "CREATE TRIGGER refuse BEFORE INSERT ON tooldeck_session_log "
            "FOR EACH ROW EXECUTE FUNCTION refuse()",
        )


async def test_a_commit_that_fails_keeps_the_run_and_leaves_the_session_as_it_was(
    store: Store,
) -> None:
    session = store.session()
    await Agent(ScriptedModel([answer("kept")])).run("first", session=session)
    before = await session.load()
    refuse_inserts(store)

    with pytest.raises(SessionError) as failed:
        await Agent(ScriptedModel([answer("not stored")])).run("second", session=session)

    assert type(failed.value) is SessionError  # a write error, not a conflict
    assert "the disk is full" in str(failed.value)
    assert failed.value.result is not None  # nothing is lost: the run is in the error
    assert failed.value.result.answer == "not stored"
    after = await store.session().load()
    assert (after.messages, after.head, after.pending) == (before.messages, before.head, None)
    assert after.unfinished is not None  # the run's prompt, for the next run to close
    execute(store, "DROP TRIGGER refuse" + (" ON tooldeck_session_log" * (store.kind != "sqlite")))
    assert await session.append(HELLO, after=before.head) == before.head + 1  # no lock left


async def test_a_clear_that_fails_halfway_is_rolled_back_whole(store: Store) -> None:
    session = store.session()
    await Agent(ScriptedModel([answer("kept")])).run("first", session=session)
    before = await session.load()
    refuse_inserts(store)  # the clear deletes the entries, then fails to insert its marker

    with pytest.raises(SessionError, match="the disk is full"):
        await session.clear()

    assert await store.session().load() == before  # the delete was rolled back with it


async def test_a_file_that_is_not_a_database_says_so(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(SessionError) as failed:
        await SQLiteSession(path, "chat").load()
    assert str(failed.value) == (
        f"SQLite database {str(path)!r}: DatabaseError: file is not a database"
    )


async def test_a_sqlite_file_that_cannot_be_opened_says_where(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.mkdir()  # a folder where the file should be: SQLite cannot open it
    with pytest.raises(SessionError) as failed:
        await SQLiteSession(path, "chat").load()
    assert str(failed.value) == (
        f"SQLite database {str(path)!r}: OperationalError: unable to open database file"
    )


async def test_an_unreachable_postgres_says_where_and_how_long_it_waited(tmp_path: Path) -> None:
    dsn = f"postgresql://tester:secret@/sessions?host={tmp_path}"
    async with PostgresSession(dsn, "chat", connect_timeout_s=0.5) as session:
        with pytest.raises(SessionError) as failed:
            await session.load()
    message = str(failed.value)
    assert message.startswith(
        f"could not connect to the PostgreSQL database sessions at {tmp_path} within 0.5 s"
    )
    assert "secret" not in message
    assert "failed: No such file or directory" in message, message  # libpq's reason


async def test_a_postgres_database_that_refuses_the_connection_says_why(
    postgres_server: str,
) -> None:
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo(postgres_server, dbname="no_such_db")
    async with PostgresSession(dsn, "chat", connect_timeout_s=0.5) as session:
        with pytest.raises(SessionError) as failed:
            await session.load()
    message = str(failed.value)
    assert message.startswith("could not connect to the PostgreSQL database no_such_db at "), (
        message
    )
    assert 'database "no_such_db" does not exist' in message, message  # the server's reason


async def test_a_postgres_pool_with_every_connection_in_use_says_so(postgres_dsn: str) -> None:
    async with PostgresSession(postgres_dsn, "chat", max_connections=1, connect_timeout_s=0.3) as s:
        await s.load()
        async with s._connection():  # another task of this process holds the only connection
            with pytest.raises(SessionError) as failed:
                await s.load()
    assert str(failed.value).endswith(
        "within 0.3 s: every connection of the session's pool (max_connections=1) stayed in use; "
        "give the session more, or hold them for shorter"
    )


def test_bad_session_arguments_are_refused_with_the_value(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="session_id must be a non-empty string, got ''"):
        SQLiteSession(tmp_path / "s.db", "")
    with pytest.raises(ValueError, match="synchronous must be 'NORMAL' or 'FULL', got 'OFF'"):
        SQLiteSession(tmp_path / "s.db", "chat", synchronous="OFF")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_connections must be at least 1, got 0"):
        PostgresSession("postgresql:///x", "chat", max_connections=0)


def test_a_run_without_a_session_loads_nothing_of_sessions() -> None:
    code = (
        "import sys\n"
        "from tooldeck import Agent, AssistantOutput, ScriptedModel\n"
        "Agent(ScriptedModel([AssistantOutput(content='hi')])).run_sync('hello')\n"
        "print(sorted(m for m in sys.modules if 'sessions' in m or m.startswith(('sqlite3', 'psycopg'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_postgres_server_that_cannot_start_fails_the_tests_saying_why(tmp_path: Path) -> None:
    from _postgres import start_postgres

    with pytest.raises(RuntimeError) as failed:
        start_postgres(tmp_path / "no-such-folder")
    message = str(failed.value)
    assert message.startswith(f"could not start PostgreSQL with pgserver in {tmp_path}")
    assert "no-such-folder" in message
