"""Conversations from the command line: ``run -c``, ``run --session ID`` and ``chat``.

The model is the loopback OpenAI-compatible server; each test keeps its conversations in a
TOOLDECK_HOME of its own, and reads what the model was sent to see what it remembered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from _pty import Terminal

TOOLS = textwrap.dedent(
    '''
    from tooldeck import tool


    @tool
    def double(number: int) -> int:
        """Twice the number."""
        return 2 * number


    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"
    '''
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


def environment(server: FakeOpenAI, home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return {**env, "OPENAI_BASE_URL": server.url, "TOOLDECK_HOME": str(home / "home")}


def run(
    server: FakeOpenAI, cwd: Path, *args: str, form: str = "--no-display"
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "tooldeck.cli", "run", *args]
    argv += ["--tools", "tools.py", "--model", "openai-chat:gpt-test", form]
    return subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment(server, cwd),
        timeout=120,
        check=False,
    )


def answers(server: FakeOpenAI, *texts: str) -> None:
    server.reply(*(Reply(events=completion_chunks(completion_body(t))) for t in texts))


def conversation(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in body["messages"]]


def test_continue_goes_on_with_the_latest_conversation(server: FakeOpenAI, workdir: Path) -> None:
    answers(server, "Hello Ada.", "Your name is Ada.")
    assert run(server, workdir, "My name is Ada.").stdout == "Hello Ada.\n"
    assert run(server, workdir, "What is my name?", "-c").stdout == "Your name is Ada.\n"
    assert conversation(server.bodies[1]) == [
        ("user", "My name is Ada."),
        ("assistant", "Hello Ada."),
        ("user", "What is my name?"),
    ]


def test_a_named_session_is_kept_and_others_start_fresh(server: FakeOpenAI, workdir: Path) -> None:
    answers(server, "Noted.", "Fresh.", "You said 42.")
    assert run(server, workdir, "Remember 42.", "--session", "numbers").returncode == 0
    assert run(server, workdir, "Hi.").returncode == 0  # a new conversation
    assert run(server, workdir, "What did I say?", "--session", "numbers").returncode == 0
    assert conversation(server.bodies[1]) == [("user", "Hi.")]
    assert conversation(server.bodies[2]) == [
        ("user", "Remember 42."),
        ("assistant", "Noted."),
        ("user", "What did I say?"),
    ]
    listed = subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", "sessions", "list"],
        capture_output=True,
        text=True,
        env=environment(server, workdir),
        timeout=120,
    )
    lines = listed.stdout.splitlines()
    assert lines[0] == "numbers  2 runs  'Remember 42.'"
    assert lines[1].endswith("  1 run  'Hi.'")  # not "1 runs"
    cost = subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", "logs", "--cost", "--session", "numbers"],
        capture_output=True,
        text=True,
        env=environment(server, workdir),
        timeout=120,
    )
    assert " for 2 runs (2 of unknown cost, not counted)" in cost.stdout, cost.stdout


def test_continue_with_nothing_to_continue_is_a_usage_error(
    server: FakeOpenAI, workdir: Path
) -> None:
    done = run(server, workdir, "Hi", "-c")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "tooldeck run: error: -c: there is no conversation to continue yet; run a prompt "
        "first (see tooldeck run --help)\n"
    )
    both = run(server, workdir, "Hi", "-c", "--session", "x")
    assert both.returncode == 2
    assert "argument --session: not allowed with argument -c/--continue" in both.stderr
    assert server.requests == []


def test_a_stopped_run_is_kept_as_it_stood_and_the_next_run_says_so(
    server: FakeOpenAI, workdir: Path
) -> None:
    answers(server, "Hello.")
    loop = completion_body(None, [chat_call("call_1", "double", '{"number": 1}')])
    server.reply(Reply(events=completion_chunks(loop)))
    answers(server, "Still here.")
    assert run(server, workdir, "Hi.").returncode == 0
    assert run(server, workdir, "Double forever.", "-c", "--max-rounds", "1").returncode == 1
    going_on = run(server, workdir, "Are you there?", "-c")
    assert going_on.returncode == 0
    assert "stopped before it finished: kept as it stood (1 model round)" in going_on.stderr
    assert conversation(server.bodies[2]) == [
        ("user", "Hi."),
        ("assistant", "Hello."),
        ("user", "Double forever."),
        ("assistant", ""),
        ("tool", "2"),  # the round that ran is kept: the model reads what happened
        ("user", "Are you there?"),
    ]


def test_json_names_the_conversation(server: FakeOpenAI, workdir: Path) -> None:
    answers(server, "Hi.")
    done = run(server, workdir, "Hi", "--session", "named", form="--json")
    assert json.loads(done.stdout)["session"] == "named"


def chat(server: FakeOpenAI, workdir: Path, *extra: str) -> Terminal:
    argv = [sys.executable, "-m", "tooldeck.cli", "chat", "--tools", "tools.py"]
    argv += ["--model", "openai-chat:gpt-test", *extra]
    return Terminal(argv, workdir, environment(server, workdir))


def test_chat_keeps_the_conversation_and_shows_each_turn_live(
    server: FakeOpenAI, workdir: Path
) -> None:
    first = completion_body("Doubling.", [chat_call("call_1", "double", '{"number": 21}')])
    server.reply(Reply(events=completion_chunks(first)))
    answers(server, "It is 42.", "You asked me to double 21.")
    terminal = chat(server, workdir, "--session", "talk")
    terminal.expect("tooldeck chat on openai-chat:gpt-test with double, delete_file; ")
    terminal.expect("> ")
    terminal.send("Double 21.\r")
    terminal.expect("  → double(number=21)")
    terminal.expect("answer: It is 42.")
    terminal.send("What did I ask?\r")
    shown = terminal.expect("answer: You asked me to double 21.")
    # the prompt comes back after the answer (it may arrive in the same read as the answer)
    terminal.expect("> ", after=shown.index("answer: You asked me to double 21."))
    terminal.send("\x04")  # Ctrl-D leaves
    status, shown = terminal.finish()
    assert status == 0, shown
    assert "conversation talk (tooldeck run --session talk goes on with it)" in shown
    assert "user: " not in shown  # the prompt was typed: it is not repeated
    assert conversation(server.bodies[2]) == [
        ("user", "Double 21."),
        ("assistant", "Doubling."),
        ("tool", "42"),
        ("assistant", "It is 42."),
        ("user", "What did I ask?"),
    ]
    answers(server, "Nothing else.")
    assert run(server, workdir, "Anything else?", "--session", "talk").returncode == 0
    assert conversation(server.bodies[3])[-3:] == [
        ("user", "What did I ask?"),
        ("assistant", "You asked me to double 21."),
        ("user", "Anything else?"),
    ]


def test_a_stopped_turn_is_a_line_and_the_chat_goes_on(server: FakeOpenAI, workdir: Path) -> None:
    loop = completion_body(None, [chat_call("call_1", "double", '{"number": 1}')])
    server.reply(Reply(events=completion_chunks(loop)))
    answers(server, "Hi again.")
    terminal = chat(server, workdir, "--max-rounds", "1")
    terminal.expect("> ")
    terminal.send("Double forever.\r")
    terminal.expect(
        "tooldeck: error: the run stopped without an answer: the model asked for tools after 1 "
        "round (max_rounds=1)"
    )
    terminal.send("Hello?\r")
    terminal.expect("answer: Hi again.")
    terminal.send("exit\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert "stop: max_rounds" in shown
    assert "↻ the session's last run" in shown  # the stopped turn is kept, and said so
    assert conversation(server.bodies[1]) == [
        ("user", "Double forever."),
        ("assistant", ""),
        ("tool", "2"),
        ("user", "Hello?"),
    ]


def test_a_question_left_unanswered_is_asked_again_when_the_conversation_goes_on(
    server: FakeOpenAI, workdir: Path
) -> None:
    call = completion_body(None, [chat_call("call_1", "delete_file", '{"path": "a.txt"}')])
    server.reply(Reply(events=completion_chunks(call)))
    answers(server, "Deleted a.txt.", "Nothing else to do.")
    question = 'approve delete_file(path="a.txt")? [y]es / [n]o / [a]lways in this run / [s]ession / [e]dit'
    argv = [sys.executable, "-m", "tooldeck.cli", "run", "--tools", "tools.py"]
    argv += ["--model", "openai-chat:gpt-test"]
    first = Terminal([*argv, "Delete a.txt."], workdir, environment(server, workdir))
    first.expect(question)
    first.process.send_signal(signal.SIGINT)
    status, shown = first.finish()
    assert status == 130, shown
    assert "stop: interrupted" in shown

    again = Terminal([*argv, "Anything else?", "-c"], workdir, environment(server, workdir))
    again.expect(question)
    again.send("y\r")
    status, shown = again.finish()
    assert status == 0, shown
    assert "← deleted a.txt" in shown
    assert "answer: Nothing else to do." in shown
    assert conversation(server.bodies[2]) == [
        ("user", "Delete a.txt."),
        ("assistant", ""),
        ("tool", "deleted a.txt"),
        ("assistant", "Deleted a.txt."),
        ("user", "Anything else?"),
    ]
