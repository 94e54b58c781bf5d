"""The run log's tables, its schema version, and opening (and migrating) a database.

The version is SQLite's ``PRAGMA user_version``. Opening a database of an older version
migrates it, step by step in one transaction, before anything is written; a database of a
newer version (written by a newer tooldeck) is refused, never read or written.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

from tooldeck.errors import RunLogError as RunLogError

SCHEMA_VERSION = 6
"""The version of the tables below (``PRAGMA user_version`` of a run log database)."""

BUSY_TIMEOUT_MS = 5_000
"""How long a write waits for another process's write to finish before it fails."""

_V1 = """
CREATE TABLE runs (
    run_id        TEXT PRIMARY KEY,
    session_id    TEXT,
    model         TEXT NOT NULL,
    prompt        TEXT NOT NULL,
    instructions  TEXT NOT NULL,
    started_at    REAL NOT NULL,
    ended_at      REAL,
    duration_s    REAL,
    stop_reason   TEXT,
    answer        TEXT,
    error         TEXT,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    model_turns   INTEGER NOT NULL DEFAULT 0,
    parts         INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE INDEX runs_by_session ON runs (session_id, started_at);

CREATE TABLE model_turns (
    run_id        TEXT NOT NULL,
    round         INTEGER NOT NULL,
    started_at    REAL NOT NULL,
    duration_s    REAL NOT NULL,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    settings      TEXT NOT NULL,
    content       TEXT NOT NULL,
    tool_calls    INTEGER NOT NULL,
    PRIMARY KEY (run_id, round)
);

CREATE TABLE tool_calls (
    id               INTEGER PRIMARY KEY,
    run_id           TEXT NOT NULL,
    round            INTEGER NOT NULL,
    call_id          TEXT NOT NULL,
    name             TEXT NOT NULL,
    arguments        TEXT NOT NULL,
    edited_arguments TEXT,
    started_at       REAL,
    finished_at      REAL,
    duration_s       REAL,
    result           TEXT,
    error_code       TEXT,
    error            TEXT,
    waited_for       TEXT,
    waited_at        REAL,
    decision         TEXT,
    decided_by       TEXT,
    UNIQUE (run_id, round, call_id)
);
"""

_V2 = """
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN parent_call_id TEXT;
CREATE INDEX runs_by_parent ON runs (parent_run_id);
"""
"""Version 2: the run of an agent tool names the run and the call that made it."""

_V3 = """
ALTER TABLE runs ADD COLUMN cost_usd REAL;
ALTER TABLE model_turns ADD COLUMN cost_usd REAL;
ALTER TABLE tool_calls ADD COLUMN full_output TEXT;
ALTER TABLE model_turns ADD COLUMN model TEXT;
CREATE TABLE guardrails (
    id       INTEGER PRIMARY KEY,
    run_id   TEXT NOT NULL,
    round    INTEGER NOT NULL,
    call_id  TEXT,
    stage    TEXT NOT NULL,
    name     TEXT NOT NULL,
    verdict  TEXT NOT NULL,
    message  TEXT NOT NULL,
    at       REAL NOT NULL
);
CREATE INDEX guardrails_by_run ON guardrails (run_id);
ALTER TABLE runs ADD COLUMN untrusted_call_id TEXT;
ALTER TABLE runs ADD COLUMN untrusted_tool TEXT;
"""
"""Version 3: what a run and each of its model turns cost (NULL: unknown), a call's whole
output when the model read less of it (``max_output_chars``), the model that answered a
turn when a FallbackModel chose it; every guardrail's decision (``Agent(input_guardrails=
...)`` and the rest), and the call that first brought untrusted content into a run's
conversation."""

_V4 = """
CREATE TABLE handoffs (
    id       INTEGER PRIMARY KEY,
    run_id   TEXT NOT NULL,
    round    INTEGER NOT NULL,
    call_id  TEXT NOT NULL,
    source   TEXT NOT NULL,
    target   TEXT NOT NULL,
    at       REAL NOT NULL
);
CREATE INDEX handoffs_by_run ON handoffs (run_id);
"""
"""Version 4: each handoff of a run (``Agent(handoffs=...)``): who handed it to whom, when."""

