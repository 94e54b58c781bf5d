"""Start the a2a-sdk sample server (examples/a2a_sample_agent.py) as a real process on
127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "a2a_sample_agent.py"


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
