"""Debian's Chromium for the browser tests, installed with apt-get when it is missing.

The tests drive the system browser (``/usr/bin/chromium``) with Playwright for Python and
never download a browser of their own. A machine without it gets it from Debian's packages
when the tests run as root with apt-get (as CI does); anywhere else, or when the install
fails, the tests that need it fail with the reason: they are never skipped.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""Flags for a headless browser on a machine without a network (no background requests)."""


class ChromiumUnavailable(RuntimeError):
    """Chromium is not installed and could not be; the message says why."""


@functools.cache
def chromium() -> Path:
    """The browser's path, installed from Debian's packages first if needed."""
    if CHROMIUM.exists():
        return CHROMIUM
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise ChromiumUnavailable(
            f"no browser at {CHROMIUM}: install Debian's chromium package "
            "(apt-get install -y chromium) or run the tests as root on Debian"
        )
    lock_path = Path(tempfile.gettempdir()) / "tooldeck-chromium.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be installing it
        if not CHROMIUM.exists():
            _apt_install(apt)
    if not CHROMIUM.exists():
        raise ChromiumUnavailable(f"apt-get installed chromium but there is no {CHROMIUM}")
    return CHROMIUM


def _apt_install(apt: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = ([apt, "update"], [apt, "install", "-y", "--no-install-recommends", "chromium"])
    for command in steps:
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, env=env, timeout=1200, check=False
            )
        except subprocess.TimeoutExpired as error:
            raise ChromiumUnavailable(
                f"{' '.join(command)} did not finish in 20 minutes"
            ) from error
        if done.returncode != 0:
            output = (done.stderr or done.stdout).strip()[-3000:]
            raise ChromiumUnavailable(
                f"{' '.join(command)} failed (exit {done.returncode}):\n{output}"
            )


@dataclass
class OfflinePage:
    """A loaded page and the requests that tried to leave the machine (all refused)."""

    page: Any
    refused: list[str] = field(default_factory=list)


@contextmanager
def offline_page(url: str, profile: Path) -> Iterator[OfflinePage]:
    """``url`` (a file) in headless Chromium with a fresh profile; no request leaves the
    machine (each one is refused and recorded)."""
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import Route, sync_playwright

    executable = chromium()
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(executable), headless=True, args=LAUNCH_ARGS
        )
        try:
            loaded = OfflinePage(context.new_page())

            def refuse(route: Route) -> None:
                if route.request.url.startswith("file://"):
                    route.continue_()
                else:
                    loaded.refused.append(route.request.url)
                    route.abort()

            context.route("**/*", refuse)
            context.set_offline(True)
            loaded.page.goto(url, wait_until="load")
            yield loaded
        finally:
            context.close()
