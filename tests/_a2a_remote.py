"""Start the a2a-sdk sample server (examples/a2a_sample_agent.py) as a real process on
127.0.0.1; run a caller of a remote agent as a process of its own (tests/_a2a_child.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import ListTasksRequest, TaskState

from tooldeck.testing import ProviderSimulator

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "a2a_sample_agent.py"
CHILD = Path(__file__).with_name("_a2a_child.py")
CUT_PROXY = Path(__file__).with_name("_a2a_cut_proxy.py")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def sample_server(card_rpc_url: str | None = None, token: str | None = None) -> Iterator[str]:
    """Serve the sample agent (needing ``token`` as a bearer token when given); yields its
    base URL (``http://127.0.0.1:PORT``)."""
    port = free_port()
    command = [sys.executable, str(SAMPLE), str(port), *([card_rpc_url] if card_rpc_url else [])]
    env = {**os.environ, **({"A2A_SAMPLE_TOKEN": token} if token else {})}
    with _ready(command, port, env) as url:
        yield url


@contextmanager
def cut_sample(*, refuse_subscribe: bool = False) -> Iterator[str]:
    """The sample agent behind tests/_a2a_cut_proxy.py (its card naming the proxy): every
    streamed answer ends after its first event while the task goes on; yields the proxy's
    URL."""
    port = free_port()
    proxy = f"http://127.0.0.1:{port}"
    with sample_server(card_rpc_url=proxy + "/rpc") as upstream:
        command = [sys.executable, str(CUT_PROXY), str(port), upstream]
        command += ["no-subscribe"] if refuse_subscribe else []
        with _ready(command, port, dict(os.environ)) as url:
            yield url


@contextmanager
def _ready(command: list[str], port: int, env: dict[str, str]) -> Iterator[str]:
    """Run ``command`` until it prints ``ready http://127.0.0.1:PORT``; yield that URL."""
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if line.strip() != f"ready http://127.0.0.1:{port}":
            server.kill()
            raise RuntimeError(f"{command[1]} did not start: {server.stderr.read()}")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def caller_process(
    scenario: str, workdir: Path, url: str, sim: ProviderSimulator, **env: str
) -> dict[str, Any]:
    """Run tests/_a2a_child.py ``scenario`` (``pause``, ``resume``, ``reject``) against the
    remote at ``url``, its model ``sim``, with ``env`` added; the outcome it printed."""
    command = [sys.executable, str(CHILD), scenario, str(workdir), url]
    environment = {**os.environ, **sim.env, **env}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


async def settled_states(url: str, text: str) -> list[int]:
    """``task_states`` once no task is working any more (the remote applies a CancelTask on
    its own schedule: on a loaded machine it may come a few seconds after the caller ended),
    or as they are after 60 s."""
    deadline = time.monotonic() + 60
    while True:
        states = await task_states(url, text)
        settled = states and TaskState.TASK_STATE_WORKING not in states
        if settled or time.monotonic() > deadline:
            return states
        await asyncio.sleep(0.2)


async def task_states(url: str, text: str) -> list[int]:
    """The states of the remote's tasks whose first message was ``text`` (a2a-sdk's client)."""
    async with httpx.AsyncClient() as http:
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(url)
        listed = await client.list_tasks(ListTasksRequest(history_length=20))
    return [
        task.status.state
        for task in listed.tasks
        if any(part.text == text for message in task.history for part in message.parts)
    ]
