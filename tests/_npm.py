"""The npm packages the tests run against, installed once per machine: the MCP servers and
the Inspector (tests/npm), the official AG-UI client (tests/npm_agui), the official A2A
client (tests/npm_a2a).

``npm ci`` installs exactly the versions in a folder's package-lock.json into a cache folder
outside the repository (``~/.cache/tooldeck-npm/<hash of the lock file>``, or
``$TOOLDECK_NPM_CACHE``); later runs reuse it. A machine without npm, or an install that
fails, fails the tests that need it with npm's own words: they are never skipped.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

NPM_DIR = Path(__file__).resolve().parent / "npm"
AGUI_DIR = Path(__file__).resolve().parent / "npm_agui"
A2A_DIR = Path(__file__).resolve().parent / "npm_a2a"
_FILES = ("package.json", "package-lock.json")


class NpmUnavailable(RuntimeError):
    """The npm packages could not be installed; the message says why."""


def npm_bin(name: str, folder: Path = NPM_DIR) -> Path:
    """The path of an installed package's command (``node_modules/.bin/<name>``)."""
    path = installed(folder) / "node_modules" / ".bin" / name
    if not path.exists():
        raise NpmUnavailable(
            f"npm ci ran but there is no {path}; is {name!r} in tests/{folder.name}?"
        )
    return path


@functools.cache
def installed(folder: Path = NPM_DIR) -> Path:
    """The folder holding the node_modules of ``folder``'s packages, installed with
    ``npm ci`` if not yet there."""
    digest = hashlib.sha256(b"".join((folder / f).read_bytes() for f in _FILES)).hexdigest()
    base = Path(os.environ.get("TOOLDECK_NPM_CACHE") or Path.home() / ".cache" / "tooldeck-npm")
    target = base / digest[:16]
    done = target / ".installed"
    if done.exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise NpmUnavailable(
            f"npm is not on PATH: the tests run npm packages (tests/{folder.name}); install "
            "Node.js 20+ with npm"
        )
    target.mkdir(parents=True, exist_ok=True)
    with (base / f"{digest[:16]}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be installing the same
        if not done.exists():
            _npm_ci(npm, folder, target)
            done.touch()
    return target


def _npm_ci(npm: str, folder: Path, target: Path) -> None:
    for name in _FILES:
        shutil.copyfile(folder / name, target / name)
    command = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(
            command, cwd=target, capture_output=True, text=True, timeout=900, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise NpmUnavailable(f"npm ci in {target} did not finish in 15 minutes") from error
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-3000:]
        raise NpmUnavailable(f"npm ci failed in {target} (exit {done.returncode}):\n{output}")
