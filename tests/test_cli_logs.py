"""``tooldeck logs`` and the run log of ``tooldeck run``/``demo``, run as subprocesses."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from _openai_server import (
    FakeOpenAI,
    Reply,
    chat_call,
    completion_body,
    completion_chunks,
)
from helpers import answer, call, calls
from test_cli import TOOLS_MODULE
from tooldeck import Agent, Approve, AssistantOutput, Budget, Limits, Reject, ScriptedModel, tool
from tooldeck.errors import LimitExceeded
from tooldeck.messages import Usage
from tooldeck.runlog import SCHEMA_VERSION, RunLog

JAN_1 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC


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


def tooldeck(
    home: Path, *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, "TOOLDECK_HOME": str(home), "TZ": "UTC", **env},
        timeout=120,
        check=False,
    )


def settle_times(path: Path) -> None:
    """Put every logged moment on a quarter-second grid from 2026-01-01, keeping their order,
    so durations and times print the same on every machine."""
    with sqlite3.connect(path) as db:
        moments = {
            value
            for (value,) in db.execute(
                "SELECT started_at FROM runs UNION SELECT ended_at FROM runs"
                " UNION SELECT started_at FROM model_turns"
                " UNION SELECT started_at + duration_s FROM model_turns"
                " UNION SELECT started_at FROM tool_calls UNION SELECT finished_at FROM tool_calls"
                " UNION SELECT waited_at FROM tool_calls"
            )
            if value is not None
        }
        grid = {moment: JAN_1 + 0.25 * index for index, moment in enumerate(sorted(moments))}
        db.create_function("grid", 1, lambda value: None if value is None else grid[value])
        db.execute(
            "UPDATE runs SET duration_s = grid(ended_at) - grid(started_at),"
            " started_at = grid(started_at), ended_at = grid(ended_at)"
        )
        db.execute(
            "UPDATE model_turns SET duration_s = grid(started_at + duration_s) - grid(started_at),"
            " started_at = grid(started_at)"
        )
        db.execute(
            "UPDATE tool_calls SET duration_s = coalesce(grid(finished_at) - grid(started_at), 0),"
            " started_at = grid(started_at), finished_at = grid(finished_at),"
            " waited_at = grid(waited_at)"
        )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TOOLDECK_HOME whose log holds four runs: calls with a failure, a paused run
    resumed with decisions, an answer in a session, and a run stopped at its limit."""
    folder = tmp_path_factory.mktemp("home")
    with RunLog(folder / "logs.db") as log:
        arithmetic = ScriptedModel(
            [
                AssistantOutput(
                    tool_calls=(
                        call("add_numbers", "c1", left=2, right=3),
                        call("divide", "c2", left=1, right=0),
                    ),
                    usage=Usage(input_tokens=50, output_tokens=10),
                ),
                AssistantOutput(
                    content="5; 1 / 0 fails.", usage=Usage(input_tokens=70, output_tokens=8)
                ),
            ]
        )
        Agent(arithmetic, [add_numbers, divide], run_log=log).run_sync(
            "Add 2 and 3; divide 1 by 0."
        )

        deleting = ScriptedModel(
            [
                calls(
                    call("delete_file", "c1", path="a.txt"), call("delete_file", "c2", path="b.txt")
                ),
                answer("Deleted a.txt."),
            ]
        )
        agent = Agent(deleting, [delete_file], run_log=log)
        paused = agent.run_sync("Delete a.txt and b.txt")
        assert paused.checkpoint is not None
        decisions = {"c1": Approve(by="alice"), "c2": Reject("keep b.txt", by="bob")}
        agent.resume_sync(paused.checkpoint, decisions)

        Agent(ScriptedModel([answer("Sunny.")]), run_log=log).run_sync("Weather in Oslo?")
        looping = ScriptedModel(
            [calls(call("add_numbers", f"c{i}", left=i, right=1)) for i in range(2)]
        )
        with pytest.raises(LimitExceeded):
            Agent(looping, [add_numbers], limits=Limits(max_rounds=1), run_log=log).run_sync(
                "Count " * 20
            )
    settle_times(folder / "logs.db")
    with sqlite3.connect(folder / "logs.db") as db:  # sessions come with Agent.run(session=...)
        db.execute("UPDATE runs SET session_id = 's1' WHERE prompt = 'Weather in Oslo?'")
    return folder


