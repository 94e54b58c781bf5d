"""What tooldeck wrote before the house was rebuilt (f4fea0e) still loads and goes on.

``tests/data/before-0.2`` holds files that code made (``make.py`` there is how): a signed
checkpoint of a paused run, a SQLite session with a finished run and that paused run, and
the run log of both.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tooldeck import Agent, AssistantOutput, Checkpoint, ScriptedModel, tool
from tooldeck.results import Approve
from tooldeck.runlog import read
from tooldeck.sessions import SQLiteSession

DATA = Path(__file__).resolve().parent / "data" / "before-0.2"


@tool
def add(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def agent() -> Agent[None, str]:
    model = ScriptedModel([AssistantOutput(content="Deleted a.txt; 1 + 1 is 2.")])
    return Agent(model, [add, delete_file], checkpoint_key=b"old-key", instructions="Use tools.")


@pytest.fixture
def copied(tmp_path: Path) -> Path:
    for name in ("checkpoint.json", "sessions.db", "logs.db"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path


async def test_an_old_signed_checkpoint_resumes(copied: Path) -> None:
    checkpoint = Checkpoint.from_json((copied / "checkpoint.json").read_text())
    assert [(p.id, p.call.name, p.kind) for p in checkpoint.pending] == [
        ("d1", "delete_file", "approval")
    ]
    done = await agent().resume(checkpoint, {"d1": Approve(by="ana")})
    assert done.answer == "Deleted a.txt; 1 + 1 is 2."
    # The model's order of the paused turn's calls (delete_file, then add), as a run that
    # never paused has it, though add ran before the pause.
    assert [t.result.output for t in done.tool_trace][-2:] == ["deleted a.txt", "2"]


async def test_an_old_session_loads_and_its_paused_run_goes_on(copied: Path) -> None:
    session = SQLiteSession(copied / "sessions.db", "conversation-1")
    history = await session.load()
    assert [m.content for m in history.messages if m.role == "user"] == ["Add 2 and 3."]
    assert history.pending is not None
    assert history.pending.run_id == "run-2"
    done = await agent().resume(session=session, decisions={"d1": Approve()})
    assert done.stop_reason == "answer"
    again = await session.load()
    assert [m.content for m in again.messages if m.role == "user"] == [
        "Add 2 and 3.",
        "Delete a.txt.",
    ]
    assert again.pending is None
    await session.aclose()


def test_an_old_run_log_reads(copied: Path) -> None:
    runs = read.list_runs(copied / "logs.db")
    assert sorted(run.run_id for run in runs) == ["run-1", "run-2"]
    paused = read.load_run(copied / "logs.db", "run-2")
    assert paused is not None
    assert [call.name for call in paused.calls] == ["delete_file", "add"]
