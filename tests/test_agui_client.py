"""The official AG-UI client (``@ag-ui/client`` from npm, run by Node) driving a real
``tooldeck.serve.agui`` server on 127.0.0.1, whose model is an OpenAI-compatible server on
loopback giving fresh call ids: what the client holds after each run is the conversation in
order, under the ids the client gave its messages."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from _asgi_server import serving
from _npm import AGUI_DIR, installed
from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from tooldeck import Agent, tool
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.serve.agui import app
from tooldeck.testing import ProviderSimulator, call, reply


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def streamed(content: str | None, *calls: dict[str, Any]) -> Reply:
    return Reply(events=completion_chunks(completion_body(content, list(calls) or None)))


def drive(url: str, thread: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the steps with the official client (tests/npm_agui/drive.cjs); what it held after
    each run."""
    node = shutil.which("node")
    assert node is not None, "node is not on PATH: install Node.js 20+ with npm"
    modules = installed(AGUI_DIR) / "node_modules"
    done = subprocess.run(
        [node, str(AGUI_DIR / "drive.cjs"), url, json.dumps({"threadId": thread, "steps": steps})],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(modules)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    runs: list[dict[str, Any]] = json.loads(done.stdout)
    return runs


def held(run: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(id, role, content or the calls made or answered) of each message the client holds."""
    return [
        (m["id"], m["role"], m["toolCalls"] or m["toolCallId"] or m["content"])
        for m in run["messages"]
    ]


def test_the_official_client_keeps_its_ids_and_the_conversations_order(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.reply(
        streamed("Let me add.", chat_call("call_7f3a", "add_numbers", '{"left":2,"right":3}')),
        streamed("2 + 3 = 5."),
        streamed(None, chat_call("call_91bc", "delete_file", '{"path":"notes.txt"}')),
        streamed("Deleted notes.txt."),
        streamed("You are welcome."),
    )
    model = OpenAIChatModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=True, max_retries=0
    )
    agent = Agent(model, [add_numbers, delete_file])
    steps = [
        {"id": "user-1", "prompt": "What is 2 + 3?"},
        {"id": "user-2", "prompt": "Now delete notes.txt."},
        {"approved": True},
        {"id": "user-3", "prompt": "Thanks!"},
    ]

    with serving(app(agent, data_dir=tmp_path)) as root:
        runs = drive(f"{root}/", "shop-1", steps)

    assert [(r["result"], r["errors"], r["interrupts"]) for r in runs] == [
        ("2 + 3 = 5.", [], []),
        (None, [], ["call_91bc"]),
        ("Deleted notes.txt.", [], []),
        ("You are welcome.", [], []),
    ]
    assert held(runs[-1]) == [
        ("user-1", "user", "What is 2 + 3?"),  # the question first, under the client's id
        ("msg-1", "assistant", ["call_7f3a"]),
        ("msg-2", "tool", "call_7f3a"),
        ("msg-3", "assistant", "2 + 3 = 5."),
        ("user-2", "user", "Now delete notes.txt."),
        ("msg-5", "assistant", ["call_91bc"]),
        ("msg-6", "tool", "call_91bc"),
        ("msg-7", "assistant", "Deleted notes.txt."),
        ("user-3", "user", "Thanks!"),
        ("msg-9", "assistant", "You are welcome."),
    ]
    assert runs[-1]["messages"][1]["content"] == "Let me add."
    for before, after in itertools.pairwise(runs):
        assert held(after)[: len(held(before))] == held(before)  # nothing shown moves


posted = threading.Event()


@tool
def survey(area: str) -> str:
    """Survey an area (until the client has posted its message, at most 30 s)."""
    posted.wait(30)
    return f"{area}: calm"


def noting_posts(inner: Any) -> Any:
    """The app, noting (``posted``) each ``POST /messages`` it has answered."""

    async def app_noting(scope: Any, receive: Any, send: Any) -> None:
        await inner(scope, receive, send)
        if scope["type"] == "http" and scope["path"].endswith("/messages"):
            posted.set()

    return app_noting


def test_the_official_client_shows_a_message_sent_while_the_run_works_in_its_place(
    tmp_path: Path,
) -> None:
    posted.clear()
    with ProviderSimulator([call("survey", {"area": "bay"}), reply("Calm, briefly.")]) as sim:
        agent = Agent(sim.model(), [survey])
        send = {"id": "u-late", "content": "Be brief"}
        steps = [{"id": "user-1", "prompt": "Survey the bay", "send": send}]
        with serving(noting_posts(app(agent, data_dir=tmp_path))) as root:
            (run,) = drive(f"{root}/", "bay-1", steps)
        last = sim.requests[1]["messages"]
    assert (run["result"], run["errors"], run["sent"]) == ("Calm, briefly.", [], [202])
    call_id = sim.call_ids[0]
    assert held(run) == [
        ("user-1", "user", "Survey the bay"),
        ("msg-1", "assistant", [call_id]),
        ("msg-2", "tool", call_id),
        ("u-late", "user", "Be brief"),  # joined after the result, under the client's id
        ("msg-4", "assistant", "Calm, briefly."),
    ]
    assert [(m["role"], m["content"]) for m in last][-2:] == [
        ("tool", "bay: calm"),
        ("user", "Be brief"),
    ]


def test_the_official_client_takes_an_agent_tools_run_as_a_subagent_through_a_pause(
    tmp_path: Path,
) -> None:
    """The client checks every event it reads (its verifier): the agent tool's subagent,
    started, suspended at the pause, started again by the run after the decision, finished."""
    script = [
        call("cleaner", {"input": "remove old.log"}),
        call("delete_file", {"path": "old.log"}, text="Deleting it."),
        reply("Done."),
        reply("Clean."),
    ]  # the outer model's turn, the cleaner's two, the outer model's answer
    with ProviderSimulator(script) as sim:
        cleaner = Agent(sim.model(), [delete_file], name="cleaner")
        agent = Agent(sim.model(), [cleaner.as_tool(name="cleaner", description="Deletes files.")])
        steps = [{"id": "user-1", "prompt": "Tidy up."}, {"approved": True}]
        with serving(app(agent, data_dir=tmp_path)) as root:
            runs = drive(f"{root}/", "tidy-1", steps)
        cleaner_call = sim.call_ids[0]

    assert [(r["result"], r["errors"], r["interrupts"]) for r in runs] == [
        (None, [], [cleaner_call]),
        ("Clean.", [], []),
    ]
    assert held(runs[-1])[-3:] == [
        ("msg-1", "assistant", [cleaner_call]),
        ("msg-2", "tool", cleaner_call),
        ("msg-3", "assistant", "Clean."),
    ]
