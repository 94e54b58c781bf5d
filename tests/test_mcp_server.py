"""A tooldeck registry served over MCP: checked in-process with the SDK's own client, with
the official MCP Inspector (CLI mode, npm) over stdio and HTTP, and through the
``tooldeck mcp serve`` command."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from typing import Any

import pytest
from mcp import Client

from _mcp import EXAMPLE_SERVER, ROOT, SLOW, example_registry, free_port, http_server, npm_command
from tooldeck import RunContext, ToolRegistry, external_tool, tool
from tooldeck.serve.mcp import mcp_server
from tooldeck.tools.mcp import MCPToolset

pytestmark = pytest.mark.filterwarnings("error")

released = threading.Event()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def broken() -> str:
    """Always fails."""
    raise ValueError("the secret detail")


@tool
def who(ctx: RunContext[str]) -> str:
    """Say which request this is and for whom."""
    return f"{ctx.call_id} for {ctx.deps}"


@tool(timeout=0.2)
async def slow() -> str:
    """Takes too long."""
    await asyncio.sleep(30)
    return "late"


@tool
def wait_for_release() -> str:
    """A sync tool that blocks until release() runs."""
    return "released" if released.wait(timeout=SLOW) else "never released"


@tool
async def release() -> str:
    """Release wait_for_release."""
    released.set()
    return "done"


@tool(requires_approval=True)
def delete_all() -> str:
    """Needs a person's approval."""
    return "deleted"


locate = external_tool(
    "locate",
    "Runs in the application.",
    {"type": "object", "properties": {}, "additionalProperties": False},
)
registry = ToolRegistry([add, broken, who, slow, wait_for_release, release, delete_all, locate])


