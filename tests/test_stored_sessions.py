"""Session rows read back are untrusted input: a row another program wrote or broke is a
SessionError naming the session and the entry, never another exception, never a turn lost
without a word."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _stores import Store, execute
from tooldeck import Message
from tooldeck.errors import SessionError
from tooldeck.run.session import StoredRun


async def _two_turns(store: Store) -> None:
    """Two turns, as another process wrote them (this process keeps none of them)."""
    from tooldeck.sessions import stored_run_cache

    session = store.session("chat")
    await session.append(StoredRun("run-1", (Message.user("one"),)), after=0)
    await session.append(StoredRun("run-2", (Message.user("two"),)), after=1)
    await session.aclose()
    stored_run_cache.clear()


async def test_a_turn_with_a_null_body_is_an_error_naming_the_session_and_entry(
    store: Store,
) -> None:
    await _two_turns(store)
    execute(store, "UPDATE tooldeck_session_log SET body = NULL WHERE seq = 1")

    with pytest.raises(SessionError) as refused:
        await store.session("chat").load()

    assert str(refused.value).startswith("entry 1 of session 'chat' in ")
    assert str(refused.value).endswith(
        "cannot be read: it is a stored run with no body (NULL); its messages are lost. Delete the "
        "entry, or clear the session, to go on"
    )


async def test_a_paused_run_with_a_null_body_is_an_error_not_a_session_without_pause(
    store: Store,
) -> None:
    await _two_turns(store)
    execute(
        store, "INSERT INTO tooldeck_session_log VALUES ('chat', 3, 'run-3', 'paused', NULL, 2, 0)"
    )

    for read in (lambda s: s.load(), lambda s: s.pending()):
        with pytest.raises(SessionError, match=r"^entry 3 of session 'chat' in .* no checkpoint"):
            await read(store.session("chat"))


async def test_a_turn_stored_as_a_blob_of_json_loads_as_its_text(tmp_path: Path) -> None:
    store = Store("sqlite", str(tmp_path / "sessions.db"))
    await _two_turns(store)
    body = json.dumps([{"role": "user", "content": "two, as bytes"}]).encode()
    execute(store, "UPDATE tooldeck_session_log SET body = ? WHERE seq = 2", (body,))

    history = await store.session("chat").load()

    assert [message.content for message in history.messages] == ["one", "two, as bytes"]
    await store.aclose()


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        (
            "body",
            b"\xff\xfe",
            "its body is a BLOB that is not UTF-8 text ('utf-8' codec "
            "can't decode byte 0xff in position 0: invalid start byte)",
        ),
        ("body", 12, "Input should be a valid array"),
        ("body", "[1]", "0: Input should be an object"),
        ("schema_version", "two", "its schema version is str 'two', not an integer"),
        ("run_id", b"r", "its run id is bytes, not text"),
    ],
)
async def test_a_row_of_the_wrong_types_names_its_entry_and_column(
    tmp_path: Path, column: str, value: Any, problem: str
) -> None:
    store = Store("sqlite", str(tmp_path / "sessions.db"))
    await _two_turns(store)
    execute(store, f"UPDATE tooldeck_session_log SET {column} = ? WHERE seq = 2", (value,))

    with pytest.raises(SessionError) as refused:
        await store.session("chat").load()

    assert str(refused.value) == (
        f"entry 2 of session 'chat' in SQLite database {store.where!r} cannot be read: {problem}"
    )
    await store.aclose()


async def test_an_entry_numbered_below_one_is_refused_not_looped_on(tmp_path: Path) -> None:
    store = Store("sqlite", str(tmp_path / "sessions.db"))
    await _two_turns(store)
    execute(store, "UPDATE tooldeck_session_log SET seq = 0 WHERE seq = 1")

    with pytest.raises(SessionError) as refused:
        await store.session("chat").load()

    assert str(refused.value).endswith(
        "cannot be read: its entry number is int 0, not a positive integer"
    )
    await store.aclose()


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("UPDATE tooldeck_session_log SET schema_version = 'two'", "schema version is 'two'"),
        ("UPDATE tooldeck_session_log SET created_at = 'noon'", "created_at is str 'noon'"),
        (
            "UPDATE tooldeck_session_log SET body = '[[[[' WHERE seq = 1",
            "its body is not a stored run",
        ),
    ],
)
async def test_listing_a_database_another_program_broke_is_a_session_error(
    tmp_path: Path, sql: str, problem: str
) -> None:
    store = Store("sqlite", str(tmp_path / "sessions.db"))
    await _two_turns(store)
    execute(store, sql)

    with pytest.raises(SessionError, match=r"session 'chat' in SQLite database .*") as refused:
        await store.list_sessions()

    assert problem in str(refused.value)
