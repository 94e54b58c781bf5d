"""Code mode's approvals in ``tooldeck web``, in headless Chromium: the card of a call a
program makes offers the scope buttons and names the program's line; approved for the run,
the program's later calls (and the next program's) show, as they stream, that they ran under
that approval; a ``run_code`` approved as a whole names the tools its program may call."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import BrowserContext, Locator, Page, expect

from test_code_mode_approvals import ONE_MORE, payments, two_programs
from test_web_browser import ask, browser, logged_in, playwright, serve, shot  # noqa: F401
from tooldeck import Agent
from tooldeck.code import CodeMode
from tooldeck.testing import ProviderSimulator, call, reply


def paying_in_the_page(
    serving: Any, chromium: BrowserContext, sim: ProviderSimulator, approval: Any, prompt: str
) -> tuple[list[int], Page, Locator]:
    """The chat page of an agent whose programs call ``pay``, asked ``prompt``: the amounts
    paid, the page, and the card that waits for a decision."""
    paid, pay = payments()
    served = serving(Agent(sim.model(), [pay], capabilities=[CodeMode(approval=approval)]))
    page = logged_in(chromium, served, f"/chat/{approval}")
    ask(page, prompt)
    return paid, page, page.locator(".call.waiting", has=page.locator(".decide"))


def test_a_programs_call_is_approved_for_the_run_and_the_later_ones_say_so_live(
    serve: Any,  # noqa: F811
    browser: BrowserContext,  # noqa: F811
    provider: Any,
) -> None:
    sim = provider([*two_programs(), reply("Paid 1, 2 and 3.")])
    paid, page, waiting = paying_in_the_page(serve, browser, sim, "each", "Pay 1, 2 and 3.")

    expect(waiting.locator(".name")).to_have_text("run_code › pay")
    expect(page.locator(".call.waiting .name")).to_have_text(["run_code", "run_code › pay"])
    expect(waiting.locator(".decide .where")).to_have_text(
        "The program makes this call at line 2: first = await pay(amount=1)"
    )
    buttons = ["Approve", "Always in this run", "Always in this conversation"]
    expect(waiting.locator(".decide button")).to_have_text([*buttons, "Edit arguments", "Reject"])
    shot(page, "code-mode-call-waits")
    page.reload()  # the waiting program's call comes back as it was, decided from there
    expect(page.locator(".call.waiting .name")).to_have_text(["run_code", "run_code › pay"])
    expect(waiting.locator(".decide .where")).to_contain_text("line 2: first = await pay(")
    waiting.get_by_role("button", name="Always in this run").click()

    expect(page.locator(".msg.assistant").last).to_have_text("Paid 1, 2 and 3.")
    later = page.locator(".call", has=page.locator("pre.result", has_text="paid 2"))
    expect(later.locator(".decided")).to_have_text(
        "Approved earlier for this run (not asked again)"
    )
    third = page.locator(".call", has=page.locator("pre.result", has_text="paid 3"))
    expect(third.locator(".decided")).to_have_text(
        "Approved earlier for this run (not asked again)"
    )
    expect(page.locator(".call.waiting")).to_have_count(0)
    first = page.locator(".call", has=page.locator("pre.result", has_text="paid 1"))
    expect(first.locator(".name")).to_have_text("run_code › pay")  # ran in its card
    expect(first.locator(".decided")).to_have_text("Approved for the rest of this run")
    expect(page.locator(".call .name")).to_have_text(
        ["run_code", "run_code › pay", "pay", "run_code", "pay"]
    )
    assert paid == [1, 2, 3]
    shot(page, "code-mode-approved-for-the-run")


def test_a_program_approved_whole_names_the_tools_it_may_call(
    serve: Any,  # noqa: F811
    browser: BrowserContext,  # noqa: F811
    provider: Any,
) -> None:
    sim = provider([call("run_code", {"code": ONE_MORE}), reply("Paid 3.")])
    paid, page, waiting = paying_in_the_page(serve, browser, sim, "whole", "Pay 3.")

    expect(waiting.locator(".decide .reaches")).to_have_text(
        "The program may call pay: approved, it calls them without asking."
    )
    shot(page, "code-mode-whole-waits")
    waiting.get_by_role("button", name="Approve", exact=True).click()

    expect(page.locator(".msg.assistant").last).to_have_text("Paid 3.")
    assert paid == [3]
