"""``tooldeck web`` in a real browser: headless Chromium (Debian's package) driven by Playwright,
against the app served on 127.0.0.1 with a scripted model. A prompt's answer streams into
the page, calls are approved, edited and rejected in the page, a conversation goes on after a
reload, a run opens in the runs page, and a request without the token is refused. Each page
is saved as a screenshot in test-artifacts/web/ (the run's summary names the folder)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, Playwright, expect, sync_playwright
from pydantic import BaseModel

from _asgi_server import listening, serving
from _browser import LAUNCH_ARGS, SAVED, artifacts, chromium
from helpers import answer, call, calls
from tooldeck import (
    Agent,
    AssistantOutput,
    Limits,
    Model,
    ScriptedModel,
    external_tool,
    tool,
)
from tooldeck.messages import Usage
from tooldeck.models.base import TextChunk
from tooldeck.runlog import RunLog
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call
from tooldeck.web import create_app

TOKEN = "browser-test-token"
WAIT_MS = 30_000
"""The most any expectation waits (an upper bound on a busy machine, not a timing claim)."""


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
    """
    return f"deleted {path}"


locate_phone = external_tool(
    "locate_phone",
    "Find where the user's phone is.",
    {"type": "object", "properties": {}, "additionalProperties": False},
)


class City(BaseModel):
    name: str
    country: str
    population: int


class Typist(Model):
    """Streams its first answer in two pieces, holding the second until the test says."""

    name = "typist"

    def __init__(self) -> None:
        self.gate = threading.Event()

    async def complete(
        self, messages: Any, tools: Any, settings: Any, instructions: str = ""
    ) -> Any:
        return AssistantOutput(content="Hello, I am streaming.")

    async def stream(
        self, messages: Any, tools: Any, settings: Any, instructions: str = ""
    ) -> AsyncIterator[Any]:
        yield TextChunk("Hello, ")
        await asyncio.to_thread(self.gate.wait, 60)
        yield TextChunk("I am streaming.")
        yield await self.complete(messages, tools, settings, instructions)


@dataclass
class Served:
    root: str
    agent: Agent[Any, Any]
    home: Path


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    executable = chromium()  # installed with apt-get when missing; never skipped
    assert executable
    with sync_playwright() as driver:
        yield driver


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """``serve(agent)``: the web app of ``agent`` on 127.0.0.1, its data in tmp_path."""
    stack: list[Any] = []

    def start(agent: Agent[Any, Any]) -> Served:
        agent.run_log = log = RunLog(tmp_path / "logs.db")
        listener = listening()
        app = create_app(
            agent=agent,
            home=tmp_path,
            token=TOKEN,
            port=listener.getsockname()[1],
            run_log=log,
        )
        served = serving(app, listener)
        root = served.__enter__()
        stack.append((served, log))
        return Served(root, agent, tmp_path)

    yield start
    for served, log in reversed(stack):
        served.__exit__(None, None, None)
        log.close()


@pytest.fixture
def browser(playwright: Playwright, tmp_path: Path) -> Iterator[BrowserContext]:
    """A fresh Chromium profile (its own user-data-dir) for each test."""
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path / "chromium-profile"),
        executable_path=chromium(),
        args=LAUNCH_ARGS,
        headless=True,
        viewport={"width": 1180, "height": 860},
    )
    context.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    yield context
    context.close()


def logged_in(browser: BrowserContext, served: Served, path: str) -> Page:
    page = browser.pages[0] if browser.pages else browser.new_page()
    page.goto(f"{served.root}{path}?token={TOKEN}")
    assert "token" not in page.url  # the token became a cookie and left the URL
    return page


def shot(page: Page, name: str) -> None:
    path = artifacts() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    SAVED.append(path)


def ask(page: Page, prompt: str) -> None:
    page.fill("#prompt", prompt)
    page.press("#prompt", "Enter")


def test_a_prompt_streams_its_answer_into_the_page(serve: Any, browser: BrowserContext) -> None:
    model = Typist()
    served = serve(Agent(model))
    page = logged_in(browser, served, "/chat/streaming")

    ask(page, "Say hello.")
    reply = page.locator(".msg.assistant")
    expect(reply).to_have_text("Hello, ")  # shown while the model still writes
    expect(reply).to_have_class("msg assistant streaming")
    model.gate.set()

    expect(reply).to_have_text("Hello, I am streaming.")
    expect(page.locator(".run-foot")).to_contain_text("1 model turn")
    expect(page.locator("#chat-title")).to_have_text("Say hello.")
    expect(page.locator("#prompt")).to_be_enabled()