def run_ids(home: Path) -> dict[str, str]:
    with sqlite3.connect(home / "logs.db") as db:
        return {
            prompt.split()[0]: run_id
            for run_id, prompt in db.execute("SELECT run_id, prompt FROM runs")
        }


def test_logs_lists_the_latest_runs_newest_first(home: Path) -> None:
    ids = run_ids(home)
    done = tooldeck(home, "logs")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "RUN           STARTED              MODEL     CALLS         STOP        TIME    PROMPT\n"
        f"{ids['Count'][:12]}  2026-01-01 00:00:06  scripted  1             max_rounds  1.25 s  Count Count Count Count Count Count Count Count Count Cou...\n"
        f"{ids['Weather'][:12]}  2026-01-01 00:00:05  scripted  0             answer      0.75 s  Weather in Oslo?\n"
        f"{ids['Delete'][:12]}  2026-01-01 00:00:02  scripted  2             answer      2.25 s  Delete a.txt and b.txt\n"
        f"{ids['Add'][:12]}  2026-01-01 00:00:00  scripted  2 (1 failed)  answer      2.25 s  Add 2 and 3; divide 1 by 0.\n"
    )


def test_logs_filters_by_count_tool_failure_and_session(home: Path) -> None:
    def prompts(*args: str) -> list[str]:
        done = tooldeck(home, "logs", *args)
        assert done.returncode == 0, done.stderr
        return [line.split("  ")[-1] for line in done.stdout.splitlines()[1:]]

    assert prompts("-n", "2") == [prompts()[0], "Weather in Oslo?"]
    assert prompts("--tool", "divide") == ["Add 2 and 3; divide 1 by 0."]
    assert prompts("--tool", "delete_file", "--errors") == []  # a rejection is no failure
    assert prompts("--errors") == ["Add 2 and 3; divide 1 by 0."]
    assert prompts("--session", "s1") == ["Weather in Oslo?"]
    done = tooldeck(home, "logs", "--session", "s2")
    assert done.stdout == f"no matching runs in the log at {home / 'logs.db'}\n"


def test_logs_as_json(home: Path) -> None:
    done = tooldeck(home, "logs", "--json", "--tool", "divide")
    (run,) = json.loads(done.stdout)
    assert run["run_id"] == run_ids(home)["Add"]
    del run["run_id"]
    host, pid = run.pop("writer_host"), run.pop("writer_pid")  # the process that ran it
    assert (type(host), type(pid), run.pop("writer_started") is None) == (str, int, False)
    assert run == {
        "session_id": None,
        "model": "scripted",
        "prompt": "Add 2 and 3; divide 1 by 0.",
        "instructions": "",
        "started_at": JAN_1,
        "ended_at": JAN_1 + 2.25,
        "duration_s": 2.25,
        "stop_reason": "answer",
        "answer": "5; 1 / 0 fails.",
        "error": None,
        "input_tokens": 120,
        "output_tokens": 18,
        "model_turns": 2,
        "parts": 1,
        "parent_run_id": None,
        "parent_call_id": None,
        "tool_calls": 2,
        "failed_calls": 1,
        "cost_usd": None,
        "untrusted_call_id": None,
        "untrusted_tool": None,
        "process_gone": False,
        "status": "answer",
    }


