"""The web app's pages over HTTP: the runs page and its filters, one run's timeline and
transcript, the conversations (listed, deleted), the tools, the chat page's embedded thread,
and a server without an agent (the run log and the conversations only)."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import answer, call, calls
from tooldeck import (
    Agent,
    AssistantOutput,
    ModelSettings,
    ScriptedModel,
    external_tool,
    tool,
)
from tooldeck.messages import Usage
from tooldeck.models import ModelPrices
from tooldeck.runlog import RunLog
from tooldeck.sessions import SQLiteSession
from tooldeck.web import create_app

TOKEN = "t0ken"
PORT = 8766


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool
def divide(left: int, right: int) -> float:
    """Divide two numbers."""
    return left / right


@tool(requires_approval=True, timeout=5, toolsets=["files"])
def delete_file(path: str, force: bool = False) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
        force: Delete it even if it is read-only.
    """
    return f"deleted {path}"


locate_phone = external_tool(
    "locate_phone",
    "Find where the user's phone is.",
    {"type": "object", "properties": {}, "additionalProperties": False},
)


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Callable[..., httpx.AsyncClient]]:
    """``site(agent)``: a client of the web app of ``agent`` (None: no chat), logged in."""
    made: list[tuple[httpx.AsyncClient, RunLog | None]] = []

    def make(agent: Agent[Any, Any] | None) -> httpx.AsyncClient:
        log = RunLog(tmp_path / "logs.db") if agent is not None else None
        if agent is not None:
            agent.run_log = log
        app = create_app(agent=agent, home=tmp_path, token=TOKEN, port=PORT, run_log=log)
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url=f"http://127.0.0.1:{PORT}",
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        made.append((client, log))
        return client

    yield make
    for client, log in made:
        await client.aclose()
        if log is not None:
            log.close()


