"""Shared by the MCP tests: the servers they start and how to watch them."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

from _npm import NpmUnavailable, npm_bin
from helpers import stop
from tooldeck import ToolRegistry

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "mcp_fixtures"
EXAMPLE_SERVER = [sys.executable, str(ROOT / "examples" / "mcp_server.py")]
RAW_SERVER = [sys.executable, str(FIXTURES / "raw_server.py")]
GROWING_SERVER = [sys.executable, str(FIXTURES / "growing_server.py")]
SLOW = 120.0
"""Seconds to wait for a server on a loaded machine (a Python server imports the SDK)."""


def example_registry() -> ToolRegistry:
    """The registry examples/mcp_server.py serves, imported from the file."""
    spec = importlib.util.spec_from_file_location("mcp_server_example", EXAMPLE_SERVER[1])
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry = module.registry
    assert isinstance(registry, ToolRegistry)
    return registry


def npm_command(name: str) -> str:
    """An npm package's command; the test fails (never skips) if npm cannot install it."""
    try:
        return str(npm_bin(name))
    except NpmUnavailable as error:
        pytest.fail(str(error), pytrace=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def children(besides: Collection[int] = ()) -> list[int]:
    """The ids of this process's live child processes (MCP servers started over stdio), but
    ``besides`` (the children alive before a test: not the test's own)."""
    found = []
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == me and fields[0] != "Z" and int(entry.name) not in besides:
            found.append(int(entry.name))
    return found


def kill_children(keep: Iterable[int] = ()) -> list[int]:
    """Kill this process's children except ``keep``; the ids killed."""
    killed = [pid for pid in children() if pid not in set(keep)]
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    return killed


async def wait_until_no_children(timeout: float = 10.0, besides: Collection[int] = ()) -> list[int]:
    """Wait for this process's MCP servers (but ``besides``) to be gone; the ones still alive."""
    deadline = time.monotonic() + timeout
    while children(besides) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return children(besides)


def stray_tasks() -> list[asyncio.Task[object]]:
    """Tasks of this loop still alive besides the test's own."""
    return [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]


@contextmanager
def http_server(command: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run an HTTP MCP server on ``port`` (loopback) for the block; its URL."""
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            command,
            env={**os.environ, **(env or {})},
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            _wait_for_port(port, process, log)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop(process)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: IO[str]) -> None:
    deadline = time.monotonic() + SLOW
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            pytest.fail(f"the server exited with {process.returncode}: {log.read()[-2000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"nothing listened on port {port} within {SLOW:g} s")
