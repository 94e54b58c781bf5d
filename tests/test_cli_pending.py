"""A conversation that holds a paused run (a question left unanswered) at the command line.

``run --session S "new prompt"`` answers the paused run first, says so, then runs the new
prompt; a paused run the new tools cannot answer is refused with the way out;
``tooldeck sessions discard|clear|list`` deal with it. The paused run is left in the
session by the library (a ScriptedModel run that pauses), as a Ctrl-C at the question
leaves it; the model of the command is the loopback OpenAI-compatible server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _openai_server import FakeOpenAI, Reply, completion_body, completion_chunks
from _pty import Terminal
from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, tool
from tooldeck.sessions import SQLiteSession

TOOLS = textwrap.dedent(
    '''
    from tooldeck import tool


    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"
    '''
)
OTHER_TOOLS = textwrap.dedent(
    '''
    from tooldeck import tool


    @tool
    def double(number: int) -> int:
        """Twice the number."""
        return 2 * number
    '''
)
QUESTION = (
    'approve delete_file(path="a.txt")? [y]es / [n]o / [a]lways in this run / [s]ession / [e]dit'
)


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "other.py").write_text(OTHER_TOOLS, encoding="utf-8")
    return tmp_path


def leave_a_question(home: Path, session_id: str = "s1") -> None:
    """A run of ``session_id`` that paused at delete_file(path="a.txt"), as Ctrl-C leaves it."""
    call = ToolCall(id="call_1", name="delete_file", arguments={"path": "a.txt"})
    agent = Agent(ScriptedModel([AssistantOutput(tool_calls=(call,))]), [delete_file])
    home.mkdir(parents=True, exist_ok=True)
    session = SQLiteSession(home / "sessions.db", session_id)
    result = agent.run_sync("Delete a.txt.", session=session)
    assert result.stop_reason == "paused"


def environment(server: FakeOpenAI | None, cwd: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    env["TOOLDECK_HOME"] = str(cwd / "home")
    return {**env, "OPENAI_BASE_URL": server.url} if server is not None else env


def tooldeck(
    cwd: Path, *args: str, server: FakeOpenAI | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment(server, cwd),
        timeout=120,
        check=False,
    )


def run_in(server: FakeOpenAI, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    model = ("--model", "openai-chat:gpt-test")
    return tooldeck(cwd, "run", *args, *model, "--session", "s1", server=server)


def answers(server: FakeOpenAI, *texts: str) -> None:
    server.reply(*(Reply(events=completion_chunks(completion_body(t))) for t in texts))


def conversation(body: dict[str, object]) -> list[tuple[str, str]]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [(m["role"], m.get("content") or "") for m in messages]


def test_the_question_comes_first_and_the_display_says_which_prompt_runs(
    server: FakeOpenAI, workdir: Path
) -> None:
    leave_a_question(workdir / "home")
    answers(server, "Deleted a.txt.", "Nothing else to do.")
    argv = [sys.executable, "-m", "tooldeck.cli", "run", "Anything else?", "-t", "tools.py"]
    argv += ["--model", "openai-chat:gpt-test", "--session", "s1"]
    terminal = Terminal(argv, workdir, environment(server, workdir))
    before = terminal.expect(QUESTION)
    assert "user: Anything else?" not in before
    assert (
        "conversation 's1' has a run waiting for a decision on delete_file(path=\"a.txt\") "
        "(the run of the prompt 'Delete a.txt.'): it goes on first, then your prompt runs"
    ) in before
    terminal.send("y\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    after = shown[len(before) :]
    assert after.index("answer: Deleted a.txt.") < after.index("user: Anything else?")
    assert "answer: Nothing else to do." in after
    assert conversation(server.bodies[1])[-1] == ("user", "Anything else?")


def test_without_a_terminal_the_paused_call_is_rejected_and_stdout_holds_the_new_answer(
    server: FakeOpenAI, workdir: Path
) -> None:
    leave_a_question(workdir / "home")
    answers(server, "I did not delete it.", "Nothing else to do.")
    ran = run_in(server, workdir, "Anything else?", "-t", "tools.py", "--no-display")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "Nothing else to do.\n"
    assert "tooldeck: conversation 's1' has a run waiting for a decision" in ran.stderr
    assert 'rejected delete_file(path="a.txt")' in ran.stderr
    assert "tooldeck: answer to 'Delete a.txt.': I did not delete it." in ran.stderr


def test_json_holds_the_resumed_run_apart(server: FakeOpenAI, workdir: Path) -> None:
    leave_a_question(workdir / "home")
    answers(server, "Deleted a.txt.", "Nothing else to do.")
    ran = run_in(server, workdir, "Anything else?", "-t", "tools.py", "--json", "--yes")
    assert ran.returncode == 0, ran.stderr
    document = json.loads(ran.stdout)
    assert document["answer"] == "Nothing else to do."
    assert document["calls"] == []
    resumed = document["resumed"]
    assert (resumed["prompt"], resumed["answer"]) == ("Delete a.txt.", "Deleted a.txt.")
    assert [call["output"] for call in resumed["calls"]] == ["deleted a.txt"]


def test_a_paused_call_of_a_tool_the_module_lacks_is_refused_with_the_way_out(
    server: FakeOpenAI, workdir: Path
) -> None:
    leave_a_question(workdir / "home")
    refused = run_in(server, workdir, "Double 2.", "-t", "other.py", "--no-display")
    assert refused.returncode == 1
    assert refused.stderr == (
        "tooldeck: error: conversation 's1' waits for a decision on delete_file(path=\"a.txt\") "
        "(the run of the prompt 'Delete a.txt.'), but 'delete_file' is not among this run's "
        "tools: run with the tools that have it, or drop that run with: "
        "tooldeck sessions discard s1\n"
    )
    assert server.requests == []

    discarded = tooldeck(workdir, "sessions", "discard", "s1")
    assert discarded.returncode == 0, discarded.stderr
    assert discarded.stdout == (
        "discarded the paused run of conversation 's1' (prompt 'Delete a.txt.'): "
        'delete_file(path="a.txt") will not run; the conversation goes on from before that '
        "prompt\n"
    )
    answers(server, "4.")
    ran = run_in(server, workdir, "Double 2.", "-t", "other.py", "--no-display")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "4.\n"
    assert conversation(server.bodies[0]) == [("user", "Double 2.")]


def test_discard_and_clear_say_when_there_is_nothing_to_do(workdir: Path) -> None:
    nothing = tooldeck(workdir, "sessions", "discard", "s1")
    assert nothing.returncode == 1
    assert "tooldeck: error: no conversations yet" in nothing.stderr
    leave_a_question(workdir / "home")
    assert tooldeck(workdir, "sessions", "clear", "s2").stderr == (
        "tooldeck: error: conversation 's2' holds nothing to clear\n"
    )
    cleared = tooldeck(workdir, "sessions", "clear", "s1")
    assert cleared.stdout == "cleared conversation 's1'\n"
    again = tooldeck(workdir, "sessions", "discard", "s1")
    assert again.stderr == "tooldeck: error: conversation 's1' has no paused run to discard\n"


def test_sessions_list_shows_a_paused_conversation(workdir: Path) -> None:
    leave_a_question(workdir / "home")
    listed = tooldeck(workdir, "sessions", "list")
    assert listed.stdout == "s1  0 runs  'Delete a.txt.'  (a run waits for decisions)\n"
    as_json = json.loads(tooldeck(workdir, "sessions", "list", "--json").stdout)
    assert [(info["session_id"], info["paused"]) for info in as_json] == [("s1", True)]
