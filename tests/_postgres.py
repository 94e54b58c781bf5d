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

import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

_START_FAILURE: list[str] = []


def start_postgres(root: Path) -> str:
    """Start PostgreSQL with its data in ``root`` and return its connection string."""
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
        server = pgserver.get_server(data, cleanup_mode="delete")
        return server.get_uri()
    except Exception as error:
        log = data / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log written)"
        raise RuntimeError(
            f"could not start PostgreSQL with pgserver in {data}: {type(error).__name__}: "
            f"{error}\nserver log:\n{tail}"
        ) from error


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    if _START_FAILURE:  # one attempt per test session; every test that needs it says why
        pytest.fail(_START_FAILURE[0], pytrace=False)
    try:
        return start_postgres(tmp_path_factory.mktemp("postgres"))
    except RuntimeError as error:
        _START_FAILURE.append(str(error))
        pytest.fail(str(error), pytrace=False)


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
