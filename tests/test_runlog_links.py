"""The run log with the rest of tooldeck: agents as tools, typed answers, an older database,
and a database it cannot use (locked, or not openable), which never costs the run."""

from __future__ import annotations

import io
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from helpers import answer, call, calls
from tooldeck import Agent, Approve, AssistantOutput, Message, ScriptedModel, tool
from tooldeck.observe import Instrumentation
from tooldeck.run.history import TokenBudget
from tooldeck.runlog import SCHEMA_VERSION, RunLog, RunLogError, _schema
from tooldeck.sessions import SQLiteSession


@tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


@pytest.fixture
def log(tmp_path: Path) -> RunLog:
    with RunLog(tmp_path / "runs.db") as run_log:
        yield run_log


def counting_agents(log: RunLog | None, inner_log: RunLog | None) -> Agent[None, str]:
    inner_model = ScriptedModel([calls(call("word_count", "i1", text="a b c")), answer("3 words")])
    counter = Agent(inner_model, [word_count], instructions="Count words.", run_log=inner_log)
    entry = counter.as_tool(name="counter", description="Counts words in a text.")
    outer_model = ScriptedModel(
        [calls(call("counter", "o1", input="How many words in 'a b c'?")), answer("It has 3.")]
    )
    return Agent(outer_model, [entry], instructions="Delegate.", run_log=log)


def test_an_agent_tools_run_is_its_own_run_linked_to_the_call_that_made_it(log: RunLog) -> None:
    result = counting_agents(log, log).run_sync("Count 'a b c'.")

    inner, outer = log.runs()  # newest first: the inner run started after the outer one
    assert (outer.run_id, outer.prompt, outer.answer) == (
        result.run_id,
        "Count 'a b c'.",
        "It has 3.",
    )
    assert (outer.parent_run_id, outer.parent_call_id) == (None, None)
    assert (inner.prompt, inner.answer, inner.tool_calls) == (
        "How many words in 'a b c'?",
        "3 words",
        1,
    )
    assert (inner.parent_run_id, inner.parent_call_id) == (result.run_id, "o1")
    (outer_call,) = log.run(outer.run_id).calls
    assert (outer_call.call_id, outer_call.name, outer_call.result) == ("o1", "counter", "3 words")
    (inner_call,) = log.run(inner.run_id).calls
    assert (inner_call.name, inner_call.result) == ("word_count", "3")


def test_an_inner_agent_without_a_log_of_its_own_is_not_logged(log: RunLog) -> None:
    counting_agents(log, None).run_sync("Count 'a b c'.")
    (outer,) = log.runs()
    assert (outer.prompt, outer.tool_calls) == ("Count 'a b c'.", 1)


def test_logs_show_names_the_run_that_called_an_agent_tool(log: RunLog) -> None:
    from tooldeck.cli.display import Console
    from tooldeck.cli.logs import replay

    result = counting_agents(log, log).run_sync("Count 'a b c'.")
    inner, _ = log.runs()
    shown = io.StringIO()
    replay(log.run(inner.run_id), Console(shown, terminal=False))
    header = shown.getvalue().splitlines()[0]
    assert header.startswith(f"run {inner.run_id} · ")
    assert header.endswith(f" · scripted · called by run {result.run_id} (call o1)")


class City(BaseModel):
    name: str


class NativeModel(ScriptedModel):
    """Says it holds answers to the schema itself (as OpenAI's adapters do)."""

    native_output = True


def test_a_typed_answers_settings_name_its_schema(log: RunLog) -> None:
    agent = Agent(NativeModel([answer('{"name": "Zagreb"}')]), output_type=City, run_log=log)
    assert agent.run_sync("A city?").output == City(name="Zagreb")
    (run,) = log.runs()
    (turn,) = log.run(run.run_id).turns
    assert turn.settings["output_schema"] == "final_answer"
    assert run.answer == '{"name": "Zagreb"}'


