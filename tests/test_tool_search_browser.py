"""Tool search in ``tooldeck web``, in headless Chromium: the chat's card of a search says
what it revealed, and the run's page marks the search on its timeline."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import BrowserContext, expect

from test_tool_search_edges import lookup_order, refund_order, searching_model, track_parcel
from test_web_browser import ask, browser, logged_in, playwright, serve, shot  # noqa: F401
from tooldeck import Agent
from tooldeck.search import ToolSearch


def test_a_search_shows_what_it_revealed_in_the_chat_and_on_the_timeline(
    serve: Any,  # noqa: F811
    browser: BrowserContext,  # noqa: F811
) -> None:
    agent = Agent(
        searching_model(),
        [lookup_order, refund_order, track_parcel],
        capabilities=[ToolSearch(strategy="regex")],
    )
    served = serve(agent)
    page = logged_in(browser, served, "/chat/refunds")
    ask(page, "Refund order A1")

    expect(page.locator(".msg.assistant")).to_have_text("Refunded.")
    expect(page.locator(".call .search-log")).to_have_text("⌕ revealed refund_order")
    shot(page, "tool-search-chat")

    page.locator(".run-foot a").click()
    lanes = page.locator(".timeline .lane-label")
    expect(lanes).to_have_text(
        ["round 1: model", "search_tools", "round 2: model", "refund_order", "round 3: model"]
    )
    expect(page.locator(".lane-search .lane-detail")).to_contain_text(
        '"refund" → revealed refund_order'
    )
    expect(page.locator(".call-log .search-log")).to_have_text(
        '⌕ searched "refund" → revealed refund_order'
    )
    shot(page, "tool-search-run")
