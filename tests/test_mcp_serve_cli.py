"""``tooldeck mcp serve`` at the command line: what its stderr says when a tool fails.

A client speaks to it over stdio (JSON-RPC lines, as an MCP client writes them); an
ordinary tool failure is one line on stderr, the traceback only with ``-v``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _mcp import SLOW
from _promise_doors import Shop
from tooldeck.testing import ProviderSimulator

TOOLS = textwrap.dedent(
    '''
    from tooldeck import tool


    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("the secret detail")
    '''
)
REQUESTS = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "broken"}},
]


def serve_one_failing_call(tmp_path: Path, *extra: str) -> tuple[dict[str, Any], str]:
    """The answer to a call of the broken tool, and the server's stderr."""
    (tmp_path / "failing.py").write_text(TOOLS, encoding="utf-8")
    argv = [sys.executable, "-m", "tooldeck.cli", "mcp", "serve", "failing.py", *extra]
    server = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert server.stdin is not None
        assert server.stdout is not None
        for request in REQUESTS:
            server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        answer: dict[str, Any] = {}
        while answer.get("id") != 2:
            line = server.stdout.readline()
            assert line, "the server ended without answering the call"
            answer = json.loads(line)
        server.stdin.close()
        server.wait(timeout=SLOW)
        assert server.stderr is not None
        errors = server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return answer, errors


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_a_tool_error_is_one_line_on_stderr_and_its_traceback_only_with_v(
    tmp_path: Path, verbose: bool
) -> None:
    answer, errors = serve_one_failing_call(tmp_path, *(["-v"] if verbose else []))
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"].startswith("error[tool_error]: ")
    lines = errors.splitlines()
    assert lines[0] == "tooldeck mcp serve: 'failing' on stdio; tools: broken"
    if verbose:
        assert "Traceback (most recent call last):" in errors
        assert "ValueError: the secret detail" in errors
        return
    assert lines[1:] == [
        "tooldeck mcp serve: tool 'broken' failed (MCP request 2): ValueError (-v shows its "
        "exception and traceback)"
    ]


GUARDED = textwrap.dedent(
    '''
    from tooldeck import tool
    from tooldeck.run.guardrails import GuardrailResult


    def polite(ctx, text):
        return GuardrailResult.passed()


    def judged(ctx, arguments):
        return GuardrailResult.passed()


    @tool
    def echo(text: str) -> str:
        """Say the text back."""
        return text


    input_guardrails = [polite]
    output_guardrails = [polite]
    tool_guardrails = [judged]
    '''
)


def serve_until_eof(tmp_path: Path, module: str) -> str:
    """The stderr of ``tooldeck mcp serve module`` whose client at once closes stdin."""
    argv = [sys.executable, "-m", "tooldeck.cli", "mcp", "serve", module]
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=tmp_path, timeout=SLOW
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_module_whose_input_and_output_guardrails_cannot_apply_is_refused_naming_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "guarded.py").write_text(GUARDED, encoding="utf-8")
    argv = [sys.executable, "-m", "tooldeck.cli", "mcp", "serve", "guarded.py"]
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=tmp_path, timeout=SLOW
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "tooldeck mcp serve: error: 'guarded.py' defines input_guardrails, output_guardrails, "
        "which tooldeck mcp serve cannot apply (a served call is one call, not a conversation: "
        "no prompt or answer to judge, no agent to hand it to, no untrusted content read "
        "before it); give it a module that does not define them (import the tools there and "
        "list them in __all__) (see tooldeck mcp serve --help)"
    ]


def test_a_module_with_only_tool_guardrails_serves_without_a_warning(tmp_path: Path) -> None:
    served = GUARDED.replace("input_guardrails = [polite]\n", "").replace(
        "output_guardrails = [polite]\n", ""
    )
    (tmp_path / "guarded.py").write_text(served, encoding="utf-8")

    errors = serve_until_eof(tmp_path, "guarded.py")

    assert "warning" not in errors
    assert "tooldeck mcp serve: 'guarded' on stdio; tools: echo" in errors


def _answer(server: subprocess.Popen[str], request_id: int) -> dict[str, Any]:
    """Read the server's stdout until the answer to ``request_id``."""
    assert server.stdout is not None
    answer: dict[str, Any] = {}
    while answer.get("id") != request_id:
        line = server.stdout.readline()
        assert line, "the server ended without answering"
        answer = json.loads(line)
    return answer


def _until(path: Path, server: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + SLOW
    while not path.exists():
        assert server.poll() is None, "the server ended"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def test_a_client_that_cancels_a_call_tells_the_sync_tool_and_the_server_goes_on(
    tmp_path: Path, provider: Callable[..., ProviderSimulator]
) -> None:
    shop = Shop(tmp_path, provider([]))  # the refund polls ctx.cancelled until it is told
    argv = [sys.executable, "-m", "tooldeck.cli", "mcp", "serve", "shop.py"]
    server = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=shop.env("refund-until-cancelled"),
    )
    try:
        assert server.stdin is not None
        refund = {"name": "refund_order", "arguments": {"order_id": "A1"}}
        for request in [*REQUESTS[:2], {**REQUESTS[2], "params": refund}]:
            server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        _until(shop.hanging, server)  # the refund runs, in a worker thread
        cancel = {"requestId": 2, "reason": "the person pressed stop"}
        server.stdin.write(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
            + "\n"
        )
        server.stdin.flush()
        _until(tmp_path / "effects.told", server)  # the tool was told
        lookup = {"name": "lookup_order", "arguments": {"order_id": "A1"}}
        request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": lookup}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        answer = _answer(server, 3)
        server.stdin.close()
        server.wait(timeout=SLOW)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for stream in (server.stdout, server.stderr):
            assert stream is not None
            stream.close()

    assert answer["result"]["content"][0]["text"] == "order A1: paid, not refunded"
    assert len(shop.refunds()) == 1  # it ran once, and stopped when told
    assert server.returncode == 0