def test_calls_are_approved_edited_and_rejected_in_the_page(
    serve: Any, browser: BrowserContext
) -> None:
    three = calls(
        call("delete_file", "d1", path="a.txt"),
        call("delete_file", "d2", path="b.txt"),
        call("delete_file", "d3", path="c.txt"),
    )
    model = ScriptedModel([three, answer("Deleted a.txt and draft.txt; kept c.txt.")])
    served = serve(Agent(model, [delete_file]))
    page = logged_in(browser, served, "/chat/cleanup")

    ask(page, "Delete a.txt, b.txt and c.txt.")
    cards = page.locator(".call")
    expect(cards.locator(".decide button", has_text="Approve")).to_have_count(3)
    expect(page.locator("#prompt")).to_be_disabled()
    shot(page, "chat-approvals")

    first, second, third = cards.nth(0), cards.nth(1), cards.nth(2)
    first.get_by_role("button", name="Approve", exact=True).click()
    second.get_by_role("button", name="Edit arguments").click()
    second.locator("textarea").fill('{"path": "draft.txt"}')
    second.get_by_role("button", name="Approve with these arguments").click()
    third.get_by_role("button", name="Reject").click()
    third.locator("input[type=text]").fill("keep c.txt")
    third.get_by_role("button", name="Reject the call").click()

    expect(first.locator("pre.result")).to_have_text("deleted a.txt")
    expect(second.locator("pre.result")).to_contain_text("deleted draft.txt")
    expect(third.locator("pre.result")).to_have_text("error[rejected]: keep c.txt")
    expect(third).to_have_class("call rejected")
    expect(page.locator(".msg.assistant")).to_have_text("Deleted a.txt and draft.txt; kept c.txt.")
    assert [m.content for m in model.requests[-1].messages if m.role == "tool"] == [
        "deleted a.txt",
        'deleted draft.txt\n(run with arguments edited by a person: {"path": "draft.txt"})',
        "error[rejected]: keep c.txt",
    ]
    shot(page, "chat-decided")


def test_a_call_approved_for_the_run_lets_the_next_go_and_says_so_after_a_reload(
    serve: Any, browser: BrowserContext, provider: Any
) -> None:
    sim = provider(
        [
            sim_call("delete_file", {"path": "a.txt"}),
            sim_call("delete_file", {"path": "b.txt"}),
            reply("Deleted both."),
        ]
    )
    served = serve(Agent(sim.model(), [delete_file]))
    page = logged_in(browser, served, "/chat/always")
    ask(page, "Delete a.txt and b.txt.")
    cards = page.locator(".call")
    expect(cards.locator(".decide button", has_text="Always in this")).to_have_count(2)
    cards.nth(0).get_by_role("button", name="Always in this run").click()

    expect(page.locator(".msg.assistant").last).to_have_text("Deleted both.")
    expect(cards).to_have_count(2)  # b.txt ran without a question
    expect(cards.nth(1).locator("pre.result")).to_have_text("deleted b.txt")
    expect(cards.nth(1).locator(".decide button")).to_have_count(0)
    # said as the call streamed, before any reload
    live = "Approved earlier for this run (not asked again)"
    expect(cards.nth(1).locator(".decided")).to_have_text(live)
    page.reload()
    decided = [
        "Approved for the rest of this run",
        "Approved earlier for this run (not asked again)",
    ]
    expect(page.locator(".call .decided")).to_have_text(decided)
    shot(page, "chat-approved-for-the-run")


def test_an_external_call_is_answered_in_the_page(serve: Any, browser: BrowserContext) -> None:
    model = ScriptedModel([calls(call("locate_phone", "p1")), answer("Your phone is at home.")])
    served = serve(Agent(model, [locate_phone]))
    page = logged_in(browser, served, "/chat/phone")

    ask(page, "Where is my phone?")
    card = page.locator(".call")
    card.locator("textarea").fill("at home, on the sofa")
    card.get_by_role("button", name="Send the result").click()

    expect(card.locator("pre.result")).to_have_text("at home, on the sofa")
    expect(page.locator(".msg.assistant")).to_have_text("Your phone is at home.")


