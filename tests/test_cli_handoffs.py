"""Handoffs at the command line: given by the tools module, shown live, in ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks

SUPPORT_TOOLS = textwrap.dedent(
    '''
    from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, tool


    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: paid"


    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"


    billing = Agent(
        ScriptedModel(
            [
                AssistantOutput(
                    tool_calls=(ToolCall(id="r1", name="refund", arguments={"order": "42"}),)
                ),
                AssistantOutput(content="Order 42 is refunded."),
            ]
        ),
        [refund],
        name="billing",
    )
    __all__ = ["lookup"]
    handoffs = [billing]
    '''
)


def tooldeck(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, "TOOLDECK_HOME": str(cwd / "home")},
        timeout=120,
        check=False,
    )


def run(server: FakeOpenAI, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    model = ("--model", "openai-chat:gpt-test", "--base-url", server.url)
    return tooldeck(cwd, "run", "Refund order 42", "--tools", "support", *model, *args)


def transfer_first(server: FakeOpenAI, tmp_path: Path) -> None:
    (tmp_path / "support.py").write_text(SUPPORT_TOOLS, encoding="utf-8")
    body = completion_body(None, [chat_call("call_1", "transfer_to_billing", "{}")])
    server.reply(Reply(events=completion_chunks(body)))


def test_the_cli_hands_over_to_the_modules_agent_and_shows_it(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    transfer_first(server, tmp_path)
    done = run(server, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "⇢ agent handed to billing" in done.stdout
    assert "answer: Order 42 is refunded." in done.stdout
    (request,) = server.bodies
    shown = [tool["function"]["name"] for tool in request["tools"]]
    assert shown == ["lookup", "transfer_to_billing"]
    listed = tooldeck(tmp_path, "logs", "--json")
    (logged,) = json.loads(listed.stdout)
    replayed = tooldeck(tmp_path, "logs", "show", logged["run_id"])
    assert replayed.returncode == 0, replayed.stderr
    assert "⇢ agent handed to billing" in replayed.stdout
    shown = tooldeck(tmp_path, "logs", "show", logged["run_id"], "--json")
    (handed,) = json.loads(shown.stdout)["handoffs"]
    assert (handed["source"], handed["target"], handed["call_id"]) == ("agent", "billing", "call_1")


def test_json_names_the_agent_that_answered(server: FakeOpenAI, tmp_path: Path) -> None:
    transfer_first(server, tmp_path)
    done = run(server, tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["agent"], document["answer"]) == ("billing", "Order 42 is refunded.")
    assert [call["name"] for call in document["calls"]] == ["transfer_to_billing", "refund"]


def test_a_module_whose_handoffs_are_not_a_list_is_refused(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    broken = SUPPORT_TOOLS.replace("handoffs = [billing]", "handoffs = billing")
    (tmp_path / "support.py").write_text(broken, encoding="utf-8")
    done = run(server, tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "tooldeck: error: 'support': handoffs must be a list of agents or handoff(...), got Agent\n"
    )
    assert server.bodies == []


ECHOING_BILLING = textwrap.dedent(
    '''
    from tooldeck import Agent, AssistantOutput, ScriptedModel, tool


    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: paid"


    def echo(request):
        return AssistantOutput(content=f"billing read: {request.messages[-1].content}")


    billing = Agent(ScriptedModel([echo, echo]), name="billing")
    __all__ = ["lookup"]
    handoffs = [billing]
    '''
)


def test_a_continued_conversation_goes_on_with_the_agent_that_answered_last(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "support.py").write_text(ECHOING_BILLING, encoding="utf-8")
    body = completion_body(None, [chat_call("call_1", "transfer_to_billing", "{}")])
    server.reply(Reply(events=completion_chunks(body)))
    first = run(server, tmp_path, "--no-display")
    assert (first.returncode, first.stdout) == (0, "billing read: Transferred to 'billing'.\n")
    model = ("--model", "openai-chat:gpt-test", "--base-url", server.url)
    args = ("run", "And my invoice?", "-c", "--tools", "support", *model, "--json")
    second = tooldeck(tmp_path, *args)
    assert second.returncode == 0, second.stderr
    document = json.loads(second.stdout)
    assert (document["agent"], document["answer"]) == ("billing", "billing read: And my invoice?")
    assert len(server.bodies) == 1  # the command's own agent was not asked again
