"""Headless Chromium from Debian's ``chromium`` package, driven by Playwright for Python.

Playwright never downloads a browser here: it launches the system one (``executable_path``).
When ``/usr/bin/chromium`` is missing the tests install it with ``apt-get install -y
chromium`` if they can (as root, as the suite installs its npm packages); a machine where
that fails fails the browser tests with apt's own words: they are never skipped.
Screenshots go to ``test-artifacts/web/`` at the repository root (ignored by git).
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "web"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""What the browser starts with: no sandbox (root in a container), and none of the calls
home that a closed network refuses."""


class BrowserUnavailable(RuntimeError):
    """Chromium is not installed and could not be; the message says why."""


@functools.cache
def chromium() -> str:
    """The system Chromium's path, installed with apt-get first if it is missing."""
    os.environ["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
    if CHROMIUM.exists():
        return str(CHROMIUM)
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise BrowserUnavailable(
            f"no {CHROMIUM}: the browser tests use Debian's chromium package; install it "
            "(apt-get install chromium) or run the tests as root on Debian, which installs it"
        )
    with Path("/tmp/tooldeck-chromium.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be installing it
        if not CHROMIUM.exists():
            _apt(apt, "update")
            _apt(apt, "install", "-y", "--no-install-recommends", "chromium", "fonts-liberation")
    if not CHROMIUM.exists():
        raise BrowserUnavailable(f"apt-get installed chromium, but there is no {CHROMIUM}")
    return str(CHROMIUM)


def _apt(apt: str, *arguments: str) -> None:
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        done = subprocess.run(
            [apt, "-q", *arguments],
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
            env=environment,
        )
    except subprocess.TimeoutExpired as error:
        raise BrowserUnavailable(f"apt-get {arguments[0]} did not finish in 20 minutes") from error
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-3000:]
        raise BrowserUnavailable(f"apt-get {' '.join(arguments)} failed:\n{output}")


SAVED: list[Path] = []
"""The screenshots this test run saved (the run's summary names their folder)."""


def artifacts() -> Path:
    """Where the screenshots go (created)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
