"""The built site as a new user meets it: opened from disk in a real browser.

The site is built with ``mkdocs build`` and ``site/index.html`` opened by file:// in
Debian's Chromium, headless, driven by Playwright for Python (the system browser: nothing
is downloaded). What a user does first is checked: the home page loads with nothing
fetched from the network, search finds a page and opens it, the navigation leads from page
to page, and code blocks are highlighted with a copy button.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from _chromium import LAUNCH_ARGS, chromium
from test_site import build_site, first_agent

if TYPE_CHECKING:
    from playwright.sync_api import Page

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("built") / "site"
    built = build_site(folder)
    assert built.returncode == 0, built.stderr
    return folder


class Browser:
    """One headless Chromium page, and every URL it requested."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.requested: list[str] = []
        page.on("request", lambda request: self.requested.append(request.url))

    def open(self, path: Path) -> None:
        self.page.goto(path.as_uri())
        self.page.wait_for_load_state("load")

    def heading(self) -> str:
        """The page's title as a reader sees it (without the heading's permalink sign)."""
        return self.page.locator("article h1").inner_text().removesuffix("¶")

    def fetched_from_the_network(self) -> list[str]:
        return [url for url in self.requested if not url.startswith(LOCAL_SCHEMES)]


@pytest.fixture
def browser() -> Iterator[Browser]:
    # Imported here, not at collection: with playwright imported by the collecting
    # process, a pty test of the CLI run earlier in a full suite hung after SIGINT.
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    executable = chromium()
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(executable),
            args=LAUNCH_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
            permissions=["clipboard-read", "clipboard-write"],
        )
        try:
            yield Browser(context.new_page())
        finally:
            context.close()


def test_the_home_page_opens_from_disk_with_nothing_fetched(site: Path, browser: Browser) -> None:
    browser.open(site / "index.html")
    assert browser.page.title().startswith("tooldeck")
    assert browser.heading() == "tooldeck"
    assert browser.fetched_from_the_network() == []


def test_search_finds_a_page_and_opens_it(site: Path, browser: Browser) -> None:
    browser.open(site / "index.html")
    browser.page.keyboard.press("/")  # the theme's search shortcut
    search = browser.page.locator("input.md-search__input")
    search.press_sequentially("checkpoint_key")  # typed, as a person does
    results = browser.page.locator(".md-search-result__item a")
    results.first.wait_for(state="visible", timeout=60_000)
    hrefs = [link.get_attribute("href") or "" for link in results.all()]
    assert any("human-in-the-loop.html" in href for href in hrefs), hrefs

    results.first.click()
    browser.page.wait_for_load_state("load")
    assert browser.page.url.startswith(site.as_uri())
    assert "checkpoint_key" in browser.page.locator("article").inner_text()
    assert browser.fetched_from_the_network() == []


def test_the_navigation_leads_from_page_to_page(site: Path, browser: Browser) -> None:
    browser.open(site / "index.html")
    browser.page.locator("nav.md-nav a", has_text="Human in the loop").first.click()
    browser.page.wait_for_load_state("load")
    assert browser.page.url.endswith("/human-in-the-loop.html")
    assert browser.heading() == "Human in the loop"

    browser.page.locator("article a", has_text="sessions").first.click()  # a link in the text
    browser.page.wait_for_load_state("load")
    assert browser.page.url.endswith("/sessions.html")
    assert browser.heading() == "Sessions and long histories"

    browser.page.locator("a.md-footer__link--next").click()  # the footer's next page
    browser.page.wait_for_load_state("load")
    assert browser.heading() == "Durable runs"


def test_code_blocks_are_highlighted_with_a_copy_button(site: Path, browser: Browser) -> None:
    browser.open(site / "get-started.html")
    block = browser.page.locator("article div.highlight").filter(has_text="def main()").first
    assert "from tooldeck import Agent, tool" in block.locator("code").inner_text()
    assert block.locator("code span.kn").count() > 0  # keywords get the theme's colour
    copy = block.locator('button[data-md-type="copy"]')  # the theme's script adds it
    copy.wait_for(state="attached")
    assert copy.get_attribute("title") == "Copy to clipboard"
    target = copy.get_attribute("data-clipboard-target")
    assert target is not None
    assert browser.page.locator(target).inner_text().startswith("from tooldeck import")

    block.hover()  # the button shows over the block
    copy.click()
    copied = browser.page.evaluate("navigator.clipboard.readText()")
    assert copied == first_agent("get-started.md", '"openai:').rstrip("\n")  # the tested one


def test_a_missing_browser_that_cannot_be_installed_fails_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import _chromium

    monkeypatch.setattr(_chromium, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(_chromium.os, "geteuid", lambda: 1000)  # not root: no apt-get
    _chromium.chromium.cache_clear()
    try:
        with pytest.raises(_chromium.ChromiumUnavailable, match="apt-get install -y chromium"):
            _chromium.chromium()
    finally:
        _chromium.chromium.cache_clear()
