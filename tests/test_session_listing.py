"""Listing the conversations a session database holds, and deleting one, on SQLite and on a
real PostgreSQL (the ``store`` fixture runs each test on both): what ``tooldeck web``'s
conversations page shows comes from here."""

from __future__ import annotations

from pathlib import Path

import pytest

from _stores import Store, execute
from helpers import answer, call, calls
from tooldeck import Agent, Approve, ScriptedModel, tool
from tooldeck.errors import SessionError
from tooldeck.sessions import SQLiteSession


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def test_conversations_are_listed_newest_first_with_their_first_prompt(
    store: Store,
) -> None:
    agent = Agent(ScriptedModel([answer("Hi"), answer("4"), answer("Paris")]))
    await agent.run("Hello   there,\nI am Ada.", session=store.session("greeting"))
    await agent.run("What is 2+2?", session=store.session("maths"))
    await agent.run("Capital of France?", session=store.session("greeting"))

    listed = await store.list_sessions()

    assert [(s.session_id, s.title, s.runs, s.paused) for s in listed] == [
        ("greeting", "Hello there, I am Ada.", 2, False),
        ("maths", "What is 2+2?", 1, False),
    ]
    greeting = listed[0]
    assert greeting.started_at <= greeting.updated_at


async def test_a_paused_conversation_is_listed_as_paused_until_resumed(store: Store) -> None:
    model = ScriptedModel([calls(call("delete_file", "d1", path="a.txt")), answer("Deleted.")])
    agent = Agent(model, [delete_file])
    session = store.session("cleanup")

    await agent.run("Delete a.txt", session=session)
    (paused,) = await store.list_sessions()
    assert (paused.title, paused.runs, paused.paused) == ("Delete a.txt", 0, True)

    await agent.resume(session=session, decisions={"d1": Approve()})
    (done,) = await store.list_sessions()
    assert (done.title, done.runs, done.paused) == ("Delete a.txt", 1, False)


async def test_a_cleared_conversation_is_no_longer_listed(store: Store) -> None:
    agent = Agent(ScriptedModel([answer("one"), answer("two"), answer("three")]))
    await agent.run("first", session=store.session("kept"))
    await agent.run("second", session=store.session("deleted"))

    await store.session("deleted").clear()
    assert [s.session_id for s in await store.list_sessions()] == ["kept"]

    await agent.run("third", session=store.session("deleted"))  # the id can be used again
    listed = await store.list_sessions()
    assert [(s.session_id, s.title) for s in listed] == [("deleted", "third"), ("kept", "first")]


async def test_the_limit_keeps_the_most_recent(store: Store) -> None:
    agent = Agent(ScriptedModel([answer(str(n)) for n in range(3)]))
    for name in ("a", "b", "c"):
        await agent.run(f"prompt {name}", session=store.session(name))

    assert [s.session_id for s in await store.list_sessions(limit=2)] == ["c", "b"]
    assert len(await store.list_sessions(limit=None)) == 3
    with pytest.raises(ValueError, match="limit must be at least 1"):
        await store.list_sessions(limit=0)


async def test_an_empty_database_lists_nothing(store: Store) -> None:
    assert await store.list_sessions() == []


async def test_a_first_entry_that_cannot_be_read_is_an_error_naming_the_session(
    store: Store,
) -> None:
    agent = Agent(ScriptedModel([answer("Hi")]))
    await agent.run("Hello", session=store.session("broken"))
    execute(
        store, "UPDATE tooldeck_session_log SET body = ? WHERE session_id = ?", ("{}", "broken")
    )

    with pytest.raises(SessionError, match=r"first entry of session .broken. .* cannot be read"):
        await store.list_sessions()


async def test_a_missing_sqlite_file_holds_no_conversations_and_is_not_created(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere.db"
    assert await SQLiteSession.list_sessions(missing) == []
    assert not missing.exists()


async def test_a_newer_schema_is_refused_when_listing(store: Store) -> None:
    agent = Agent(ScriptedModel([answer("Hi")]))
    await agent.run("Hello", session=store.session("future"))
    execute(store, "UPDATE tooldeck_session_log SET schema_version = 99")

    with pytest.raises(SessionError, match="schema version 99, newer than this tooldeck reads"):
        await store.list_sessions()
