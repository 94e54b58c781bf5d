"""``tooldeck run`` where its features meet: each output form × approvals × a conversation
holding a paused run × function tools or an MCP toolset, one cell per combination.

Every cell runs the command with stdout redirected (a pipe) and no terminal on stdin, as a
script runs it, against the loopback OpenAI-compatible server, and asserts what the person
or the script reads: the answer, the JSON document (valid, whole), what the model read of
each call, what stderr says of a rejected call, and that no question is ever written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _mcp import RAW_SERVER, SLOW
from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, tool
from tooldeck.sessions import SQLiteSession

MODULE = textwrap.dedent(
    f"""
    import sys

    from tooldeck import ToolRegistry, tool
    from tooldeck.tools.mcp import MCPToolset


    def echo(text: str) -> str:
        '''Say the text back.'''
        return text


    def served(**options):
        return MCPToolset.stdio(
            sys.executable, [{RAW_SERVER[1]!r}], tools=["echo"], connect_timeout={SLOW},
            **options,
        )


    function_free = [tool(echo)]
    function_asks = [tool(echo, requires_approval=True)]
    mcp_free = ToolRegistry([served()])
    mcp_asks = ToolRegistry([served(requires_approval=True)])
    """
)
FORMS = ["json", "no-display", "display"]
APPROVALS = ["none", "approved", "rejected"]
SESSIONS = ["fresh", "paused"]
TOOLS = ["function", "mcp"]
QUESTION = "[y]es / [n]o"


@tool(requires_approval=True)
def echo(text: str) -> str:
    """Say the text back."""
    return text


def leave_a_paused_run(home: Path) -> None:
    """Conversation s1 with a run paused at echo(text="earlier"), as Ctrl-C at the question
    leaves it."""
    call = ToolCall(id="call_0", name="echo", arguments={"text": "earlier"})
    agent = Agent(ScriptedModel([AssistantOutput(tool_calls=(call,))]), [echo])
    home.mkdir(parents=True, exist_ok=True)
    result = agent.run_sync("Echo earlier.", session=SQLiteSession(home / "sessions.db", "s1"))
    assert result.stop_reason == "paused"


def command(form: str, approval: str, tools: str, server: FakeOpenAI) -> list[str]:
    attribute = f"{tools}_{'free' if approval == 'none' else 'asks'}"
    argv = [sys.executable, "-m", "tooldeck.cli", "run", "Echo now."]
    argv += ["-t", f"calc.py:{attribute}", "--model", "openai-chat:gpt-test"]
    argv += ["--base-url", server.url, "--session", "s1"]
    if form != "display":
        argv.append(f"--{form}")
    if approval == "approved":
        argv += ["--approve", "echo"]
    return argv


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("tools", TOOLS)
@pytest.mark.parametrize("session", SESSIONS)
@pytest.mark.parametrize("approval", APPROVALS)
@pytest.mark.parametrize("form", FORMS)
def test_cell(
    server: FakeOpenAI, tmp_path: Path, form: str, approval: str, session: str, tools: str
) -> None:
    (tmp_path / "calc.py").write_text(MODULE, encoding="utf-8")
    if session == "paused":
        leave_a_paused_run(tmp_path / "home")
        server.reply(Reply(events=completion_chunks(completion_body("Earlier done."))))
    call = completion_body(None, [chat_call("call_1", "echo", '{"text": "now"}')])
    server.reply(Reply(events=completion_chunks(call)))
    server.reply(Reply(events=completion_chunks(completion_body("The end."))))
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    ran = subprocess.run(
        command(form, approval, tools, server),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "TOOLDECK_HOME": str(tmp_path / "home")},
        timeout=240,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert QUESTION not in ran.stdout + ran.stderr  # no terminal: nothing waits, nothing asks

    bodies = server.bodies
    runs = tool_messages(bodies[-1])[-1:]  # what the model read of echo(text="now")
    rejected = "error[rejected]: nobody was at the terminal to approve this call"
    assert runs == (["now"] if approval != "rejected" else [rejected])
    rejection_line = (
        'tooldeck: rejected echo(text="now"): it needs approval and stdin is not a terminal '
        "(use --approve echo or --yes)"
    )
    assert (rejection_line in ran.stderr) == (approval == "rejected")
    if session == "paused":
        earlier = tool_messages(bodies[0])  # the paused run's call, decided first
        assert earlier == (["earlier"] if approval == "approved" else [rejected])
        assert bodies[1]["messages"][-1] == {"role": "user", "content": "Echo now."}

    if form == "json":
        document = json.loads(ran.stdout)
        assert (document["answer"], document["session"]) == ("The end.", "s1")
        assert [(c["name"], c["arguments"]) for c in document["calls"]] == [
            ("echo", {"text": "now"})
        ]
        assert document["calls"][0]["ok"] == (approval != "rejected")
        assert ("resumed" in document) == (session == "paused")
        if session == "paused":
            assert document["resumed"]["prompt"] == "Echo earlier."
            assert document["resumed"]["answer"] == "Earlier done."
    elif form == "no-display":
        assert ran.stdout == "The end.\n"
        assert "stop: answer" in ran.stderr
    else:
        shown = ran.stdout
        assert "user: Echo now." in shown
        assert '→ echo(text="now")' in shown
        assert shown.rstrip().splitlines()[-2] == "answer: The end."
        if session == "paused":
            assert shown.index("answer: Earlier done.") < shown.index("user: Echo now.")
