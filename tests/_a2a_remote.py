"""Start the a2a-sdk sample server (examples/a2a_sample_agent.py) as a real process on
127.0.0.1; run a caller of a remote agent as a process of its own (tests/_a2a_child.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tooldeck.testing import ProviderSimulator

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "a2a_sample_agent.py"
CHILD = Path(__file__).with_name("_a2a_child.py")


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
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if line.strip() != f"ready http://127.0.0.1:{port}":
            server.kill()
            raise RuntimeError(f"the sample A2A server did not start: {server.stderr.read()}")
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