_V5 = """
ALTER TABLE runs ADD COLUMN writer_host TEXT;
ALTER TABLE runs ADD COLUMN writer_pid INTEGER;
ALTER TABLE runs ADD COLUMN writer_started INTEGER;
"""
"""Version 5: the process that runs a run (its host, id and start time), so that a run with
no end whose process is gone reads as interrupted, not as running."""

_V6 = """
CREATE TABLE sent_messages (
    id       INTEGER PRIMARY KEY,
    run_id   TEXT NOT NULL,
    round    INTEGER NOT NULL,
    content  TEXT NOT NULL,
    sent     INTEGER NOT NULL,
    at       REAL NOT NULL
);
CREATE INDEX sent_messages_by_run ON sent_messages (run_id);
"""
"""Version 6: each message sent to a run while it worked (``RunHandle.send``), as it joined
the conversation (``sent`` 0: kept unanswered at its end, the run having ended first)."""

_MIGRATIONS: dict[int, str] = {0: _V1, 1: _V2, 2: _V3, 3: _V4, 4: _V5, 5: _V6}
"""The script that takes a database from version N to N + 1 (0: an empty database)."""


def tooldeck_home() -> Path:
    """``$TOOLDECK_HOME``, else ``tooldeck`` in the user's data directory: where the command
    line keeps the run log (``logs.db``) and its conversations (``sessions.db``).

    The data directory is ``$XDG_DATA_HOME`` (default ``~/.local/share``) on Linux,
    ``~/Library/Application Support`` on macOS and ``%LOCALAPPDATA%`` on Windows.
    """
    home = os.environ.get("TOOLDECK_HOME")
    if home:
        return Path(home).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "tooldeck"


def default_path() -> Path:
    """Where the CLI logs runs: ``logs.db`` in ``tooldeck_home()``."""
    return tooldeck_home() / "logs.db"


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the run log at ``path`` (created if missing), at the current version.

    The connection is in autocommit mode (callers open their transactions), in WAL mode so
    readers never wait for the writer, with ``synchronous=NORMAL`` (a crash of the process
    loses nothing committed; a power cut may lose the last transactions, never corrupt).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as error:
        raise RunLogError(f"cannot open the run log at {str(path)!r}: {error}") from error
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _refuse_another_database(connection, path)  # before the switch to WAL writes to it
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        _migrate(connection, path)
    except sqlite3.Error as error:
        connection.close()
        raise RunLogError(f"cannot use the run log at {str(path)!r}: {error}") from error
    except RunLogError:
        connection.close()
        raise
    return connection


def read_version(connection: sqlite3.Connection) -> int:
    version: int = connection.execute("PRAGMA user_version").fetchone()[0]
    return version


def _migrate(connection: sqlite3.Connection, path: Path) -> None:
    """Bring the database to SCHEMA_VERSION, or refuse one this tooldeck cannot read."""
    version = read_version(connection)
    if version == SCHEMA_VERSION:
        return
    check_version(version, path)
    connection.execute("BEGIN IMMEDIATE")  # one migration at a time, across processes
    try:
        version = read_version(connection)  # another process may have migrated meanwhile
        _refuse_another_database(connection, path)
        while version < SCHEMA_VERSION:
            for statement in _MIGRATIONS[version].split(";"):
                if statement.strip():
                    connection.execute(statement)
            version += 1
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _refuse_another_database(connection: sqlite3.Connection, path: Path) -> None:
    """Refuse, having only read it, a database that is not a run log or is a newer one."""
    version = read_version(connection)
    check_version(version, path)
    if version == 0 and _has_tables(connection):
        raise RunLogError(
            f"{str(path)!r} is an SQLite database but not a tooldeck run log (it has "
            "tables and no run log version); give RunLog another path"
        )


def check_version(version: int, path: Path) -> None:
    """Refuse a database written by a newer tooldeck."""
    if version > SCHEMA_VERSION:
        raise RunLogError(
            f"the run log at {str(path)!r} has schema version {version}, newer than this "
            f"tooldeck reads ({SCHEMA_VERSION}): upgrade tooldeck, or log to another path "
            "(RunLog(path) or TOOLDECK_HOME)"
        )


def _has_tables(connection: sqlite3.Connection) -> bool:
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1")
    return found.fetchone() is not None