def shown(html: str) -> str:
    """The page's text, tags removed and spaces collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


async def three_runs(tmp_path: Path) -> Agent[Any, Any]:
    model = ScriptedModel(
        [
            answer("Hello."),
            calls(call("add_numbers", "c1", left=2, right=3)),
            answer("5"),
            calls(call("divide", "c2", left=1, right=0)),
            answer("Cannot divide by zero."),
        ]
    )
    agent = Agent(model, [add_numbers, divide])
    agent.run_log = log = RunLog(tmp_path / "logs.db")
    await agent.run("Hi", session=SQLiteSession(tmp_path / "sessions.db", "greet"))
    await agent.run("2 + 3?", session=SQLiteSession(tmp_path / "sessions.db", "maths"))
    await agent.run("1 / 0?", session=SQLiteSession(tmp_path / "sessions.db", "maths"))
    log.close()
    return agent


async def test_the_runs_page_lists_and_filters_the_run_log(site: Any, tmp_path: Path) -> None:
    await three_runs(tmp_path)
    client = site(None)

    every = shown((await client.get("/runs")).text)
    assert all(prompt in every for prompt in ("Hi", "2 + 3?", "1 / 0?"))
    by_tool = shown((await client.get("/runs?tool=add_numbers")).text)
    assert "2 + 3?" in by_tool
    assert "1 / 0?" not in by_tool
    failed = shown((await client.get("/runs?errors=1")).text)
    assert "1 / 0?" in failed
    assert "1 failed" in failed
    assert "2 + 3?" not in failed
    session = shown((await client.get("/runs?session=greet")).text)
    assert "Hi" in session
    assert "2 + 3?" not in session


async def test_the_runs_page_filters_by_date(site: Any, tmp_path: Path) -> None:
    await three_runs(tmp_path)
    with sqlite3.connect(tmp_path / "logs.db") as db:  # "Hi" ran on 2 January 2025
        day = time.mktime((2025, 1, 2, 12, 0, 0, 0, 0, -1))
        db.execute("UPDATE runs SET started_at = ? WHERE prompt = 'Hi'", (day,))
    client = site(None)

    that_day = shown((await client.get("/runs?since=2025-01-02&until=2025-01-02")).text)
    assert "Hi" in that_day
    assert "2 + 3?" not in that_day
    later = shown((await client.get("/runs?since=2025-01-03")).text)
    assert "2 + 3?" in later
    assert "conversation greet" not in later
    wrong = shown((await client.get("/runs?since=yesterday")).text)
    assert "'yesterday' is not a date (YYYY-MM-DD)" in wrong


async def test_a_run_page_shows_its_timeline_transcript_and_raw_record(
    site: Any, tmp_path: Path
) -> None:
    await three_runs(tmp_path)
    client = site(None)
    listing = (await client.get("/runs?tool=divide")).text
    (run_id,) = set(re.findall(r'href="/runs/([0-9a-f]{32})"', listing))

    page = await client.get(f"/runs/{run_id}")

    text = shown(page.text)
    assert "round 1: model" in text
    assert "round 2: model" in text
    assert re.search(r"divide [0-9.]+ ms · tool_error", text), text
    assert "the model read error[tool_error]" in text
    assert "exception ZeroDivisionError: division by zero" in text
    assert page.text.count("<rect") == 3  # two model turns and one call on the timeline
    raw = re.search(r'<pre class="json">(\{\s+&#34;run_id&#34;.*?)</pre>', page.text, re.S)
    assert raw is not None
    assert f"&#34;run_id&#34;: &#34;{run_id}&#34;" in raw.group(1)
    missing = await client.get("/runs/0000")
    assert missing.status_code == 404
    assert "no run '0000' in the run log" in shown(missing.text)


async def test_the_runs_pages_show_what_a_run_cost(site: Any, tmp_path: Path) -> None:
    usage = Usage(input_tokens=1000, output_tokens=500)
    prices = ModelPrices(input_per_million=2.0, output_per_million=8.0)
    model = ScriptedModel([AssistantOutput(content="Priced.", usage=usage)])
    agent = Agent(model, settings=ModelSettings(prices=prices))
    agent.run_log = log = RunLog(tmp_path / "logs.db")
    await agent.run("What does it cost?")
    log.close()
    client = site(None)

    listing = (await client.get("/runs")).text
    assert "$0.006" in shown(listing)
    (run_id,) = set(re.findall(r'href="/runs/([0-9a-f]{32})"', listing))
    text = shown((await client.get(f"/runs/{run_id}")).text)
    assert "Cost $0.006" in text
    assert "1000 in / 500 out tokens, $0.006" in text  # the model turn on the timeline


async def test_conversations_are_listed_and_deleted(site: Any, tmp_path: Path) -> None:
    await three_runs(tmp_path)
    client = site(None)

    listed = shown((await client.get("/conversations")).text)
    assert listed.index("2 + 3?") < listed.index("Hi")  # the most recent first
    deleted = await client.post("/conversations/maths/delete")
    assert deleted.status_code == 303
    after = shown((await client.get("/conversations")).text)
    assert "2 + 3?" not in after
    assert "Hi" in after


async def test_the_tools_page_shows_each_schema_and_how_calls_run(site: Any) -> None:
    client = site(Agent(ScriptedModel([]), [add_numbers, delete_file, locate_phone]))

    text = shown((await client.get("/tools")).text)

    assert "delete_file Delete a file." in text
    assert "approval every call waits for a person's decision" in text
    assert "timeout 5 s" in text
    assert "toolset files" in text
    assert "force boolean false Delete it even if it is read-only." in text
    assert "locate_phone Find where the user's phone is. external" in text


async def test_the_chat_page_embeds_the_thread_and_what_waits(site: Any, tmp_path: Path) -> None:
    model = ScriptedModel([calls(call("delete_file", "d1", path="</script><b>x")), answer("ok")])
    agent = Agent(model, [delete_file])
    await agent.run("Delete it", session=SQLiteSession(tmp_path / "sessions.db", "paused"))
    client = site(agent)

    page = (await client.get("/chat/paused")).text

    embedded = re.search(r'<script type="application/json" id="thread-data">(.*?)</script>', page)
    assert embedded is not None  # the arguments' "</script>" did not end the element
    data = json.loads(embedded.group(1))
    assert (data["threadId"], data["endpoint"], data["readOnly"]) == ("paused", "/agui/", False)
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    (pending,) = data["pending"]
    assert (pending["tool"], pending["arguments"]) == ("delete_file", {"path": "</script><b>x"})
    assert data["interrupts"][0]["id"] == pending["interruptId"]
    assert '<form id="ask"' in page


async def test_a_server_without_an_agent_shows_the_run_log_only(site: Any, tmp_path: Path) -> None:
    await three_runs(tmp_path)
    client = site(None)

    home = await client.get("/")
    assert home.headers["location"] == "/runs"
    chat = (await client.get("/chat/maths")).text
    assert '<form id="ask"' not in chat
    assert "start it with tooldeck web --tools MODULE" in shown(chat)
    assert '"readOnly": true' in chat
    assert (await client.post("/agui/", json={})).status_code == 404
    assert "start it with tooldeck web --tools MODULE" in shown((await client.get("/tools")).text)
    assert (await client.get("/static/chat.js")).status_code == 200


async def test_a_run_page_shows_its_handoffs(site: Any, tmp_path: Path) -> None:
    billing = Agent(ScriptedModel([answer("Billing here.")]), name="billing")
    triage = Agent(
        ScriptedModel([calls(call("transfer_to_billing", "t1"))]), name="triage", handoffs=[billing]
    )
    triage.run_log = log = RunLog(tmp_path / "logs.db")
    result = await triage.run("Refund please")
    log.close()
    client = site(None)

    text = shown((await client.get(f"/runs/{result.run_id}")).text)

    assert "Handoffs triage → billing" in text
    assert "transfer_to_billing" in text
    assert "⇢ triage handed the run to billing" in text


def thread_data(page: str) -> dict[str, Any]:
    embedded = re.search(r'<script type="application/json" id="thread-data">(.*?)</script>', page)
    assert embedded is not None
    data: dict[str, Any] = json.loads(embedded.group(1))
    return data


async def test_the_chat_page_embeds_each_runs_foot_from_the_run_log(
    site: Any, tmp_path: Path
) -> None:
    await three_runs(tmp_path)
    logged = {run.prompt: run for run in RunLog(tmp_path / "logs.db").runs()}

    data = thread_data((await site(None).get("/chat/maths")).text)

    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"] * 2
    assert data["runs"] == [
        {
            "end": 4 * number,
            "runId": logged[prompt].run_id,
            "stopReason": "answer",
            "answered": True,
            "usage": {"requests": 2, "inputTokens": 0, "outputTokens": 0},
        }
        for number, prompt in ((1, "2 + 3?"), (2, "1 / 0?"))
    ]
    assert data["decisions"] == []  # nobody decided on these calls


async def test_a_run_log_that_cannot_be_read_leaves_the_conversation_and_says_so(
    site: Any, tmp_path: Path
) -> None:
    await three_runs(tmp_path)
    (tmp_path / "logs.db").unlink()
    with sqlite3.connect(tmp_path / "logs.db") as other:  # another program's database
        other.execute("CREATE TABLE notes (text TEXT)")

    data = thread_data((await site(None).get("/chat/maths")).text)

    assert len(data["messages"]) == 8
    assert data["runs"] == data["decisions"] == []  # the page shows no foot it cannot read
    assert "is an SQLite database but not a tooldeck run log" in data["logProblem"]
