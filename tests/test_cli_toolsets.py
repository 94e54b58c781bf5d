"""MCP toolsets at the command line: a module's Toolset goes wherever its tools go.

The toolset is examples/mcp_server.py (tooldeck tools served over MCP stdio), named by a
module as ``registry = ToolRegistry([toolset])``, ``tools = [toolset]`` or the toolset
itself; the model is the loopback OpenAI-compatible server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _mcp import EXAMPLE_SERVER, SLOW, children
from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from tooldeck.tools.mcp import MCPToolset

CALCULATOR = textwrap.dedent(
    f"""
    import sys

    from tooldeck import ToolRegistry, tool
    from tooldeck.tools.mcp import MCPToolset

    toolset = MCPToolset.stdio(
        sys.executable, [{EXAMPLE_SERVER[1]!r}], tools=["add"], connect_timeout={SLOW}
    )
    registry = ToolRegistry([toolset])
    tools = [toolset]


    @tool
    def double(number: int) -> int:
        '''Twice the number.'''
        return 2 * number


    mixed = ToolRegistry([double, toolset])
    """
)
TARGETS = ["calculator.py:registry", "calculator.py:tools", "calculator.py:toolset"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "calculator.py").write_text(CALCULATOR, encoding="utf-8")
    return tmp_path


def tooldeck(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, "TOOLDECK_HOME": str(cwd / "home"), **(env or {})},
        timeout=240,
        check=False,
    )


@pytest.mark.parametrize("target", [*TARGETS, "calculator.py"])
def test_tools_lists_a_toolsets_tools(workdir: Path, target: str) -> None:
    shown = tooldeck(workdir, "tools", target, "--json")
    assert shown.returncode == 0, shown.stderr
    names = [spec["name"] for spec in json.loads(shown.stdout)]
    assert "add" in names
    assert names == (["double", "add"] if target == "calculator.py" else ["add"])


@pytest.mark.parametrize("target", TARGETS)
def test_run_calls_a_toolsets_tool(server: FakeOpenAI, workdir: Path, target: str) -> None:
    call = completion_body(None, [chat_call("call_1", "add", '{"a": 2, "b": 3}')])
    server.reply(Reply(events=completion_chunks(call)))
    server.reply(Reply(events=completion_chunks(completion_body("2 + 3 = 5."))))
    ran = tooldeck(
        workdir, "run", "Add 2 and 3.", "-t", target, "--model", "openai-chat:gpt-test",
        "--base-url", server.url, "--no-display",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "2 + 3 = 5.\n"
    assert [tool["function"]["name"] for tool in server.bodies[0]["tools"]] == ["add"]
    observations = [m["content"] for m in server.bodies[1]["messages"] if m["role"] == "tool"]
    assert observations == ["5"]


def test_the_toolset_option_picks_among_a_toolsets_tools_too(workdir: Path) -> None:
    shown = tooldeck(workdir, "tools", "calculator.py:mixed", "--toolset", "nope")
    assert shown.returncode == 2
    assert "--toolset: unknown toolset(s): 'nope'" in shown.stderr


async def test_mcp_serve_serves_a_toolsets_tools(workdir: Path) -> None:
    before = set(children())
    command = [sys.executable, "-m", "tooldeck.cli", "mcp", "serve", "calculator.py:mixed"]
    served = MCPToolset.stdio(command[0], command[1:], cwd=workdir, connect_timeout=SLOW)
    async with served:
        names = [entry.name for entry in await served.entries()]
        assert names == ["double", "add"]
        assert await served.call("add", {"a": 2, "b": 3}) == "5"
        assert await served.call("double", {"number": 4}) == "8"
    assert set(children()) <= before