def test_logs_show_prints_a_run_as_the_live_display_did(home: Path) -> None:
    run_id = run_ids(home)["Add"]
    done = tooldeck(home, "logs", "show", run_id[:8])
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        f"run {run_id} · 2026-01-01 00:00:00 · scripted\n"
        "\n"
        "user: Add 2 and 3; divide 1 by 0.\n"
        "round 1: 2 tool calls (0.25 s, 50 in / 10 out tokens)\n"
        "  → add_numbers(left=2, right=3)\n"
        "  → divide(left=1, right=0)\n"
        "  ← 5  (500.0 ms)\n"
        "  ✗ error[tool_error]: the tool 'divide' failed while running; try other arguments or another way  (500.0 ms)\n"
        "round 2: answer (0.25 s, 70 in / 8 out tokens)\n"
        "answer: 5; 1 / 0 fails.\n"
        "2.25 s total, 0.50 s in the model; 2 model turns, 2 tool calls, 120 input / 18 output tokens; stop: answer\n"
    )


def test_logs_show_a_paused_run_with_its_decisions(home: Path) -> None:
    run_id = run_ids(home)["Delete"]
    done = tooldeck(home, "logs", "show", run_id)
    assert done.stdout == (
        f"run {run_id} · 2026-01-01 00:00:02 · scripted\n"
        "\n"
        "user: Delete a.txt and b.txt\n"
        "round 1: 2 tool calls (0.25 s)\n"
        '  ⏸ delete_file(path="a.txt") waits for approval\n'
        '  ⏸ delete_file(path="b.txt") waits for approval\n'
        '  ✗ rejected by bob: delete_file(path="b.txt")\n'
        '  → delete_file(path="b.txt")\n'
        "  ✗ error[rejected]: keep b.txt  (0.0 ms)\n"
        '  ✓ approved by alice: delete_file(path="a.txt")\n'
        '  → delete_file(path="a.txt")\n'
        "  ← deleted a.txt  (250.0 ms)\n"
        "round 2: answer (0.25 s)\n"
        "answer: Deleted a.txt.\n"
        "2.25 s total, 0.50 s in the model; 2 model turns, 2 tool calls, 0 input / 0 output tokens; stop: answer\n"
    )


def test_logs_show_a_stopped_run_says_why(home: Path) -> None:
    run_id = run_ids(home)["Count"]
    done = tooldeck(home, "logs", "show", run_id)
    assert done.stdout.splitlines()[3:] == [
        "round 1: 1 tool call (0.25 s)",
        "  → add_numbers(left=0, right=1)",
        "  ← 1  (250.0 ms)",
        "stopped: the model asked for tools after 1 round (max_rounds=1)",
        "1.25 s total, 0.25 s in the model; 1 model turn, 1 tool call, 0 input / 0 output tokens; stop: max_rounds",
    ]


def test_logs_show_a_run_stopped_without_an_answer_prints_no_empty_answer(
    tmp_path: Path,
) -> None:
    budget = Budget(max_requests=1)
    with RunLog(tmp_path / "logs.db") as log:
        agent = Agent(ScriptedModel([answer("Sunny.")]), run_log=log, on_limit="final_answer")
        agent.run_sync("Weather in Oslo?", budget=budget)
        spent = agent.run_sync("And in Bergen?", budget=budget)  # no request left to send
    assert (spent.stop_reason, spent.answer) == ("budget", "")

    done = tooldeck(tmp_path, "logs", "show", run_ids(tmp_path)["And"])

    assert "answer:" not in done.stdout
    assert "the run stopped without an answer (budget)" in done.stdout
    assert done.stdout.splitlines()[-1].endswith("stop: budget")


def test_logs_show_as_json_has_the_turns_and_calls(home: Path) -> None:
    done = tooldeck(home, "logs", "show", run_ids(home)["Delete"], "--json")
    run = json.loads(done.stdout)
    assert (run["parts"], run["stop_reason"]) == (2, "answer")
    assert [turn["tool_calls"] for turn in run["turns"]] == [2, 0]
    assert [
        (c["call_id"], c["waited_for"], c["decision"], c["decided_by"], c["result"])
        for c in run["calls"]
    ] == [
        ("c1", "approval", "approved", "alice", "deleted a.txt"),
        ("c2", "approval", "rejected", "bob", "error[rejected]: keep b.txt"),
    ]


