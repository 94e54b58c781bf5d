"""Stores on a path whose folders do not exist yet: the folders are made, as the file is."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import answer
from tooldeck import Agent, ScriptedModel
from tooldeck.errors import SessionError
from tooldeck.runlog import RunLog
from tooldeck.sessions import SQLiteSession


async def test_a_sqlite_session_makes_the_missing_folders_of_its_path(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "there" / "sessions.db"
    session = SQLiteSession(path, "user-1")
    agent = Agent(ScriptedModel([answer("hello"), answer("again")]))
    try:
        first = await agent.run("hi", session=session)
        second = await agent.run("and again", session=session)
        history = await session.load()
    finally:
        await session.aclose()
    assert (first.answer, second.answer) == ("hello", "again")
    assert path.is_file()
    assert [m.content for m in history.messages] == ["hi", "hello", "and again", "again"]


async def test_a_sqlite_session_names_a_folder_it_cannot_make(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    path = tmp_path / "a_file" / "sub" / "sessions.db"
    session = SQLiteSession(path, "user-1")
    try:
        with pytest.raises(SessionError) as raised:
            await session.load()
    finally:
        await session.aclose()
    folder = str(tmp_path / "a_file" / "sub")
    assert str(raised.value) == (
        f"SQLite database {str(path)!r}: its folder {folder!r} is missing and cannot be "
        "created (Not a directory); create it, or give another path"
    )


def test_a_run_log_makes_the_missing_folders_of_its_path(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "2026" / "runs.db"
    with RunLog(path) as log:
        result = Agent(ScriptedModel([answer("logged")]), run_log=log).run_sync("hi")
        runs = log.runs()
    assert path.is_file()
    assert [run.run_id for run in runs] == [result.run_id]