UNCOVERED = """(button) => {
  const box = button.getBoundingClientRect();
  const x = box.left + box.width / 2, y = box.top + box.height / 2;
  const found = document.elementFromPoint(x, y);
  return {
    inView: box.top >= 0 && box.bottom <= window.innerHeight,
    onTop: found === button || button.contains(found),
    found: found ? found.outerHTML.slice(0, 120) : null,
  };
}"""
"""Whether a button is in the viewport and nothing covers its centre (what a click meets)."""


def test_the_calls_a_later_turn_waits_on_are_in_view_and_not_under_the_prompt_box(
    serve: Any, browser: BrowserContext
) -> None:
    story = "\n".join(f"Line {n} of a long answer." for n in range(1, 41))
    model = ScriptedModel(
        [answer(story), calls(call("delete_file", "d1", path="notes.txt")), answer("Deleted.")]
    )
    served = serve(Agent(model, [delete_file]))
    page = logged_in(browser, served, "/chat/later")
    page.set_viewport_size({"width": 900, "height": 600})
    ask(page, "Tell me a long story.")
    expect(page.locator(".msg.assistant")).to_contain_text("Line 40 of a long answer.")

    ask(page, "Delete notes.txt.")  # a later turn, which waits for approval

    decide = page.locator(".call .decide")
    expect(decide.get_by_role("button")).to_have_count(5)
    names = ("Approve", "Always in this run", "Always in this conversation", "Edit arguments")
    for name in (*names, "Reject"):
        button = decide.get_by_role("button", name=name, exact=True)
        seen = button.evaluate(UNCOVERED)
        assert seen["inView"], f"{name} is out of view: {seen}"
        assert seen["onTop"], f"{name} is covered: {seen}"
    shot(page, "chat-later-turn-waits")
    decide.get_by_role("button", name="Approve", exact=True).click(no_wait_after=True)
    expect(page.locator(".msg.assistant").last).to_have_text("Deleted.")
    expect(page.locator("#prompt")).to_be_enabled()


def test_decisions_and_run_links_come_back_after_a_reload(
    serve: Any, browser: BrowserContext
) -> None:
    three = calls(
        call("delete_file", "d1", path="a.txt"),
        call("delete_file", "d2", path="b.txt"),
        call("delete_file", "d3", path="c.txt"),
    )
    model = ScriptedModel([answer("Hello."), three, answer("Deleted two, kept c.txt.")])
    served = serve(Agent(model, [delete_file]))
    page = logged_in(browser, served, "/chat/reloaded")
    ask(page, "Hi.")
    expect(page.locator(".msg.assistant")).to_have_text("Hello.")
    ask(page, "Delete a.txt, b.txt and c.txt.")
    cards = page.locator(".call")
    expect(cards.locator(".decide button", has_text="Approve")).to_have_count(3)
    cards.nth(0).get_by_role("button", name="Approve", exact=True).click()
    cards.nth(1).get_by_role("button", name="Edit arguments").click()
    cards.nth(1).locator("textarea").fill('{"path": "draft.txt"}')
    cards.nth(1).get_by_role("button", name="Approve with these arguments").click()
    cards.nth(2).get_by_role("button", name="Reject").click()
    cards.nth(2).locator("input[type=text]").fill("keep c.txt")
    cards.nth(2).get_by_role("button", name="Reject the call").click()
    expect(page.locator(".msg.assistant").last).to_have_text("Deleted two, kept c.txt.")
    decided = ["Approved", "Approved with edited arguments", "Rejected"]
    expect(page.locator(".call .decided")).to_have_text(decided)
    hrefs = "(links) => links.map((a) => a.getAttribute('href'))"
    live = page.locator(".run-foot a").evaluate_all(hrefs)
    assert len(live) == 3  # the first run; the second as it paused, then as it ended

    page.reload()

    expect(page.locator(".msg.user")).to_have_text(["Hi.", "Delete a.txt, b.txt and c.txt."])
    expect(page.locator(".call .decided")).to_have_text(decided)
    expect(cards.nth(2)).to_have_class("call rejected")
    feet = page.locator(".run-foot")
    expect(feet).to_have_count(2)  # one a run: the second's two parts are one stored run
    assert feet.locator("a").evaluate_all(hrefs) == [live[0], live[2]]
    expect(feet.nth(0)).to_contain_text("1 model turn")
    expect(feet.nth(1)).to_contain_text("2 model turns")
    order = page.locator("#thread > *").evaluate_all("(nodes) => nodes.map((n) => n.className)")
    assert order.index("run-foot") == order.index("msg assistant") + 1  # after the first answer
    shot(page, "chat-reloaded-decisions")
    page.locator(".run-foot a").nth(1).click()
    expect(page.locator(".badge.stop-answer")).to_have_text("answer")


