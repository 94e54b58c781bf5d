"""The run log read back is untrusted input: a database that is not a run log is refused
untouched, and a row another program broke is a RunLogError naming table, run and column."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tooldeck import Agent, AssistantOutput, ScriptedModel
from tooldeck.errors import RunLogError


def test_a_database_that_is_not_a_run_log_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    from tooldeck.runlog import RunLog

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = path.read_bytes()

    with pytest.raises(RunLogError, match="is an SQLite database but not a tooldeck run log"):
        RunLog(path)

    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_run_log_error_is_one_of_tooldecks_errors() -> None:
    import tooldeck.errors
    import tooldeck.runlog

    assert tooldeck.runlog.RunLogError is tooldeck.errors.RunLogError
    assert issubclass(RunLogError, tooldeck.errors.ToolDeckError)


def _logged_run(path: Path) -> str:
    from tooldeck.runlog import RunLog

    with RunLog(path) as log:
        agent = Agent(ScriptedModel([AssistantOutput(content="Hi!")]), run_log=log)
        return agent.run_sync("Hello").run_id


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "UPDATE runs SET prompt = x'00ff'",
            "column 'prompt' holds bytes b'\\x00\\xff', expected text",
        ),
        ("UPDATE runs SET input_tokens = 'many'", "column 'input_tokens' holds str 'many'"),
        ("UPDATE model_turns SET settings = '{'", "column 'settings' holds str '{', expected a"),
        ("UPDATE model_turns SET settings = '[1]'", "column 'settings' holds list [1], expected a"),
        ("UPDATE runs SET prompt = CAST(x'ff' AS TEXT)", "Could not decode to UTF-8"),
    ],
)
def test_a_run_log_row_another_program_broke_is_a_run_log_error(
    tmp_path: Path, sql: str, message: str
) -> None:
    from tooldeck.runlog import RunLog

    path = tmp_path / "runs.db"
    run_id = _logged_run(path)
    with sqlite3.connect(path) as db:
        db.execute(sql)

    with RunLog(path) as log, pytest.raises(RunLogError) as refused:
        log.run(run_id)

    assert message in str(refused.value)
