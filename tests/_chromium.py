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
from pathlib import Path

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
