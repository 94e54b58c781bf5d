"""The run log: what a run leaves in SQLite, across pauses, failures and stops."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import answer, call, calls
from tooldeck import (
    Agent,
    Approve,
    AssistantOutput,
    Limits,
    ModelError,
    ModelSettings,
    Reject,
    ScriptedModel,
    ToolResult,
    external_tool,
    tool,
)
from tooldeck.errors import LimitExceeded
from tooldeck.messages import Usage
from tooldeck.runlog import SCHEMA_VERSION, RunLog, RunLogError


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool
def divide(left: int, right: int) -> float:
    """Divide two numbers."""
    return left / right


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@pytest.fixture
def log(tmp_path: Path) -> RunLog:
    with RunLog(tmp_path / "runs.db") as run_log:
        yield run_log


def test_a_run_is_logged_with_its_model_turns_and_tool_calls(log: RunLog) -> None:
    model = ScriptedModel(
        [
            AssistantOutput(
                content="Let me compute.",
                tool_calls=(
                    call("add_numbers", "c1", left=2, right=3),
                    call("divide", "c2", left=1, right=0),
                ),
                usage=Usage(input_tokens=50, output_tokens=12),
            ),
            AssistantOutput(
                content="2 + 3 = 5; 1 / 0 fails.", usage=Usage(input_tokens=80, output_tokens=9)
            ),
        ]
    )
    settings = ModelSettings(temperature=0.5)
    agent = Agent(
        model, [add_numbers, divide], instructions="Be exact.", settings=settings, run_log=log
    )
    result = agent.run_sync("Add 2 and 3, divide 1 by 0.")

    (run,) = log.runs()
    assert (run.run_id, run.model, run.prompt, run.instructions) == (
        result.run_id,
        "scripted",
        "Add 2 and 3, divide 1 by 0.",
        "Be exact.",
    )
    assert (run.stop_reason, run.answer, run.error) == ("answer", "2 + 3 = 5; 1 / 0 fails.", None)
    assert (run.input_tokens, run.output_tokens, run.model_turns) == (130, 21, 2)
    assert (run.tool_calls, run.failed_calls, run.parts, run.session_id) == (2, 1, 1, None)
    assert run.ended_at is not None
    assert run.ended_at >= run.started_at
    assert run.duration_s is not None
    assert run.duration_s >= 0

    detailed = log.run(result.run_id)
    first, second = detailed.turns
    assert (first.round, first.content, first.tool_calls) == (1, "Let me compute.", 2)
    assert (first.input_tokens, first.output_tokens) == (50, 12)
    assert first.settings == {
        "tool_choice": "auto",
        "parallel_tool_calls": None,
        "temperature": 0.5,
        "max_tokens": None,
        "output_schema": None,
        "prices": None,
    }
    assert (second.round, second.content, second.tool_calls) == (2, "2 + 3 = 5; 1 / 0 fails.", 0)
    added, divided = sorted(detailed.calls, key=lambda logged: logged.call_id)
    assert (added.name, json.loads(added.arguments), added.result) == (
        "add_numbers",
        {"left": 2, "right": 3},
        "5",
    )
    assert (added.error_code, added.error, added.decision, added.round) == (None, None, None, 1)
    assert added.started_at is not None
    assert added.finished_at is not None
    assert divided.error_code == "tool_error"
    assert divided.result == (
        "error[tool_error]: the tool 'divide' failed while running; try other arguments or another way"
    )
    assert divided.error == "ZeroDivisionError: division by zero"  # the host's view, kept


def test_a_refused_call_is_logged_without_a_start(log: RunLog) -> None:
    model = ScriptedModel([calls(call("add_numbers", "c1", left="two", right=3)), answer("?")])
    Agent(model, [add_numbers], run_log=log).run_sync("two plus three")
    (logged,) = log.run(log.runs()[0].run_id).calls
    assert logged.error_code == "invalid_arguments"
    assert logged.started_at is None
    assert logged.finished_at is not None
    assert logged.error is not None
    assert logged.error.startswith("InvalidArguments: ")


def test_a_paused_run_and_its_resumes_share_one_run_id(log: RunLog) -> None:
    model = ScriptedModel(
        [
            calls(
                call("delete_file", "c1", path="a.txt"),
                call("delete_file", "c2", path="b.txt"),
                call("delete_file", "c3", path="c.txt"),
            ),
            answer("Deleted a.txt and c2.txt; b.txt was kept."),
        ]
    )
    agent = Agent(model, [delete_file], run_log=log)
    paused = agent.run_sync("Delete three files.")
    assert paused.stop_reason == "paused"

    (run,) = log.runs()
    assert (run.run_id, run.stop_reason, run.parts, run.answer) == (
        paused.run_id,
        "paused",
        1,
        "",
    )
    waiting = log.run(run.run_id).calls
    assert [(c.call_id, c.waited_for, c.decision, c.result) for c in waiting] == [
        ("c1", "approval", None, None),
        ("c2", "approval", None, None),
        ("c3", "approval", None, None),
    ]
    assert all(c.waited_at is not None and c.started_at is None for c in waiting)

    assert paused.checkpoint is not None
    decisions = {
        "c1": Approve(by="alice"),
        "c2": Reject("keep b.txt", by="bob"),
        "c3": Approve(arguments={"path": "c2.txt"}, by="carol"),
    }
    resumed = agent.resume_sync(paused.checkpoint, decisions)
    assert resumed.run_id == paused.run_id
    assert resumed.stop_reason == "answer"

    (run,) = log.runs()
    assert (run.stop_reason, run.parts, run.answer, run.model_turns) == (
        "answer",
        2,
        "Deleted a.txt and c2.txt; b.txt was kept.",
        2,
    )
    by_id = {logged.call_id: logged for logged in log.run(run.run_id).calls}
    approved, rejected, edited = by_id["c1"], by_id["c2"], by_id["c3"]
    assert (approved.decision, approved.decided_by, approved.result) == (
        "approved",
        "alice",
        "deleted a.txt",
    )
    assert (rejected.decision, rejected.decided_by, rejected.result) == (
        "rejected",
        "bob",
        "error[rejected]: keep b.txt",
    )
    assert rejected.started_at is None
    assert rejected.error_code == "rejected"
    assert (edited.decision, edited.decided_by) == ("approved", "carol")
    assert json.loads(edited.arguments) == {"path": "c.txt"}  # what the model asked
    assert edited.edited_arguments is not None
    assert json.loads(edited.edited_arguments) == {"path": "c2.txt"}  # what ran
    assert edited.result is not None
    assert edited.result.startswith("deleted c2.txt")
    assert all(logged.waited_for == "approval" for logged in by_id.values())


def test_an_external_call_is_logged_with_the_result_the_application_sent(log: RunLog) -> None:
    lookup = external_tool(
        "lookup",
        "Look a customer up in the CRM.",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    model = ScriptedModel([calls(call("lookup", "c1", name="Ada")), answer("Ada is a customer.")])
    agent = Agent(model, [lookup], run_log=log)
    paused = agent.run_sync("Is Ada a customer?")
    assert log.run(paused.run_id).calls[0].waited_for == "external"
    assert paused.checkpoint is not None
    agent.resume_sync(paused.checkpoint, {"c1": ToolResult.success("customer since 2019")})
    (logged,) = log.run(paused.run_id).calls
    assert (logged.decision, logged.decided_by, logged.result) == (
        "result",
        None,
        "customer since 2019",
    )


def test_a_run_stopped_at_a_limit_is_logged_with_why(log: RunLog) -> None:
    model = ScriptedModel([calls(call("add_numbers", f"c{i}", left=i, right=1)) for i in range(3)])
    agent = Agent(model, [add_numbers], limits=Limits(max_rounds=2), run_log=log)
    with pytest.raises(LimitExceeded) as stopped:
        agent.run_sync("count")
    (run,) = log.runs()
    assert (run.stop_reason, run.answer, run.tool_calls, run.model_turns) == (
        "max_rounds",
        None,
        2,
        2,
    )
    assert run.error == str(stopped.value)
    assert run.error == "the model asked for tools after 2 rounds (max_rounds=2)"


def test_a_model_failure_is_logged_with_its_message(log: RunLog) -> None:
    agent = Agent(ScriptedModel([]), run_log=log)
    with pytest.raises(ModelError):
        agent.run_sync("Hello?")
    (run,) = log.runs()
    assert run.stop_reason == "model_error"
    assert run.error is not None
    assert run.error.startswith("ScriptedModel has 0 scripted outputs")


def test_a_stream_left_early_is_logged_as_cancelled(log: RunLog) -> None:
    model = ScriptedModel([calls(call("add_numbers", "c1", left=1, right=1)), answer("2")])
    agent = Agent(model, [add_numbers], run_log=log)

    async def first_event_only() -> None:
        stream = agent.stream("1 + 1")
        async for _ in stream:
            break
        await stream.aclose()

    asyncio.run(first_event_only())
    (run,) = log.runs()
    assert (run.stop_reason, run.error) == (
        "cancelled",
        "the run's event stream was closed before its end",
    )


def test_a_cancelled_run_is_logged_as_cancelled(log: RunLog) -> None:
    async def slow(request: object) -> AssistantOutput:
        await asyncio.sleep(60)
        return answer("too late")

    agent = Agent(ScriptedModel([slow]), run_log=log)

    async def cancel_it() -> None:
        task = asyncio.ensure_future(agent.run("wait"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())
    (run,) = log.runs()
    assert (run.stop_reason, run.error) == ("cancelled", "the run was cancelled")


def test_concurrent_runs_are_each_logged_whole(log: RunLog) -> None:
    def agent_for(number: int) -> Agent[None]:
        script = [calls(call("add_numbers", "c1", left=number, right=1)), answer(str(number + 1))]
        return Agent(ScriptedModel(script), [add_numbers], run_log=log)

    async def many() -> list[str]:
        results = await asyncio.gather(*(agent_for(n).run(f"{n} + 1") for n in range(40)))
        return [result.answer for result in results]

    assert asyncio.run(many()) == [str(n + 1) for n in range(40)]
    runs = log.runs(limit=None)
    assert len(runs) == 40
    assert {run.prompt: run.answer for run in runs} == {f"{n} + 1": str(n + 1) for n in range(40)}
    assert all(run.tool_calls == 1 and run.model_turns == 2 for run in runs)


def test_runs_filter_by_tool_by_failure_and_by_limit(log: RunLog) -> None:
    Agent(ScriptedModel([answer("hi")]), run_log=log).run_sync("hello")
    adding = ScriptedModel([calls(call("add_numbers", "c1", left=1, right=2)), answer("3")])
    Agent(adding, [add_numbers], run_log=log).run_sync("add")
    failing = ScriptedModel([calls(call("divide", "c1", left=1, right=0)), answer("no")])
    Agent(failing, [divide], run_log=log).run_sync("divide")

    assert [run.prompt for run in log.runs()] == ["divide", "add", "hello"]
    assert [run.prompt for run in log.runs(2)] == ["divide", "add"]
    assert [run.prompt for run in log.runs(tool="add_numbers")] == ["add"]
    assert [run.prompt for run in log.runs(errors=True)] == ["divide"]
    assert log.runs(session="nobody") == []


def test_runs_filter_by_start_time(log: RunLog) -> None:
    for prompt in ("monday", "tuesday", "wednesday"):
        Agent(ScriptedModel([answer("ok")]), run_log=log).run_sync(prompt)
    log.flush()
    with sqlite3.connect(log.path) as db:  # known start times, a day apart
        for day, prompt in enumerate(("monday", "tuesday", "wednesday")):
            db.execute("UPDATE runs SET started_at = ? WHERE prompt = ?", (86400.0 * day, prompt))

    assert [run.prompt for run in log.runs(since=86400.0)] == ["wednesday", "tuesday"]
    assert [run.prompt for run in log.runs(until=86400.0)] == ["monday"]
    assert [run.prompt for run in log.runs(since=1.0, until=2 * 86400.0)] == ["tuesday"]


def test_an_agent_without_a_run_log_streams_the_loop_itself() -> None:
    stream = Agent(ScriptedModel([answer("hi")])).stream("hello")
    assert stream.ag_code.co_name == "drive"  # no wrapper
    asyncio.run(stream.aclose())


def test_records_are_written_at_interpreter_exit(tmp_path: Path) -> None:
    # Another connection holds the write lock until exit begins, so the writer cannot have
    # written the run before: only the log's exit hook (which waits for it) gets it written.
    script = textwrap.dedent(
        f"""
        import atexit, sqlite3
        from tooldeck import Agent, AssistantOutput, ScriptedModel
        from tooldeck.runlog import RunLog

        log = RunLog({str(tmp_path / "exit.db")!r})
        blocker = sqlite3.connect({str(tmp_path / "exit.db")!r}, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        Agent(ScriptedModel([AssistantOutput(content="bye")]), run_log=log).run_sync("exit")
        atexit.register(blocker.rollback)  # runs first: exit hooks run last-in, first-out
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    (run,) = RunLog(tmp_path / "exit.db").runs()
    assert (run.prompt, run.answer) == ("exit", "bye")


def _run_in_child(path: str) -> None:
    agent = Agent(ScriptedModel([answer("from the child")]), run_log=_PARENT_LOG[0])
    agent.run_sync(f"child {path}")
    _PARENT_LOG[0].close()


_PARENT_LOG: list[RunLog] = []


def test_a_forked_child_writes_its_runs_with_its_own_writer(tmp_path: Path) -> None:
    with RunLog(tmp_path / "fork.db") as parent:
        _PARENT_LOG[:] = [parent]
        Agent(ScriptedModel([answer("from the parent")]), run_log=parent).run_sync("parent")
        parent.flush()  # the parent's writer thread is running when the child forks
        child = multiprocessing.get_context("fork").Process(target=_run_in_child, args=("x",))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        assert sorted(run.answer or "" for run in parent.runs()) == [
            "from the child",
            "from the parent",
        ]


def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    RunLog(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RunLogError) as refused:
        RunLog(path)
    assert str(refused.value) == (
        f"the run log at {str(path)!r} has schema version {SCHEMA_VERSION + 1}, newer than "
        f"this tooldeck reads ({SCHEMA_VERSION}): upgrade tooldeck, or log to another path "
        "(RunLog(path) or TOOLDECK_HOME)"
    )
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1


def test_an_empty_file_becomes_a_run_log_of_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    RunLog(path).close()
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        assert sorted(name for (name,) in tables) == [
            "guardrails",
            "handoffs",
            "model_turns",
            "runs",
            "sent_messages",
            "tool_calls",
        ]


def test_another_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(RunLogError) as refused:
        RunLog(path)
    assert "is an SQLite database but not a tooldeck run log" in str(refused.value)


def test_a_failed_write_is_reported_by_flush(log: RunLog) -> None:
    with sqlite3.connect(log.path) as connection:
        connection.execute("DROP TABLE tool_calls")
    model = ScriptedModel([calls(call("add_numbers", "c1", left=1, right=2)), answer("3")])
    Agent(model, [add_numbers], run_log=log).run_sync("add")
    with pytest.raises(RunLogError) as failed:
        log.flush()
    assert str(failed.value).endswith(
        f"run log records were not written to {str(log.path)!r}: "
        "OperationalError: no such table: tool_calls"
    )
    log.flush()  # reported once; the log goes on


@pytest.mark.parametrize("used", [False, True], ids=["unused", "used"])
def test_a_closed_log_refuses_new_runs(tmp_path: Path, used: bool) -> None:
    log = RunLog(tmp_path / "closed.db")
    agent = Agent(ScriptedModel([answer("hi"), answer("again")]), run_log=log)
    if used:
        agent.run_sync("first")
    log.close()
    log.close()  # closing twice is fine
    log.flush()  # and so is flushing a closed log: closing wrote everything
    with pytest.raises(RunLogError) as refused:
        agent.run_sync("hello")
    assert str(refused.value) == f"the run log at {str(log.path)!r} is closed"
    assert [run.prompt for run in log.runs()] == (["first"] if used else [])


def _logged_answers(path: Path) -> list[str]:
    """What another reader of the database sees now (no flush: only what was written)."""
    with sqlite3.connect(path) as reader:
        return [row[0] for row in reader.execute("SELECT answer FROM runs ORDER BY started_at")]


def _poll(path: Path, expected: list[str], within_s: float) -> float:
    """Seconds until ``expected`` is what the database holds; fail after ``within_s``."""
    started = time.monotonic()
    while _logged_answers(path) != expected:
        assert time.monotonic() - started < within_s, _logged_answers(path)
        time.sleep(0.005)
    return time.monotonic() - started


def test_a_run_is_written_just_after_it_ends_without_a_flush(tmp_path: Path) -> None:
    with RunLog(tmp_path / "runs.db", interval=30) as log:
        Agent(ScriptedModel([answer("alone")]), run_log=log).run_sync("hi")
        assert _poll(log.path, ["alone"], within_s=5) < 1  # not the 30 s interval


def test_runs_that_keep_recording_do_not_hold_back_an_ended_run(tmp_path: Path) -> None:
    """The writer waits for a quiet moment to write, but never past its interval."""
    with RunLog(tmp_path / "runs.db", interval=0.3) as log:
        agent = Agent(ScriptedModel([answer("first")]), run_log=log)

        async def first_then_busy() -> float:
            await agent.run("first")
            busy = Agent(ScriptedModel([answer("again")] * 10_000), run_log=log)
            stop = asyncio.Event()

            async def keep_recording() -> None:
                while not stop.is_set():
                    await busy.run("busy")
                    await asyncio.sleep(0.001)

            recording = asyncio.ensure_future(keep_recording())
            try:
                started = time.monotonic()
                while "first" not in await asyncio.to_thread(_logged_answers, log.path):
                    assert time.monotonic() - started < 5
                return time.monotonic() - started
            finally:
                stop.set()
                await recording

        assert asyncio.run(first_then_busy()) < 2


def test_a_tape_that_cannot_be_read_is_reported_and_the_writer_goes_on(log: RunLog) -> None:
    log._writer.put(("not a kind",))  # what a mismatched record would leave on the tape
    with pytest.raises(RunLogError) as failed:
        log.flush()
    assert str(failed.value).startswith("0 run log records were not written to ")
    assert str(failed.value).endswith("KeyError: 'not a kind'")
    Agent(ScriptedModel([answer("still logged")]), run_log=log).run_sync("after")
    assert [run.answer for run in log.runs()] == ["still logged"]