def test_logs_show_an_unknown_or_ambiguous_id_is_one_line(tmp_path: Path, home: Path) -> None:
    done = tooldeck(home, "logs", "show", "nope")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"tooldeck: error: no run 'nope' in the run log at '{home / 'logs.db'}'; "
        "`tooldeck logs` lists them\n"
    )
    copy = tmp_path / "logs.db"
    copy.write_bytes((home / "logs.db").read_bytes())
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE runs SET run_id = 'abc' || run_id")
    done = tooldeck(tmp_path, "logs", "show", "abc")
    assert done.returncode == 1
    assert done.stderr.startswith("tooldeck: error: 'abc' is the start of several run ids (abc")
    assert done.stderr.endswith("); give more\n")


def test_logs_path_prints_where_the_log_is(tmp_path: Path) -> None:
    done = tooldeck(tmp_path / "somewhere", "logs", "path")
    assert (done.returncode, done.stdout) == (0, f"{tmp_path / 'somewhere' / 'logs.db'}\n")
    assert not (tmp_path / "somewhere").exists()


def test_logs_without_a_log_says_so_and_creates_nothing(tmp_path: Path) -> None:
    done = tooldeck(tmp_path, "logs")
    assert (done.returncode, done.stdout) == (0, f"no runs in the log at {tmp_path / 'logs.db'}\n")
    assert tooldeck(tmp_path, "logs", "--json").stdout == "[]\n"
    assert not (tmp_path / "logs.db").exists()


