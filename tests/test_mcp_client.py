"""MCPToolset against real servers in subprocesses: tooldeck's own (examples/mcp_server.py)
and a hand-written one that misbehaves on purpose (tests/mcp_fixtures/raw_server.py)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _mcp import EXAMPLE_SERVER, GROWING_SERVER, RAW_SERVER, SLOW, example_registry
from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, ScriptedModel, ToolRegistry, tool
from tooldeck.run.events import ModelRequest
from tooldeck.tools.mcp import MCPConnectionError, MCPToolset

pytestmark = pytest.mark.filterwarnings("error")


@tool(toolsets=["local"])
def double(n: int) -> int:
    """Double a number."""
    return 2 * n


def raw(**options: Any) -> MCPToolset:
    return MCPToolset.stdio(RAW_SERVER[0], RAW_SERVER[1:], connect_timeout=SLOW, **options)


async def test_tooldeck_server_round_trip_keeps_schemas_and_request_ids() -> None:
    registry = example_registry()
    toolset = MCPToolset.stdio(EXAMPLE_SERVER[0], EXAMPLE_SERVER[1:], connect_timeout=SLOW)
    model = ScriptedModel(
        [
            calls(call("add", "c1", a=2, b=40), call("whoami", "c2")),
            answer("42"),
        ]
    )
    async with Agent(model, [toolset]) as agent:
        result = await agent.run("What is 2 + 40?")
        served = {entry.name: entry.spec for entry in await toolset.entries()}
    assert list(served) == ["add", "convert_temperature", "whoami"]  # no approval tool
    for name, spec in served.items():
        local = registry.get(name)
        assert local is not None
        assert spec.parameters == local.spec.parameters
        assert spec.description == local.spec.description
    added, whoami = tool_messages(result.messages)
    assert added == "42"
    assert whoami.startswith("request ")
    assert whoami.removeprefix("request ").isdigit()  # the MCP request's id, not c2


async def test_invalid_call_is_refused_before_it_reaches_the_server() -> None:
    model = ScriptedModel(
        [calls(call("echo", "c1", text=5)), calls(call("count", "c2")), answer("done")]
    )
    async with Agent(model, [raw()]) as agent:
        result = await agent.run("Echo five.")
    refused, count = tool_messages(result.messages)
    assert refused == (
        "error[invalid_arguments]: the arguments for 'echo' do not match its schema:\n"
        "- text: 5 is not of type 'string'"
    )
    assert count == "0"  # the server got no tools/call before this one


async def test_prefix_filters_and_toolsets_pick_and_rename_tools() -> None:
    by_name = raw(prefix="raw", tools=["echo", "count"], toolsets=["remote"])
    by_rule = raw(tools=lambda spec: spec.name.startswith("c"))
    registry = ToolRegistry([double])
    registry.register(by_name)
    async with by_name, by_rule:
        assert [entry.name for entry in await by_name.entries()] == ["raw_echo", "raw_count"]
        assert [entry.name for entry in await by_rule.entries()] == ["count", "crash"]
        assert (await registry.load_view(["remote"])).names == ("raw_echo", "raw_count")
        assert (await registry.load_view()).names == ("double", "raw_echo", "raw_count")
        assert await by_name.call("echo", {"text": "hi"}) == "hi"


async def test_error_result_garbage_and_unknown_tool_are_observations() -> None:
    model = ScriptedModel(
        [
            calls(call("fail", "c1"), call("bad_result", "c2")),
            calls(call("echo", "c3", text="still here")),
            answer("ok"),
        ]
    )
    async with Agent(model, [raw()]) as agent:
        result = await agent.run("Try them.")
    assert tool_messages(result.messages) == [
        "error[tool_error]: the disk is full",
        "error[tool_error]: the MCP server's reply is not a valid MCP result; the call may or "
        "may not have run",
        "still here",
    ]
    assert result.tool_trace[1].error is not None  # the host keeps the real exception
    assert result.tool_trace[1].error.__cause__ is not None


async def test_a_call_that_hangs_past_its_timeout_is_tool_timeout_and_the_run_goes_on() -> None:
    model = ScriptedModel(
        [calls(call("silent", "c1")), calls(call("echo", "c2", text="next")), answer("ok")]
    )
    async with Agent(model, [raw(timeout=0.5)]) as agent:
        result = await agent.run("Wait.")
    assert tool_messages(result.messages) == [
        "error[tool_timeout]: 'silent' did not finish within 0.5 s and was stopped; "
        "try smaller inputs or another approach",
        "next",
    ]


async def test_a_server_that_dies_mid_call_is_an_observation_and_is_restarted() -> None:
    model = ScriptedModel(
        [
            calls(call("echo", "c1", text="a")),
            calls(call("crash", "c2")),
            calls(call("count", "c3")),
            answer("ok"),
        ]
    )
    async with Agent(model, [raw()]) as agent:
        result = await agent.run("Crash it.")
    echoed, crashed, count = tool_messages(result.messages)
    assert echoed == "a"
    assert crashed.startswith("error[tool_error]: the MCP server's connection closed")
    assert crashed.endswith("the server may have crashed, and the call may or may not have run")
    assert count == "0"  # a new server process answered


async def test_a_server_that_cannot_be_restarted_is_an_observation(tmp_path: Path) -> None:
    toolset = raw(env={"RAW_START_ONCE": str(tmp_path / "started")})
    model = ScriptedModel([calls(call("crash", "c1")), calls(call("count", "c2")), answer("ok")])
    async with Agent(model, [toolset]) as agent:
        result = await agent.run("Crash it.")
    crashed, restart = tool_messages(result.messages)
    assert crashed.startswith("error[tool_error]: the MCP server's connection closed")
    assert restart.startswith(
        "error[tool_error]: the MCP server is not running and could not be restarted: the MCP "
        f"server '{shlex.join(RAW_SERVER)}' stopped before it was ready"
    )


async def test_tools_a_model_cannot_take_are_mapped_or_left_out_with_the_reason() -> None:
    async with raw(
        env={"RAW_ODD_TOOLS": "1"}, tools=lambda spec: "echo" not in spec.name
    ) as toolset:
        names = [entry.name for entry in await toolset.entries()]
        skipped = toolset.skipped
        assert await toolset.call("odd.name", {}) == "odd.name"
    assert "odd_name" in names  # from "odd.name"
    assert "x" * 70 not in names
    assert skipped["odd_name"] == "the tool name 'odd_name' is taken by another tool"
    assert skipped["x" * 70] == f"the tool name {'x' * 70!r} is longer than 64 characters"
    assert skipped["bad_schema"].startswith(
        "its inputSchema is not a valid JSON Schema: 'nonsense' is not valid"
    )


async def test_list_changed_notification_refreshes_tools_for_the_next_turn() -> None:
    model = ScriptedModel([calls(call("grow", "c1")), calls(call("extra_7", "c2")), answer("ok")])
    toolset = raw()
    async with Agent(model, [toolset]) as agent:
        events = [event async for event in agent.stream("Grow.")]
    first, second = (model.requests[0].tools, model.requests[1].tools)
    assert "extra_7" not in [spec.name for spec in first]
    assert "extra_7" in [spec.name for spec in second]
    requests = [event for event in events if isinstance(event, ModelRequest)]
    assert [spec.name for spec in requests[1].tools][-1] == "extra_7"  # the run's record
    assert toolset.changes_announced == 1


async def test_list_changed_reaches_a_2026_server_client_through_a_subscription() -> None:
    toolset = MCPToolset.stdio(GROWING_SERVER[0], GROWING_SERVER[1:], connect_timeout=SLOW)
    model = ScriptedModel([calls(call("grow", "c1")), calls(call("extra_1", "c2")), answer("ok")])
    async with Agent(model, [toolset]) as agent:
        result = await agent.run("Grow.")
    # An SDK server wraps a plain return value as structured content: {"result": ...}
    assert tool_messages(result.messages) == ['{"result": "added extra_1"}', '{"result": "extra"}']
    assert toolset.changes_announced == 1


async def test_a_server_that_cannot_start_raises_naming_the_command() -> None:
    missing = MCPToolset.stdio("no-such-mcp-server", ["--stdio"])
    with pytest.raises(MCPConnectionError) as raised:
        await Agent(ScriptedModel([answer("never")]), [missing]).run("Hi")
    assert str(raised.value) == (
        "cannot start the MCP server 'no-such-mcp-server --stdio': No such file or directory "
        "(command 'no-such-mcp-server')"
    )
    exits = MCPToolset.stdio(sys.executable, ["-c", "print('not MCP')"], connect_timeout=SLOW)
    with pytest.raises(
        MCPConnectionError, match=r"stopped before it was ready \(Connection closed"
    ):
        await exits.entries()


async def test_http_refused_raises_naming_the_url() -> None:
    toolset = MCPToolset.http("http://127.0.0.1:9/mcp", connect_timeout=SLOW)
    with pytest.raises(MCPConnectionError) as raised:
        await toolset.entries()
    assert str(raised.value).startswith(
        "cannot connect to the MCP server at 'http://127.0.0.1:9/mcp'"
    )


def test_bad_options_are_refused_with_what_to_write() -> None:
    with pytest.raises(TypeError, match="args must be a list of strings, got the string 'a b'"):
        MCPToolset.stdio("server", "a b")
    with pytest.raises(ValueError, match="starts with http:// or https://, got 'localhost:8'"):
        MCPToolset.http("localhost:8")
    with pytest.raises(TypeError, match="tools= takes a list of tool names or a predicate"):
        MCPToolset.stdio("server", tools="echo")
    with pytest.raises(Exception, match="timeout must be positive, got -1"):
        MCPToolset.stdio("server", timeout=-1)


def test_results_keep_every_content_kind() -> None:
    from mcp_types import (
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    from tooldeck.tools.mcp._content import result_text

    structured = CallToolResult(
        content=[
            TextContent(text='{"t": 1}'),
            ImageContent(data="aGVsbG8=", mime_type="image/png"),
        ],
        structured_content={"t": 1},
    )
    assert result_text(structured) == '{"t": 1}\n[image: image/png, 5 bytes]'
    mixed = CallToolResult(
        content=[
            TextContent(text="Here:"),
            ResourceLink(name="notes", uri="file:///notes.md", mime_type="text/markdown"),
            EmbeddedResource(
                resource=TextResourceContents(uri="memo://1", text="é", mime_type="text/plain")
            ),
        ]
    )
    assert result_text(mixed) == (
        "Here:\n[resource link: notes <file:///notes.md>, text/markdown]\n"
        "[resource <memo://1>: text/plain, 2 bytes]\né"
    )
    assert json.loads(result_text(CallToolResult(content=[], structured_content=[1, 2]))) == [1, 2]


def test_the_sdk_loads_only_when_a_toolset_connects() -> None:
    code = (
        "import sys; from tooldeck.tools.mcp import MCPToolset; "
        "MCPToolset.stdio('server'); MCPToolset.http('http://127.0.0.1:1/mcp'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'anyio')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
