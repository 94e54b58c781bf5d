"""``tooldeck mcp serve`` at the command line: what its stderr says when a tool fails.

A client speaks to it over stdio (JSON-RPC lines, as an MCP client writes them); an
ordinary tool failure is one line on stderr, the traceback only with ``-v``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _mcp import SLOW

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