def test_logs_bad_count_and_newer_schema_are_one_line(tmp_path: Path) -> None:
    done = tooldeck(tmp_path, "logs", "-n", "0")
    assert (done.returncode, done.stderr) == (1, "tooldeck: error: -n must be at least 1, got 0\n")
    RunLog(tmp_path / "logs.db").close()
    with sqlite3.connect(tmp_path / "logs.db") as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    done = tooldeck(tmp_path, "logs")
    assert done.returncode == 1
    assert done.stderr == (
        f"tooldeck: error: the run log at '{tmp_path / 'logs.db'}' has schema version "
        f"{SCHEMA_VERSION + 1}, newer than this tooldeck reads ({SCHEMA_VERSION}): upgrade "
        "tooldeck, or log to another path (RunLog(path) or TOOLDECK_HOME)\n"
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "my_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    return tmp_path


def doubling_replies(server: FakeOpenAI) -> None:
    server.reply(
        Reply(
            events=completion_chunks(
                completion_body(None, [chat_call("call_1", "double", '{"number": 21}')])
            )
        ),
        Reply(events=completion_chunks(completion_body("Twice 21 is 42."))),
    )


def test_run_is_logged_by_default(server: FakeOpenAI, workdir: Path) -> None:
    doubling_replies(server)
    done = tooldeck(
        workdir,
        "run",
        "Double 21.",
        "--tools",
        "my_tools",
        "--model",
        "openai-chat:gpt-test",
        cwd=workdir,
        OPENAI_BASE_URL=server.url,
        OPENAI_API_KEY="test",
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert "answer: Twice 21 is 42." in done.stdout
    (run,) = RunLog(workdir / "logs.db").runs()
    assert (run.model, run.prompt, run.answer, run.tool_calls) == (
        "openai-chat:gpt-test",
        "Double 21.",
        "Twice 21 is 42.",
        1,
    )
    assert (run.input_tokens, run.output_tokens) == (40, 14)
    shown = tooldeck(workdir, "logs", "show", run.run_id).stdout.splitlines()
    live = done.stdout.splitlines()
    # The same lines as the live display, from the prompt to the answer (timings aside),
    # but the model's writing as it came ("  … " lines), which the log does not keep.
    writing = [line for line in live if line.startswith("  … ")]
    assert writing == ['  … double {"number": 21}', "  … Twice 21 is 42."]
    assert [line.split(" (")[0] for line in shown[2:-1]] == [
        line.split(" (")[0] for line in live[1:-1] if line not in writing
    ]


def test_run_with_no_log_is_not_logged(server: FakeOpenAI, workdir: Path) -> None:
    doubling_replies(server)
    done = tooldeck(
        workdir,
        "run",
        "Double 21.",
        "--tools",
        "my_tools",
        "--model",
        "openai-chat:gpt-test",
        "--no-log",
        cwd=workdir,
        OPENAI_BASE_URL=server.url,
        OPENAI_API_KEY="test",
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert not (workdir / "logs.db").exists()


def test_demo_is_logged_and_a_log_it_cannot_use_costs_a_warning(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.reply(
        Reply(
            events=completion_chunks(
                completion_body(
                    None, [chat_call("call_1", "add_numbers", '{"left": 2, "right": 40}')]
                )
            )
        ),
        Reply(events=completion_chunks(completion_body("42"))),
    )
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test"}
    done = tooldeck(
        tmp_path, "demo", "What is 2 plus 40?", "--model", "openai-chat:gpt-test", **env
    )
    assert (done.returncode, done.stderr) == (0, "")
    (run,) = RunLog(tmp_path / "logs.db").runs()
    assert (run.prompt, run.answer, run.tool_calls) == ("What is 2 plus 40?", "42", 1)

    with sqlite3.connect(tmp_path / "logs.db") as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    server.reply(
        Reply(
            events=completion_chunks(
                completion_body(
                    None, [chat_call("call_1", "add_numbers", '{"left": 1, "right": 1}')]
                )
            )
        ),
        Reply(events=completion_chunks(completion_body("2"))),
    )
    done = tooldeck(tmp_path, "demo", "What is 1 plus 1?", "--model", "openai-chat:gpt-test", **env)
    assert done.returncode == 0
    assert "answer: 2" in done.stdout
    assert done.stderr == (
        f"tooldeck: warning: this run is not logged: the run log at '{tmp_path / 'logs.db'}' has "
        f"schema version {SCHEMA_VERSION + 1}, newer than this tooldeck reads ({SCHEMA_VERSION}): "
        "upgrade tooldeck, or log to another path (RunLog(path) or TOOLDECK_HOME)\n"
    )


APPROVAL_TOOLS = """
from tooldeck import tool


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    \"\"\"Delete a file.\"\"\"
    return f"deleted {path}"
"""


def test_approvals_at_the_command_line_are_logged_by_cli(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "approval_tools.py").write_text(APPROVAL_TOOLS, encoding="utf-8")
    server.reply(
        Reply(
            events=completion_chunks(
                completion_body(None, [chat_call("call_1", "delete_file", '{"path": "a.txt"}')])
            )
        ),
        Reply(events=completion_chunks(completion_body("Deleted."))),
    )
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test"}
    done = tooldeck(
        tmp_path,
        "run",
        "Clean up.",
        "--tools",
        "approval_tools",
        "--model",
        "openai-chat:gpt-test",
        "--yes",
        cwd=tmp_path,
        **env,
    )
    assert (done.returncode, done.stderr) == (0, "")
    (run,) = RunLog(tmp_path / "logs.db").runs()
    (logged,) = RunLog(tmp_path / "logs.db").run(run.run_id).calls
    assert (logged.waited_for, logged.decision, logged.decided_by, logged.result) == (
        "approval",
        "approved",
        "cli",
        "deleted a.txt",
    )
    assert (run.parts, run.stop_reason) == (2, "answer")
    shown = tooldeck(tmp_path, "logs", "show", run.run_id).stdout.splitlines()
    live = done.stdout.splitlines()
    # The live lines, and the decision the terminal made (given here by --yes).
    without_decision = [line for line in shown if not line.startswith("  ✓ approved by cli: ")]
    assert len(without_decision) == len(shown) - 1
    assert [line.split(" (")[0] for line in without_decision[2:-1]] == [
        line.split(" (")[0] for line in live[1:-1] if not line.startswith("  … ")
    ]
