"""An agent tool's run in ``tooldeck web``'s chat, in headless Chromium (issue 38): its calls
stream in cards of their own named after it (``clerk › price``); a call inside it that waits
for approval waits in its card, the agent tool's card waits too, and once approved the call's
result comes to that card. The models are provider simulators (fresh call ids)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import BrowserContext, expect

from test_agent_tool_doors import price, refund, refunded
from test_web_browser import ask, browser, logged_in, playwright, serve, shot  # noqa: F401
from tooldeck import Agent
from tooldeck.testing import call, reply


def test_an_agent_tools_calls_stream_in_cards_named_after_it_and_one_waits_in_its_card(
    serve: Any,  # noqa: F811
    browser: BrowserContext,  # noqa: F811
    provider: Any,
) -> None:
    refunded.clear()
    outer = provider([call("clerk", {"input": "refund o1"}), reply("Refunded o1.")])
    inner = provider(
        [
            call("price", {"item": "fig"}),
            call("refund", {"order_id": "o1"}),
            reply("Done: o1 refunded."),
        ]
    )
    clerk = Agent(inner.model(), [price, refund], name="clerk")
    agent = Agent(outer.model(), [clerk.as_tool(name="clerk", description="Prices, refunds.")])
    page = logged_in(browser, serve(agent), "/chat/clerk")
    ask(page, "Refund o1.")

    waiting = page.locator(".call.waiting", has=page.locator(".decide"))
    expect(waiting.locator(".name")).to_have_text("clerk › refund")
    priced = page.locator(".call", has=page.locator("pre.result", has_text="2.0"))
    expect(priced.locator(".name")).to_have_text("clerk › price")
    expect(page.locator(".call.waiting .name")).to_have_text(["clerk", "clerk › refund"])
    expect(page.locator(".call .name")).to_have_text(["clerk", "clerk › price", "clerk › refund"])
    shot(page, "agent-tool-call-waits")
    waiting.get_by_role("button", name="Approve").click()

    expect(page.locator(".msg.assistant").last).to_have_text("Refunded o1.")
    done = page.locator(".call", has=page.locator("pre.result", has_text="refunded o1"))
    expect(done.locator(".name")).to_have_text("clerk › refund")  # its result in its card
    expect(page.locator(".call.waiting")).to_have_count(0)
    expect(page.locator(".call.running")).to_have_count(0)
    expect(page.locator(".msg.assistant", has_text="Done: o1")).to_have_count(0)  # in its card
    assert refunded == ["o1"]
