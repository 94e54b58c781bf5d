"""``tooldeck web`` as a user starts it: it prints the URL with its token, serves the chat on
the tools of a module against a model (the loopback OpenAI server), logs the runs, refuses
requests without the token, says plainly what ``--host 0.0.0.0`` exposes, and stops on
Ctrl-C."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from _agui import new_input, parse
from _openai_server import FakeOpenAI, Reply, completion_body, completion_chunks

TOOLS = textwrap.dedent(
    '''
    from tooldeck import tool


    @tool
    def add_numbers(left: int, right: int) -> int:
        """Add two integers."""
        return left + right


    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"
    '''
)
URL = re.compile(r"http://(\S+):(\d+)/\?token=(\S+)")


@contextmanager
def started(arguments: list[str], home: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``tooldeck web ARGUMENTS`` running; yields it and what it printed up to its URL. It is
    stopped (Ctrl-C, then killed) however the block ends."""
    environment = {**os.environ, "TOOLDECK_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tooldeck.cli", "web", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
    )
    try:
        yield process, _read_until_url(process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        assert process.stdout is not None
        process.stdout.close()


def _read_until_url(process: subprocess.Popen[str], limit_s: float = 60.0) -> str:
    """What the server printed, up to its last line of instructions (read from the pipe's
    file descriptor: a buffered reader would hold lines select() no longer sees)."""
    assert process.stdout is not None
    descriptor = process.stdout.fileno()
    printed = b""
    deadline = time.monotonic() + limit_s
    while b"Ctrl-C stops the server." not in printed:
        left = deadline - time.monotonic()
        if left <= 0 or process.poll() is not None:
            raise AssertionError(f"tooldeck web printed no URL:\n{printed.decode()}")
        ready, _, _ = select.select([descriptor], [], [], left)
        if ready:
            printed += os.read(descriptor, 65536)
    return printed.decode()


def url_of(printed: str) -> tuple[str, str, str]:
    """The host, port and token of the URL the server printed."""
    match = URL.search(printed)
    assert match is not None, printed
    host, port, token = match.groups()
    return host, port, token


def test_tooldeck_web_serves_the_chat_on_a_module_s_tools(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "my_tools.py").write_text(TOOLS)
    server.reply(Reply(events=completion_chunks(completion_body("Hello from the model."))))
    arguments = [
        "--tools",
        str(tmp_path / "my_tools.py"),
        "--model",
        "openai-chat:gpt-4.1-mini",
        "--base-url",
        server.url,
        "--port",
        "0",
    ]
    with started(arguments, tmp_path / "home") as (process, printed):
        host, port, token = url_of(printed)
        assert host == "127.0.0.1"
        assert (
            "chat with openai-chat:gpt-4.1-mini and its tools (add_numbers, delete_file)" in printed
        )
        assert "Only this machine can connect." in printed
        root = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=root) as client:
            assert client.get("/tools").status_code == 403
            entered = client.get(f"/?token={token}")
            assert entered.status_code == 303
            assert "delete_file" in client.get("/tools").text
            response = client.post(
                "/agui/",
                json=new_input("cli", "Say hello."),
                headers={"accept": "text/event-stream"},
            )
            events = parse(response.text)
            assert events[-1].result == "Hello from the model."
            assert "Say hello." in client.get("/runs").text  # the run was logged
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130


def test_tooldeck_web_alone_serves_the_run_log_and_the_conversations(tmp_path: Path) -> None:
    with started(["--port", "0"], tmp_path / "home") as (_, printed):
        assert "the run log and the conversations (no --tools: no chat)" in printed
        _, port, token = url_of(printed)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert client.get(f"/?token={token}", follow_redirects=True).url.path == "/runs"
            assert client.post("/agui/", json={}).status_code == 404


def test_every_interface_is_said_plainly(tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text(TOOLS)
    arguments = ["--tools", str(tmp_path / "my_tools.py"), "--host", "0.0.0.0", "--port", "0"]
    with started(arguments, tmp_path / "home") as (_, printed):
        assert "warning: listening on every network interface (0.0.0.0)" in printed
        assert "chat with the agent and run its tools (add_numbers, delete_file)" in printed
        assert "the token and everything shown cross the network unencrypted" in printed
        assert "Only this machine can connect." not in printed


def test_a_port_in_use_is_one_line_and_status_1(tmp_path: Path) -> None:
    with started(["--port", "0"], tmp_path / "home") as (_, printed):
        _, port, _ = url_of(printed)
        done = subprocess.run(
            [sys.executable, "-m", "tooldeck.cli", "web", "--port", port],
            capture_output=True,
            text=True,
            env={**os.environ, "TOOLDECK_HOME": str(tmp_path / "home")},
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.startswith(f"tooldeck: error: cannot listen on 127.0.0.1:{port}: ")
    assert "give another port with --port N" in done.stderr
