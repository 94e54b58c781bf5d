"""Tools that change during a run: from the next model turn, never in the middle of one."""

from __future__ import annotations

import pytest

from helpers import answer, call, calls
from tooldeck import Agent, ModelRequest, RunContext, ScriptedModel, ToolRegistry, tool
from tooldeck.errors import ToolDeckError


@tool
def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


@tool
def fahrenheit_to_celsius(fahrenheit: float) -> float:
    """Convert Fahrenheit to Celsius."""
    return (fahrenheit - 32) * 5 / 9


PLUGINS = {"temperature": [celsius_to_fahrenheit, fahrenheit_to_celsius]}


@tool
def load_plugin(name: str, ctx: RunContext[None]) -> str:
    """Load a plugin's tools; they can be called from the next turn on.

    Args:
        name: The plugin, e.g. "temperature".
    """
    if name not in PLUGINS:
        return f"no plugin named {name!r}; plugins: {', '.join(PLUGINS)}"
    for plugin_tool in PLUGINS[name]:
        ctx.tools.register(plugin_tool)
    return f"loaded {name}: {', '.join(t.name for t in PLUGINS[name])}"


@tool
def unload_plugin(name: str, ctx: RunContext[None]) -> str:
    """Unload a plugin's tools."""
    for plugin_tool in PLUGINS[name]:
        ctx.tools.remove(plugin_tool.name)
    return f"unloaded {name}"


async def test_a_tool_loads_a_plugin_whose_tools_the_model_sees_from_the_next_turn() -> None:
    model = ScriptedModel(
        [
            # in the same turn the plugin's tool is not there yet
            calls(
                call("load_plugin", "c1", name="temperature"),
                call("celsius_to_fahrenheit", "c2", celsius=100),
            ),
            calls(call("celsius_to_fahrenheit", "c3", celsius=100)),
            answer("212 °F"),
        ]
    )
    agent = Agent(model, [load_plugin])
    shown: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    result = None
    async for event in agent.stream("What is 100 °C in °F?"):
        if isinstance(event, ModelRequest):
            shown.append((event.tool_names, agent.tools.names))
        result = getattr(event, "result", result)

    assert result is not None
    assert result.answer == "212 °F"
    outputs = [trace.result.output for trace in result.tool_trace]
    assert outputs[0] == "loaded temperature: celsius_to_fahrenheit, fahrenheit_to_celsius"
    assert outputs[1] == (
        "error[unknown_tool]: there is no tool named 'celsius_to_fahrenheit'; available tools: "
        "load_plugin"
    )
    assert outputs[2] == "212.0"
    names = ["load_plugin", "celsius_to_fahrenheit", "fahrenheit_to_celsius"]
    assert model.requests[0].tool_names == ["load_plugin"]
    assert model.requests[1].tool_names == names
    # each request's event names the tools the model was shown, and agent.tools agrees
    assert shown == [
        (("load_plugin",), ("load_plugin",)),
        (tuple(names), tuple(names)),
        (tuple(names), tuple(names)),
    ]


def test_a_removed_tool_still_answers_the_calls_of_the_turn_that_removed_it() -> None:
    registry = ToolRegistry([unload_plugin, celsius_to_fahrenheit, fahrenheit_to_celsius])
    model = ScriptedModel(
        [
            calls(
                call("unload_plugin", "c1", name="temperature"),
                call("celsius_to_fahrenheit", "c2", celsius=0),
            ),
            calls(call("celsius_to_fahrenheit", "c3", celsius=0)),
            answer("done"),
        ]
    )
    result = Agent(model, registry).run_sync("convert, then unload")

    assert [t.result.output for t in result.tool_trace] == [
        "unloaded temperature",
        "32.0",
        "error[unknown_tool]: there is no tool named 'celsius_to_fahrenheit'; available tools: "
        "unload_plugin",
    ]
    assert model.requests[1].tool_names == ["unload_plugin"]
    assert "celsius_to_fahrenheit" not in registry  # the change is the registry's own


def test_changes_are_the_agents_and_outlast_the_run() -> None:
    model = ScriptedModel(
        [calls(call("load_plugin", name="temperature")), answer("loaded"), answer("hello")]
    )
    agent = Agent(model, [load_plugin])
    agent.run_sync("load the temperature plugin")
    agent.run_sync("hi")

    assert model.requests[2].tool_names == [
        "load_plugin",
        "celsius_to_fahrenheit",
        "fahrenheit_to_celsius",
    ]


def test_a_fixed_tool_view_cannot_change_and_the_tool_is_told_how_to_fix_that() -> None:
    view = ToolRegistry([load_plugin]).view()
    model = ScriptedModel([calls(call("load_plugin", name="temperature")), answer("no")])
    result = Agent(model, view, include_error_details=True).run_sync("load it")

    assert result.tool_trace[0].result.output == (
        "error[tool_error]: ToolDeckError: tool 'load_plugin' asked for ctx.tools, but this run's "
        "tools cannot change: the agent was given a fixed ToolView (give it a ToolRegistry or a "
        "list of tools instead), or this RunContext was not made by an agent run"
    )
    assert model.requests[1].tool_names == ["load_plugin"]


def test_a_run_context_made_outside_a_run_has_no_tools_to_change() -> None:
    with pytest.raises(ToolDeckError, match="this RunContext was not made by an agent run"):
        _ = RunContext("c1", "load_plugin", None).tools
