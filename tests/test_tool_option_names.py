"""An option name that is not one (a typo of ``timeout``) is refused where the tool is made."""

from __future__ import annotations

import shlex
import sys

import pytest

from tooldeck import Agent, FunctionTool, ScriptedModel, tool
from tooldeck.errors import ToolDefinitionError
from tooldeck.tools.mcp import MCPToolset
from tooldeck.tools.options import ToolOptionArgs

OPTIONS = (
    "defer_loading, description, guardrails, inline, isolation, large_output, max_calls, max_concurrency, "
    "max_output_chars, name, on_error, reconcile, requires_approval, result_parser, retries, "
    "sensitive, sequential, side_effects, strict, timeout, toolsets, trust"
)


def test_tool_refuses_misspelled_options_at_decoration_with_did_you_mean() -> None:
    with pytest.raises(ToolDefinitionError) as raised:

        @tool(timout=5, retires=3)  # type: ignore[call-overload]
        def fetch(url: str) -> str:
            """Fetch a page."""
            return url

    assert str(raised.value) == (
        "tool 'fetch': unknown options 'timout' (did you mean 'timeout'?) and 'retires' "
        f"(did you mean 'retries'?); the options are: {OPTIONS}"
    )


def test_a_name_close_to_none_is_named_without_a_guess() -> None:
    with pytest.raises(ToolDefinitionError) as raised:

        @tool(colour="red")  # type: ignore[call-overload]
        def paint(wall: str) -> str:
            """Paint a wall."""
            return wall

    assert str(raised.value) == (
        f"tool 'paint': unknown option 'colour'; the options are: {OPTIONS}"
    )


def test_function_tool_and_agent_tools_refuse_unknown_options_too() -> None:
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    with pytest.raises(ToolDefinitionError, match=r"tool 'ping': unknown option 'sequentail' "):
        FunctionTool("ping", "Ping.", schema, lambda: "pong", sequentail=True)  # type: ignore[call-arg]
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ToolDefinitionError) as raised:
        agent.as_tool(name="helper", description="Helps.", requires_aproval=True)  # type: ignore[call-arg]
    assert str(raised.value).startswith(
        "tool 'helper': unknown option 'requires_aproval' (did you mean 'requires_approval'?)"
    )


def test_an_mcp_toolset_refuses_unknown_options_before_it_connects() -> None:
    with pytest.raises(ToolDefinitionError) as raised:
        MCPToolset.stdio(sys.executable, ["server.py"], prefx="demo")  # type: ignore[call-arg]
    assert str(raised.value) == (
        f"MCP server {shlex.join([sys.executable, 'server.py'])}: unknown option 'prefx' (did you mean "
        "'prefix'?); the options are: connect_timeout, defer_loading, prefix, requires_approval, sensitive, "
        "side_effects, timeout, tools, toolsets, trust"
    )


def test_options_added_to_tool_option_args_are_accepted_without_another_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check reads ToolOptionArgs itself: a field another change adds there passes."""
    monkeypatch.setitem(ToolOptionArgs.__annotations__, "max_calls", "int | None")

    @tool(max_calls=3)  # type: ignore[call-overload]
    def count(n: int) -> int:
        """Count."""
        return n

    assert count.name == "count"
