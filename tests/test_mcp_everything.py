"""MCPToolset against the reference server nobody here wrote:
``@modelcontextprotocol/server-everything`` (npm, pinned in tests/npm), over stdio and over
streamable HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from _mcp import SLOW, children, free_port, http_server, kill_children, npm_command
from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, ScriptedModel
from tooldeck.run.events import ToolCallStarted
from tooldeck.tools.mcp import MCPToolset

pytestmark = pytest.mark.filterwarnings("error")

ALWAYS = ["echo", "get-sum", "get-structured-content", "get-tiny-image", "get-resource-reference"]
AFTER_INIT = "simulate-research-query"
"""Registered once the client has initialized, and announced with tools/list_changed."""


@pytest.fixture(scope="module")
def everything() -> str:
    return npm_command("mcp-server-everything")


@pytest.fixture(scope="module")
def everything_url(everything: str) -> Iterator[str]:
    port = free_port()
    with http_server([everything, "streamableHttp"], port, env={"PORT": str(port)}) as url:
        yield url


def stdio(everything: str, **options: Any) -> MCPToolset:
    return MCPToolset.stdio(everything, connect_timeout=SLOW, **options)


def over(transport: str, everything: str, url: str) -> MCPToolset:
    if transport == "stdio":
        return stdio(everything)
    return MCPToolset.http(url, connect_timeout=SLOW)


SCRIPT = [
    calls(
        call("echo", "c1", message="hello"),
        call("get-sum", "c2", a=2, b=40),
        call("get-structured-content", "c3", location="Chicago"),
        call("get-resource-reference", "c4", resourceId=0),
        call("get-tiny-image", "c5"),
        call("get-sum", "c6", a="two", b=40),
    ),
    answer("done"),
]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_list_call_structured_error_and_image(
    transport: str, everything: str, everything_url: str
) -> None:
    toolset = over(transport, everything, everything_url)
    model = ScriptedModel(SCRIPT)
    async with Agent(model, [toolset]) as agent:
        result = await agent.run("Try the tools.")
    names = [spec.name for spec in model.requests[0].tools]
    assert set(ALWAYS) <= set(names)
    echo, total, weather, error, image, refused = tool_messages(result.messages)
    assert echo == "Echo: hello"
    assert total == "The sum of 2 and 40 is 42."
    assert set(json.loads(weather)) == {"temperature", "conditions", "humidity"}
    assert error == ("error[tool_error]: Invalid resourceId: 0. Must be a finite positive integer.")
    assert image == (
        "Here's the image you requested:\n[image: image/png, 4033 bytes]\n"
        "The image above is the MCP logo."
    )
    assert refused == (
        "error[invalid_arguments]: the arguments for 'get-sum' do not match its schema:\n"
        "- a: 'two' is not of type 'number'"
    )


async def test_tools_added_after_initialization_are_announced_and_listed(everything: str) -> None:
    toolset = stdio(everything)
    async with toolset:
        names = [entry.name for entry in await toolset.entries()]
        assert toolset.changes_announced >= 1
    assert AFTER_INIT in names


async def test_a_server_killed_mid_call_is_an_observation_and_the_run_goes_on(
    everything: str,
) -> None:
    model = ScriptedModel(
        [
            calls(call("trigger-long-running-operation", "c1", duration=30, steps=3)),
            calls(call("echo", "c2", message="back")),
            answer("recovered"),
        ]
    )
    others = children()  # the module's HTTP server, if it runs
    async with Agent(model, [stdio(everything)]) as agent:
        events = []
        async for event in agent.stream("Run the long operation."):
            events.append(event)
            if isinstance(event, ToolCallStarted) and event.call.id == "c1":
                await asyncio.sleep(0.5)
                assert len(kill_children(keep=others)) == 1
    result = events[-1].result
    killed, echoed = tool_messages(result.messages)
    assert killed.startswith("error[tool_error]: the MCP server's connection closed")
    assert echoed == "Echo: back"  # a new server process took over
    assert result.answer == "recovered"


async def test_a_call_past_its_timeout_is_tool_timeout_and_the_connection_stays(
    everything: str,
) -> None:
    model = ScriptedModel(
        [
            calls(call("trigger-long-running-operation", "c1", duration=30, steps=3)),
            calls(call("echo", "c2", message="still here")),
            answer("ok"),
        ]
    )
    async with Agent(model, [stdio(everything, timeout=1.0)]) as agent:
        result = await agent.run("Run it.")
    assert tool_messages(result.messages) == [
        "error[tool_timeout]: 'trigger-long-running-operation' did not finish within 1 s "
        "and was stopped; try smaller inputs or another approach",
        "Echo: still here",
    ]
