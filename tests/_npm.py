"""The npm packages the MCP tests run against (tests/npm), installed once per machine.

``npm ci`` installs exactly the versions in tests/npm/package-lock.json into a cache folder
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
_FILES = ("package.json", "package-lock.json")


class NpmUnavailable(RuntimeError):
    """The npm packages could not be installed; the message says why."""


def npm_bin(name: str) -> Path:
    """The path of an installed package's command (``node_modules/.bin/<name>``)."""
    path = installed() / "node_modules" / ".bin" / name
    if not path.exists():
        raise NpmUnavailable(f"npm ci ran but there is no {path}; is {name!r} in tests/npm?")
    return path


@functools.cache
def installed() -> Path:
    """The folder holding node_modules, installed with ``npm ci`` if not yet there."""
    digest = hashlib.sha256(b"".join((NPM_DIR / f).read_bytes() for f in _FILES)).hexdigest()
    base = Path(os.environ.get("TOOLDECK_NPM_CACHE") or Path.home() / ".cache" / "tooldeck-npm")
    target = base / digest[:16]
    done = target / ".installed"
    if done.exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise NpmUnavailable(
            "npm is not on PATH: the MCP tests run npm packages (tests/npm); install Node.js "
            "20+ with npm"
        )
    target.mkdir(parents=True, exist_ok=True)
    with (base / f"{digest[:16]}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be installing the same
        if not done.exists():
            _npm_ci(npm, target)
            done.touch()
    return target


def _npm_ci(npm: str, target: Path) -> None:
    for name in _FILES:
        shutil.copyfile(NPM_DIR / name, target / name)
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