async def call_text(client: Client, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    result = await client.call_tool(name, arguments)
    (block,) = result.content
    assert block.type == "text"
    return result.is_error, block.text


async def test_tools_are_listed_with_the_schema_a_model_sees() -> None:
    async with Client(mcp_server(registry, name="tests")) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert list(listed) == ["add", "broken", "who", "slow", "wait_for_release", "release"]
    for name, served in listed.items():
        entry = registry.get(name)
        assert entry is not None
        assert served.input_schema == entry.spec.parameters
        assert served.description == entry.spec.description
        assert served.output_schema is None


async def test_approval_tools_only_when_allowed_and_external_tools_never() -> None:
    server = mcp_server(registry, name="tests", allow_approval_tools=True)
    async with Client(server) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert await call_text(client, "delete_all", {}) == (False, "deleted")
    assert "delete_all" in names
    assert "locate" not in names


async def test_calls_are_validated_and_fail_with_tooldeck_observations() -> None:
    async with Client(mcp_server(registry, name="tests", deps="ops")) as client:
        assert await call_text(client, "add", {"a": 2, "b": 40}) == (False, "42")
        assert await call_text(client, "add", {"a": 2, "b": 40, "c": 1}) == (
            True,
            "error[invalid_arguments]: the arguments for 'add' do not match its schema:\n"
            "- c: unexpected argument (the tool takes: a, b)",
        )
        assert await call_text(client, "broken", {}) == (
            True,
            "error[tool_error]: the tool 'broken' failed while running; try other arguments "
            "or another way",
        )
        assert await call_text(client, "slow", {}) == (
            True,
            "error[tool_timeout]: 'slow' did not finish within 0.2 s and was stopped; try "
            "smaller inputs or another approach",
        )
        first = await call_text(client, "who", {})
        second = await call_text(client, "who", {})
    ids = []
    for failed, text in (first, second):
        assert not failed
        request_id, _, deps = text.partition(" for ")
        assert deps == "ops"
        assert request_id.isdigit()  # the JSON-RPC request id
        ids.append(int(request_id))
    assert ids[0] < ids[1]


async def test_exception_text_only_with_include_error_details(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = mcp_server(registry, name="tests", include_error_details=True)
    async with Client(server) as client:
        assert await call_text(client, "broken", {}) == (
            True,
            "error[tool_error]: ValueError: the secret detail",
        )
    (record,) = [r for r in caplog.records if r.name == "tooldeck.serve.mcp"]
    assert record.getMessage().startswith("tool 'broken' failed (MCP request ")
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "the secret detail"  # the server's log keeps it


async def test_a_sync_tool_does_not_block_the_server() -> None:
    released.clear()
    async with Client(mcp_server(registry, name="tests")) as client:
        waiting = asyncio.create_task(call_text(client, "wait_for_release", {}))
        await asyncio.sleep(0.1)
        assert await call_text(client, "release", {}) == (False, "done")
        assert await asyncio.wait_for(waiting, SLOW) == (False, "released")


def inspector(*arguments: str, status: int = 0) -> Any:
    """The Inspector CLI's JSON answer (it exits with 5 when a tool answers isError)."""
    done = subprocess.run(
        [npm_command("mcp-inspector"), "--cli", *arguments],
        capture_output=True,
        text=True,
        timeout=SLOW,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == status, done.stderr[-3000:]
    return json.loads(done.stdout[done.stdout.index("{") :])


def test_inspector_lists_and_calls_over_stdio() -> None:
    listed = inspector(*EXAMPLE_SERVER, "--method", "tools/list")
    expected = {
        name: entry.spec.parameters for name, entry in example_registry().view().dispatch.items()
    }
    assert {t["name"]: t["inputSchema"] for t in listed["tools"]} == {
        name: schema for name, schema in expected.items() if name != "delete_everything"
    }
    called = inspector(
        *EXAMPLE_SERVER, "--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2", "b=40"
    )
    assert called["content"] == [{"type": "text", "text": "42"}]
    assert called.get("isError", False) is False


def test_inspector_lists_and_calls_over_http() -> None:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "tooldeck.cli",
        "mcp",
        "serve",
        "examples.mcp_server:registry",
        "--http",
        f"127.0.0.1:{port}",
    ]
    with http_server(command, port) as url:
        listed = inspector(url, "--transport", "http", "--method", "tools/list")
        called = inspector(
            url, "--transport", "http", "--method", "tools/call", "--tool-name",
            "convert_temperature", "--tool-arg", "celsius=100", "to=kelvin",
        )  # fmt: skip
        refused = inspector(
            url, "--transport", "http", "--method", "tools/call", "--tool-name", "add",
            "--tool-arg", "a=2", status=5,
        )  # fmt: skip
    assert [t["name"] for t in listed["tools"]] == ["add", "convert_temperature", "whoami"]
    assert called["content"] == [{"type": "text", "text": "373.15"}]
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == (
        "error[invalid_arguments]: the arguments for 'add' do not match its schema:\n"
        "- b: missing (required)"
    )


async def test_tooldeck_client_and_cli_server_round_trip_over_http() -> None:
    port = free_port()
    command = [
        sys.executable, "-m", "tooldeck.cli", "mcp", "serve", "examples.mcp_server:registry",
        "--http", f"127.0.0.1:{port}", "--allow-approval-tools", "--name", "example",
    ]  # fmt: skip
    with http_server(command, port) as url:
        async with MCPToolset.http(url, connect_timeout=SLOW) as toolset:
            names = [entry.name for entry in await toolset.entries()]
            assert await toolset.call("add", {"a": 1, "b": 2}) == "3"
    assert names == ["add", "convert_temperature", "whoami", "delete_everything"]


def test_cli_says_what_it_serves_and_refuses_bad_addresses() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", "mcp", "serve", "examples.mcp_server:registry"],
        input="",
        capture_output=True,
        text=True,
        timeout=SLOW,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout is the protocol's channel
    assert done.stderr.splitlines()[:2] == [
        "tooldeck mcp serve: 'examples.mcp_server' on stdio; tools: add, convert_temperature, "
        "whoami",
        "  not served: delete_everything: requires approval; serve it with "
        "--allow-approval-tools (allow_approval_tools=True) if the MCP client asks a person",
    ]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "tooldeck.cli",
            "mcp",
            "serve",
            "tooldeck.cli.demo",
            "--http",
            "8000",
        ],
        capture_output=True,
        text=True,
        timeout=SLOW,
        check=False,
    )
    assert bad.returncode == 1
    assert bad.stderr == (
        "tooldeck: error: --http takes HOST:PORT, e.g. 127.0.0.1:8000; got '8000'\n"
    )