def test_a_typed_answer_is_shown_as_data(serve: Any, browser: BrowserContext) -> None:
    final = calls(call("final_answer", "f1", name="Zagreb", country="Croatia", population=800_000))
    served = serve(Agent(ScriptedModel([final]), output_type=City))
    page = logged_in(browser, served, "/chat/city")

    ask(page, "Name the capital of Croatia.")

    data = page.locator(".data")
    expect(data.locator(".label")).to_have_text("typed answer")
    expect(data.locator("tr")).to_have_text(["nameZagreb", "countryCroatia", "population800000"])
    shot(page, "chat-typed-answer")


def test_a_run_stopped_at_a_limit_says_it_has_no_answer(
    serve: Any, browser: BrowserContext
) -> None:
    spending = AssistantOutput(
        tool_calls=(call("add_numbers", "c1", left=2, right=3),),
        usage=Usage(input_tokens=10, output_tokens=50),
    )
    limited = Limits(max_output_tokens=40)  # spent by the first turn: no request may follow
    agent = Agent(ScriptedModel([spending]), [add_numbers], limits=limited, on_limit="final_answer")
    served = serve(agent)
    page = logged_in(browser, served, "/chat/limited")

    ask(page, "What is 2 + 3?")

    foot = page.locator(".run-foot")
    expect(foot).to_contain_text("stopped without an answer (max_tokens)", timeout=WAIT_MS)
    expect(page.locator(".msg.assistant")).to_have_count(0)  # no empty answer shown as one
    page.reload()  # the log's foot says the same
    expect(page.locator(".run-foot")).to_contain_text("stopped without an answer (max_tokens)")
    shot(page, "chat-stopped-at-a-limit")


def test_a_conversation_goes_on_after_a_reload(serve: Any, browser: BrowserContext) -> None:
    model = ScriptedModel(
        [
            calls(call("add_numbers", "c1", left=2, right=3)),
            answer("2 + 3 = 5."),
            calls(call("delete_file", "d1", path="notes.txt")),
            answer("You asked about 2 + 3, and notes.txt is deleted."),
        ]
    )
    served = serve(Agent(model, [add_numbers, delete_file]))
    page = logged_in(browser, served, "/chat/ongoing")
    ask(page, "What is 2 + 3?")
    expect(page.locator(".msg.assistant")).to_have_text("2 + 3 = 5.")
    ask(page, "Delete notes.txt.")
    expect(page.locator(".decide button", has_text="Approve")).to_have_count(1)

    page.reload()  # the conversation and the waiting call come back from the session

    expect(page.locator(".msg.user")).to_have_text(["What is 2 + 3?", "Delete notes.txt."])
    expect(page.locator(".call").first.locator("pre.result")).to_have_text("5")
    expect(page.locator("#chat-title")).to_have_text("What is 2 + 3?")
    page.locator(".call").nth(1).get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".msg.assistant").last).to_have_text(
        "You asked about 2 + 3, and notes.txt is deleted."
    )
    assert [m.content for m in model.requests[-1].messages][:3] == [
        "What is 2 + 3?",
        "",
        "5",
    ]
    shot(page, "chat")