def test_a_version_1_log_is_migrated_and_its_runs_still_read(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:  # what the first tooldeck with a run log wrote
        old.executescript(_schema._MIGRATIONS[0])
        old.execute(
            "INSERT INTO runs (run_id, model, prompt, instructions, started_at, stop_reason)"
            " VALUES ('r1', 'scripted', 'Hello', '', 1.0, 'answer')"
        )
        old.execute("PRAGMA user_version = 1")
    with RunLog(path) as log:
        Agent(ScriptedModel([answer("Hi!")]), run_log=log).run_sync("Again")
        new, old_run = log.runs()
    assert (old_run.run_id, old_run.prompt, old_run.parent_run_id) == ("r1", "Hello", None)
    assert (old_run.writer_pid, old_run.status) == (None, "answer")  # no process before v5
    assert (new.prompt, new.answer) == ("Again", "Hi!")
    assert (new.writer_pid, new.status, new.process_gone) == (os.getpid(), "answer", False)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6


def test_a_log_that_cannot_be_opened_is_refused_when_made_not_during_a_run(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("not a folder")
    path = tmp_path / "file" / "runs.db"
    with pytest.raises(RunLogError) as refused:
        RunLog(path)
    assert str(refused.value).startswith(f"cannot open the run log at {str(path)!r}: ")


def test_a_locked_log_never_holds_the_run_and_writes_once_free(tmp_path: Path) -> None:
    with RunLog(tmp_path / "runs.db", interval=0.05) as log:
        holder = sqlite3.connect(log.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process writing, for as long as it likes
        holder.execute("INSERT INTO runs (run_id, model, prompt, instructions, started_at)"
                       " VALUES ('other', 'm', 'p', '', 0)")  # fmt: skip
        agent = Agent(ScriptedModel([answer(f"answer {i}") for i in range(5)]), run_log=log)
        answers = [agent.run_sync(f"question {i}").answer for i in range(5)]
        # Every run ended while the database was still locked: none waited for it.
        assert answers == [f"answer {i}" for i in range(5)]
        assert holder.in_transaction
        holder.execute("ROLLBACK")
        holder.close()
        assert sorted(run.prompt for run in log.runs()) == [f"question {i}" for i in range(5)]


def test_a_log_locked_past_its_busy_timeout_reports_what_it_lost_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_schema, "BUSY_TIMEOUT_MS", 50)
    with RunLog(tmp_path / "runs.db") as log:
        holder = sqlite3.connect(log.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        agent = Agent(ScriptedModel([answer("kept"), answer("logged")]), run_log=log)
        assert agent.run_sync("while locked").answer == "kept"
        with pytest.raises(RunLogError) as lost:
            log.flush()
        count, _, why = str(lost.value).partition(" ")
        assert int(count) <= 3  # the run's start, its turn and its end: in one batch or more
        assert why == (
            f"run log records were not written to {str(log.path)!r}: "
            "OperationalError: database is locked"
        )
        holder.execute("ROLLBACK")
        holder.close()
        assert agent.run_sync("after").answer == "logged"
        assert [run.prompt for run in log.runs()] == ["after"]


def test_a_structured_turn_with_text_and_calls_is_logged_whole(log: RunLog) -> None:
    turn = AssistantOutput(content="Counting.", tool_calls=(call("word_count", text="x y"),))
    Agent(ScriptedModel([turn, answer("2")]), [word_count], run_log=log).run_sync("Count.")
    (run,) = log.runs()
    first, _ = log.run(run.run_id).turns
    assert (first.content, first.tool_calls) == ("Counting.", 1)


def test_a_traced_run_is_logged_too_and_a_history_strategys_count_reaches_the_model(
    log: RunLog,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = CountingModel([calls(call("word_count", text="x y")), answer("2")])
    agent = Agent(
        model,
        [word_count],
        run_log=log,
        instrument=Instrumentation(tracer_provider=provider),
        history_strategy=TokenBudget(10_000),
    )
    result = agent.run_sync("Count.")
    provider.shutdown()
    assert sorted(span.name for span in exporter.get_finished_spans()) == [
        "chat scripted",
        "chat scripted",
        "execute_tool word_count",
        "invoke_agent",
    ]
    (run,) = log.runs()
    assert (run.run_id, run.answer, run.tool_calls) == (result.run_id, "2", 1)
    assert model.counted  # through the tracing wrapper, to the model's own tokenizer


class CountingModel(ScriptedModel):
    """A model with a tokenizer of its own: it notes what it was asked to count."""

    def __init__(self, script: list[AssistantOutput]) -> None:
        super().__init__(script)
        self.counted: list[int] = []

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        self.counted.append(len(messages))
        return len(messages)


def test_a_run_in_a_session_is_logged_with_the_session_id(tmp_path: Path, log: RunLog) -> None:
    session = SQLiteSession(tmp_path / "sessions.db", "ada")
    model = ScriptedModel(
        [calls(call("delete_file", "d1", path="notes.txt")), answer("Deleted."), answer("Hi")]
    )
    agent = Agent(model, [delete_file], run_log=log)
    paused = agent.run_sync("Delete my notes.", session=session)
    assert paused.stop_reason == "paused"
    resumed = agent.resume_sync(decisions={"d1": Approve(by="ada")}, session=session)
    assert resumed.answer == "Deleted."
    Agent(model, run_log=log).run_sync("Hello")  # no session

    (run,) = log.runs(session="ada")
    assert (run.run_id, run.session_id, run.parts, run.answer) == (
        paused.run_id,
        "ada",
        2,
        "Deleted.",
    )
    (logged,) = log.run(run.run_id).calls
    assert (logged.decision, logged.decided_by) == ("approved", "ada")
    assert [r.session_id for r in log.runs()] == [None, "ada"]


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"
