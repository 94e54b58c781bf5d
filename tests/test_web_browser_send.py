"""``tooldeck web`` in headless Chromium: what a person sees of a message typed while the
agent works when it cannot join at once — the run pauses first (it waits, then joins the
resumed run), or the run ends before the message reaches it (not sent). The model is the
provider simulator (fresh call ids); the fixtures are test_web_browser's."""

from __future__ import annotations

import threading
from typing import Any

from playwright.sync_api import BrowserContext, Route, expect

from test_web_browser import ask, browser, logged_in, playwright, serve, shot  # noqa: F401
from tooldeck import Agent, tool
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call


def test_a_message_typed_before_a_pause_waits_then_joins_the_resumed_run(
    serve: Any,  # noqa: F811
    browser: BrowserContext,  # noqa: F811
) -> None:
    gate = threading.Event()

    @tool
    def survey(area: str) -> str:
        """Survey an area (until the test lets it finish)."""
        gate.wait(30)
        return f"{area}: calm"

    @tool(requires_approval=True)
    def close_bay(area: str) -> str:
        """Close an area."""
        return f"{area}: closed"

    both = sim_call(("survey", {"area": "bay"}), ("close_bay", {"area": "bay"}))
    with ProviderSimulator([both, reply("Closed the bay; kept it brief.")]) as sim:
        page = logged_in(browser, serve(Agent(sim.model(), [survey, close_bay])), "/chat/pause")
        try:
            ask(page, "Survey and close the bay.")
            expect(page.locator(".call.running")).to_have_count(2)  # survey works
            ask(page, "Keep it brief.")
            late = page.locator(".msg.user").nth(1)
            expect(late).to_have_class("msg user queued")
        finally:
            gate.set()
        expect(page.locator(".decide button", has_text="Approve")).to_have_count(1)
        expect(late).to_have_class("msg user queued")
        expect(late.locator(".msg-state")).to_have_text("queued: it joins when the run goes on")
        shot(page, "chat-message-waits-at-a-pause")
        page.get_by_role("button", name="Approve", exact=True).click()
        expect(late).to_have_class("msg user sent")
        expect(late.locator(".msg-state")).to_have_text("sent")
        expect(page.locator(".msg.assistant")).to_have_text("Closed the bay; kept it brief.")
    resumed = sim.requests[1]["messages"]
    assert [m["role"] for m in resumed][-3:] == ["tool", "tool", "user"]
    assert resumed[-1]["content"] == "Keep it brief."
    assert sum(m["content"] == "Keep it brief." for m in resumed) == 1


def test_a_message_that_reaches_the_server_after_the_run_ended_shows_not_sent(
    serve: Any,  # noqa: F811
    browser: BrowserContext,  # noqa: F811
) -> None:
    gate = threading.Event()
    held: list[Route] = []

    @tool
    def survey(area: str) -> str:
        """Survey an area (until the test lets it finish)."""
        gate.wait(30)
        return f"{area}: calm"

    with ProviderSimulator([sim_call("survey", {"area": "bay"}), reply("Calm.")]) as sim:
        page = logged_in(browser, serve(Agent(sim.model(), [survey])), "/chat/late")
        page.route("**/agui/messages", lambda route: held.append(route))  # a slow network
        try:
            ask(page, "Survey the bay.")
            expect(page.locator(".call.running")).to_have_count(1)
            ask(page, "Keep it brief.")
            late = page.locator(".msg.user").nth(1)
            expect(late).to_have_class("msg user queued")
        finally:
            gate.set()
        expect(page.locator(".msg.assistant")).to_have_text("Calm.")
        expect(late).to_have_class("msg user unsent")
        expect(late.locator(".msg-state")).to_have_text("not sent: the run ended first")
        (post,) = held
        with page.expect_response("**/agui/messages") as response:
            post.continue_()
        assert response.value.status in (404, 409)  # the server refuses it too: no run
        shot(page, "chat-message-not-sent")
        page.reload()
        expect(page.locator(".msg.user")).to_have_text(["Survey the bay."])
    assert len(sim.requests) == 2
    assert all(m["content"] != "Keep it brief." for r in sim.requests for m in r["messages"])