def test_a_run_opens_in_the_runs_page(serve: Any, browser: BrowserContext) -> None:
    model = ScriptedModel([calls(call("add_numbers", "c1", left=2, right=3)), answer("5")])
    served = serve(Agent(model, [add_numbers, delete_file, locate_phone]))
    page = logged_in(browser, served, "/chat/maths")
    ask(page, "What is 2 + 3?")

    page.locator(".run-foot a").click()

    expect(page.locator("h1")).to_contain_text("Run")
    expect(page.locator(".badge.stop-answer")).to_have_text("answer")
    lanes = page.locator(".timeline .lane-label")
    expect(lanes).to_have_text(["round 1: model", "add_numbers", "round 2: model"])
    expect(page.locator(".call-log pre.result")).to_have_text("5")
    shot(page, "run")

    page.get_by_role("link", name="Runs").first.click()
    page.fill("input[name=tool]", "add_numbers")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(1)
    shot(page, "runs")
    page.get_by_role("link", name="Tools").click()
    expect(page.locator("article.tool h2")).to_have_text(
        ["add_numbers", "delete_file", "locate_phone"]
    )
    shot(page, "tools")


def test_conversations_are_listed_opened_and_deleted(serve: Any, browser: BrowserContext) -> None:
    model = ScriptedModel([answer("Hello, Ada."), answer("Paris.")])
    served = serve(Agent(model))
    page = logged_in(browser, served, "/chat/ada")
    ask(page, "Hi, I am Ada.")
    expect(page.locator(".msg.assistant")).to_have_text("Hello, Ada.")
    page.goto(f"{served.root}/chat/geo")
    ask(page, "Capital of France?")
    expect(page.locator(".msg.assistant")).to_have_text("Paris.")

    page.get_by_role("link", name="Conversations").click()
    titles = page.locator("table.list a.title")
    expect(titles).to_have_text(["Capital of France?", "Hi, I am Ada."])
    shot(page, "conversations")
    titles.nth(1).click()
    expect(page.locator(".msg.assistant")).to_have_text("Hello, Ada.")

    page.go_back()
    page.locator("tr", has_text="Capital of France?").get_by_role("button", name="Delete").click()
    expect(page.locator("table.list a.title")).to_have_text(["Hi, I am Ada."])


def test_a_request_without_the_token_is_refused(serve: Any, browser: BrowserContext) -> None:
    served = serve(Agent(ScriptedModel([])))
    page = browser.new_page()

    response = page.goto(f"{served.root}/chat/x")

    assert response is not None
    assert response.status == 403
    expect(page.locator("body")).to_contain_text("needs its token")
    shot(page, "refused")


def test_a_message_typed_while_the_agent_works_shows_queued_then_sent(
    serve: Any, browser: BrowserContext
) -> None:
    gate = threading.Event()

    @tool
    def survey(area: str) -> str:
        """Survey an area (slowly: until the test lets it finish)."""
        if not gate.wait(WAIT_MS / 1000):
            raise TimeoutError("never released")
        return f"{area}: calm"

    script = [sim_call("survey", {"area": "bay"}), reply("Calm; kept it brief.")]
    with ProviderSimulator(script) as sim:
        try:
            served = serve(Agent(sim.model(), [survey]))
            page = logged_in(browser, served, "/chat/steer")
            ask(page, "Survey the bay.")
            expect(page.locator(".call.running")).to_have_count(1)
            expect(page.locator("#prompt")).to_be_enabled()  # typing while the agent works
            ask(page, "Keep it brief.")
            late = page.locator(".msg.user").nth(1)
            expect(late).to_have_class("msg user queued")
            expect(late.locator(".msg-state")).to_have_text(
                "queued: the agent reads it before its next step"
            )
            shot(page, "chat-message-queued")
        finally:
            gate.set()
        expect(late).to_have_class("msg user sent")
        expect(late.locator(".msg-state")).to_have_text("sent")
        expect(page.locator(".msg.assistant")).to_have_text("Calm; kept it brief.")
        order = page.locator("#thread > *").evaluate_all("(n) => n.map((x) => x.className)")
        assert order.index("msg user sent") == order.index("call") + 1  # after the call's result
        shot(page, "chat-message-sent")
        page.reload()
        expect(page.locator(".msg.user")).to_have_text(["Survey the bay.", "Keep it brief."])
    last = sim.requests[1]["messages"]
    assert [m["role"] for m in last][-2:] == ["tool", "user"]
    assert last[-1]["content"] == "Keep it brief."
