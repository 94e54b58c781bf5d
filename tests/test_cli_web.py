"""``tooldeck web`` as a user starts it: it prints the URL with its token, serves the chat on
the tools of a module against a model (the loopback OpenAI server), logs the runs, refuses
requests without the token, says plainly what ``--host 0.0.0.0`` exposes, and stops on
Ctrl-C; a module's MCP toolset (examples/mcp_server.py over stdio) goes there too."""

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
from ag_ui.core import TextMessageContentEvent, ToolCallResultEvent

from _agui import new_input, of_type, parse
from _mcp import EXAMPLE_SERVER, SLOW
from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks

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
CALCULATOR = textwrap.dedent(
    f"""
    import sys

    from tooldeck import ToolRegistry
    from tooldeck.tools.mcp import MCPToolset

    toolset = MCPToolset.stdio(
        sys.executable, [{EXAMPLE_SERVER[1]!r}], tools=["add"], connect_timeout={SLOW}
    )
    registry = ToolRegistry([toolset])
    """
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


def test_tooldeck_web_calls_an_mcp_toolsets_tool_and_ctrl_c_stops_its_server(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "calculator.py").write_text(CALCULATOR)
    call = chat_call("call_1", "add", '{"a": 2, "b": 3}')
    server.reply(
        Reply(events=completion_chunks(completion_body(None, [call]))),
        Reply(events=completion_chunks(completion_body("2 plus 3 is 5."))),
    )
    target = f"{tmp_path / 'calculator.py'}:registry"
    arguments = ["-t", target, "-m", "openai-chat:gpt-test", "--base-url", server.url]
    with started([*arguments, "--port", "0"], tmp_path / "home") as (process, printed):
        assert "its tools (add)" in printed
        _, port, token = url_of(printed)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"authorization": f"Bearer {token}", "accept": "text/event-stream"},
            timeout=SLOW,
        ) as client:
            response = client.post("/agui/", json=new_input("sums", "2 + 3?"))
        events = parse(response.text)
        (result,) = of_type(events, ToolCallResultEvent)
        assert result.content == "5"
        text = "".join(event.delta for event in of_type(events, TextMessageContentEvent))
        assert text == "2 plus 3 is 5."
        sent_back = server.bodies[1]["messages"][-1]
        assert (sent_back["role"], sent_back["content"]) == ("tool", "5")
        mcp_servers = children_of(process.pid)
        assert mcp_servers, "the MCP server the call started runs under tooldeck web"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
    deadline = time.monotonic() + 30
    while any(map(alive, mcp_servers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in mcp_servers if alive(pid)] == []


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    return [child for child in _processes() if _parent(child) == pid and alive(child)]


def alive(pid: int) -> bool:
    """The process runs (a zombie, or a pid gone, does not)."""
    stat = _stat(pid)
    return bool(stat) and stat[0] != "Z"


def _processes() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _parent(pid: int) -> int:
    stat = _stat(pid)
    return int(stat[1]) if stat else 0


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command's name (state, parent, ...)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []
