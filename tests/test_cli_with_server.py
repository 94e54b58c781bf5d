"""``tooldeck run`` against a model server: approvals at the terminal, typed answers.

The model is the loopback OpenAI-compatible server (tests/_openai_server.py) reached through
``OPENAI_BASE_URL``, answering as a stream (the command shows the model's writing as it
comes); the command runs in a pseudo-terminal and is answered key by key.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from _openai_server import (
    FakeOpenAI,
    Reply,
    chat_call,
    completion_body,
    completion_chunks,
    running,
)
from _pty import Terminal

APPROVAL_TOOLS = textwrap.dedent(
    '''
    from pydantic import BaseModel

    from tooldeck import external_tool, tool


    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"


    @tool
    def count_files() -> int:
        """Count the files."""
        return 3


    class Report(BaseModel):
        files: int
        note: str
    '''
)
EXTERNAL_TOOLS = textwrap.dedent(
    """
    from tooldeck import external_tool

    locate_phone = external_tool(
        "locate_phone",
        "Find the phone.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    )
    """
)
PROMPT = (
    'approve delete_file(path="a.txt")? [y]es / [n]o / [a]lways in this run / [s]ession / [e]dit'
)


@pytest.fixture
def model_server() -> Iterator[FakeOpenAI]:
    with running() as server:
        yield server


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "approval_tools.py").write_text(APPROVAL_TOOLS, encoding="utf-8")
    (tmp_path / "external_tools.py").write_text(EXTERNAL_TOOLS, encoding="utf-8")
    return tmp_path


def script(server: FakeOpenAI, *paths: str) -> None:
    calls = [
        chat_call(f"call_{i}", "delete_file", json.dumps({"path": p})) for i, p in enumerate(paths)
    ]
    server.reply(
        Reply(events=completion_chunks(completion_body(None, calls))),
        Reply(events=completion_chunks(completion_body("Done."))),
    )


def environment(server: FakeOpenAI) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return {**env, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"}


def command(*extra: str) -> list[str]:
    return [
        sys.executable, "-m", "tooldeck.cli", "run", "Clean up.",
        "--tools", "approval_tools", "--model", "openai-chat:gpt-test", *extra,
    ]  # fmt: skip


def tool_results(server: FakeOpenAI) -> list[str]:
    return [m["content"] for m in server.bodies[1]["messages"] if m["role"] == "tool"]


def at_terminal(server: FakeOpenAI, workdir: Path, *extra: str) -> Terminal:
    return Terminal(command(*extra), workdir, environment(server))


def test_yes_runs_the_call(model_server: FakeOpenAI, workdir: Path) -> None:
    script(model_server, "a.txt")
    terminal = at_terminal(model_server, workdir)
    terminal.expect(PROMPT)
    terminal.send("y\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert tool_results(model_server) == ["deleted a.txt"]
    assert '⏸ delete_file(path="a.txt") waits for approval' in shown
    assert "← deleted a.txt" in shown
    assert "answer: Done." in shown


def test_no_rejects_the_call(model_server: FakeOpenAI, workdir: Path) -> None:
    script(model_server, "a.txt")
    terminal = at_terminal(model_server, workdir)
    terminal.expect(PROMPT)
    terminal.send("n\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert tool_results(model_server) == ["error[rejected]: the person at the terminal said no"]
    assert "✗ error[rejected]: the person at the terminal said no" in shown


def test_always_approves_the_rest_of_this_tools_calls(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    script(model_server, "a.txt", "b.txt")
    terminal = at_terminal(model_server, workdir)
    terminal.expect(PROMPT)
    terminal.send("a\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert shown.count("approve delete_file(") == 1
    assert tool_results(model_server) == ["deleted a.txt", "deleted b.txt"]


def test_edit_runs_the_call_with_the_arguments_typed(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    script(model_server, "a.txt")
    terminal = at_terminal(model_server, workdir)
    terminal.expect(PROMPT)
    terminal.send("e\r")
    terminal.expect('arguments (JSON, empty to go back): {"path": "a.txt"}')
    terminal.send('\x15{"path": "b.txt"}\r')  # Ctrl-U clears the prefilled line
    status, shown = terminal.finish()
    assert status == 0, shown
    assert tool_results(model_server) == [
        'deleted b.txt\n(run with arguments edited by a person: {"path": "b.txt"})'
    ]


def test_an_edit_that_is_not_json_asks_again(model_server: FakeOpenAI, workdir: Path) -> None:
    script(model_server, "a.txt")
    terminal = at_terminal(model_server, workdir)
    terminal.expect(PROMPT)
    terminal.send("e\r")
    terminal.expect("arguments (JSON, empty to go back): ")
    terminal.send("\x15{oops\r")
    shown = terminal.expect("not valid JSON")
    terminal.send("y\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert shown.count("approve delete_file(") == 2
    assert tool_results(model_server) == ["deleted a.txt"]


def test_an_unknown_answer_asks_again(model_server: FakeOpenAI, workdir: Path) -> None:
    script(model_server, "a.txt")
    terminal = at_terminal(model_server, workdir)
    terminal.expect(PROMPT)
    terminal.send("maybe\r")
    terminal.expect("please answer y, n (or n and why), a, s or e (got 'maybe')")
    terminal.send("y\r")
    status, _ = terminal.finish()
    assert status == 0
    assert tool_results(model_server) == ["deleted a.txt"]


def run_without_terminal(
    server: FakeOpenAI, workdir: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*extra),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=workdir,
        env=environment(server),
        timeout=120,
        check=False,
    )


def test_without_a_terminal_it_never_waits_it_rejects_and_says_so(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    script(model_server, "a.txt")
    done = run_without_terminal(model_server, workdir)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        'tooldeck: rejected delete_file(path="a.txt"): it needs approval and stdin is not a '
        "terminal (use --approve delete_file or --yes)\n"
    )
    assert tool_results(model_server) == [
        "error[rejected]: nobody was at the terminal to approve this call"
    ]


@pytest.mark.parametrize("option", [["--approve", "delete_file"], ["--yes"]])
def test_approve_and_yes_cover_calls_without_asking(
    model_server: FakeOpenAI, workdir: Path, option: list[str]
) -> None:
    script(model_server, "a.txt")
    done = run_without_terminal(model_server, workdir, *option)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "approve delete_file" not in done.stdout
    assert tool_results(model_server) == ["deleted a.txt"]


def test_approve_must_name_a_tool(model_server: FakeOpenAI, workdir: Path) -> None:
    done = run_without_terminal(model_server, workdir, "--approve", "delete_fil")
    assert done.returncode == 2
    assert done.stderr == (
        "tooldeck run: error: --approve 'delete_fil' is no tool of 'approval_tools'; did you "
        "mean 'delete_file'? (see tooldeck run --help)\n"
    )
    assert model_server.requests == []


def test_run_refuses_a_module_with_external_tools(model_server: FakeOpenAI, workdir: Path) -> None:
    argv = [sys.executable, "-m", "tooldeck.cli", "run", "Where?", "--tools", "external_tools"]
    done = subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=workdir,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "tooldeck: error: 'external_tools' has external tools ('locate_phone'): the application "
        "runs their calls, so tooldeck run cannot; leave them out (--toolset)\n"
    )


def test_tools_marks_external_and_approval_tools(workdir: Path) -> None:
    argv = [sys.executable, "-m", "tooldeck.cli", "tools"]
    approval = subprocess.run(
        [*argv, "approval_tools"], capture_output=True, text=True, cwd=workdir, check=False
    )
    assert "delete_file  [asks for approval]" in approval.stdout
    assert "count_files\n" in approval.stdout
    external = subprocess.run(
        [*argv, "external_tools", "--json"],
        capture_output=True,
        text=True,
        cwd=workdir,
        check=False,
    )
    (spec,) = json.loads(external.stdout)
    assert (spec["name"], spec["external"], spec["requires_approval"]) == (
        "locate_phone",
        True,
        False,
    )


def test_output_schema_validates_the_answer_and_prints_its_json(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    model_server.reply(
        Reply(events=completion_chunks(completion_body('{"files": "three", "note": "x"}'))),
        Reply(events=completion_chunks(completion_body('{"files": 3, "note": "all there"}'))),
    )
    done = run_without_terminal(model_server, workdir, "--output-schema", "approval_tools:Report")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith('{\n  "files": 3,\n  "note": "all there"\n}\n')
    assert model_server.bodies[0]["response_format"]["json_schema"]["schema"]["required"] == [
        "files",
        "note",
    ]
    assert "error[invalid_output]" in model_server.bodies[1]["messages"][-1]["content"]


def test_output_schema_must_name_a_type(model_server: FakeOpenAI, workdir: Path) -> None:
    done = run_without_terminal(model_server, workdir, "--output-schema", "approval_tools")
    assert done.returncode == 2
    assert done.stderr == (
        "tooldeck run: error: --output-schema 'approval_tools' names no object; write "
        "module:NAME (see tooldeck run --help)\n"
    )


def test_the_live_display_shows_text_and_calls_as_they_happen_and_ctrl_c_exits_130(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    first = completion_body("Counting.", [chat_call("call_1", "count_files", "{}")])
    model_server.reply(
        Reply(events=completion_chunks(first)),
        # The second turn sends its first half and then waits: the run is mid-answer.
        Reply(events=completion_chunks(completion_body("There are 3 files.")), hold_after=2),
    )
    terminal = at_terminal(model_server, workdir)
    terminal.expect("  → count_files()")
    terminal.expect("  ← 3  (")
    shown = terminal.expect("  … There ar")  # the half written so far, while the model writes
    assert "round 1: 1 tool call (" in shown
    assert "There are 3 files." not in shown
    terminal.process.send_signal(signal.SIGINT)
    status, shown = terminal.finish()
    assert status == 130, shown
    last = shown.rstrip().splitlines()[-2:]
    assert re.fullmatch(
        r"\d+\.\d\d s total, \d+\.\d\d s in the model; 1 model turn, 1 tool call, "
        r"20 input / 7 output tokens; stop: cancelled \(interrupted by Ctrl-C\)",
        last[0],
    ), last
    assert re.fullmatch(
        r"tooldeck: interrupted: the run was cancelled; conversation '\w+' keeps what it did",
        last[1],
    ), last
    assert model_server.client_left.wait(30)  # the model's stream was closed, not left open
