"""A real PostgreSQL server for the tests, started by the suite itself.

``pgserver`` (in the ``dev`` extra) ships PostgreSQL 16 in its wheel; the server is started
once per test session in a temporary directory, listening on a Unix socket only (no TCP
port), and deleted at the end. If it cannot start, every test that needs it fails with the
reason: PostgreSQL tests are never skipped.

Fixtures (registered in conftest.py):
- ``postgres_server``: the server's connection string (database ``postgres``), per session.
- ``postgres_dsn``: a connection string whose ``search_path`` is a fresh schema of its own,
  so each test starts from an empty database without paying for a new one.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_START_FAILURE: list[str] = []


def start_postgres(root: Path) -> Any:
    """Start PostgreSQL with its data in ``root``; return pgserver's server (``get_uri()``,
    ``cleanup()`` stops it and deletes the data)."""
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as error:
        raise RuntimeError(
            f"pgserver is not installed ({error}): `pip install -e '.[dev]'` installs it; "
            "it ships the PostgreSQL server the session tests run against"
        ) from error
    data = root / "pgdata"
    try:
        return pgserver.get_server(data, cleanup_mode="delete")
    except Exception as error:
        log = data / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log written)"
        raise RuntimeError(
            f"could not start PostgreSQL with pgserver in {data}: {type(error).__name__}: "
            f"{error}\nserver log:\n{tail}"
        ) from error


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    if _START_FAILURE:  # one attempt per test session; every test that needs it says why
        pytest.fail(_START_FAILURE[0], pytrace=False)
    # Not under pytest's temporary directory: the server runs as another user (pgserver's,
    # when root) that must reach its data directory until it has stopped.
    root = Path(tempfile.mkdtemp(prefix="tooldeck-postgres-"))
    try:
        server = start_postgres(root)
    except RuntimeError as error:
        _START_FAILURE.append(str(error))
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(str(error), pytrace=False)
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_dsn(postgres_server: str) -> Iterator[str]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
    yield make_conninfo(postgres_server, options=f"-c search_path={schema}")
    with psycopg.connect(postgres_server, autocommit=True) as db:
        db.execute(f"DROP SCHEMA {schema} CASCADE")
