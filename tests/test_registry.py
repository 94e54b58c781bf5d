"""The registry: one entry per tool, views by toolset, and specs and dispatch that agree."""

import inspect
import types
from typing import Any

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, RunContext, ScriptedModel, ToolRegistry, ToolSpec, tool
from tooldeck.errors import ArgumentProblem, DuplicateToolError, InvalidArguments
from tooldeck.tools.options import ToolOptions
from tooldeck.tools.registry import ToolEntry, ToolView


@tool(toolsets=["math"])
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(toolsets=["math", "text"])
def count_chars(text: str) -> int:
    """Count the characters of a text."""
    return len(text)


@tool(toolsets=["text"])
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@tool
def now() -> str:
    """The time (in no toolset)."""
    return "noon"


def registry() -> ToolRegistry:
    return ToolRegistry([add_numbers, count_chars, shout, now])


def line_of(function: Any) -> int:
    return inspect.getsourcelines(function)[1]


def test_registry_takes_an_iterable_and_keeps_its_order() -> None:
    tools = registry()
    assert [entry.name for entry in tools] == ["add_numbers", "count_chars", "shout", "now"]
    assert len(tools) == 4
    assert "shout" in tools
    assert "whisper" not in tools
    assert tools.toolsets == frozenset({"math", "text"})


def test_registered_entry_carries_the_tool_and_its_options() -> None:
    @tool(toolsets=["io"], timeout=1.5, retries=2, sequential=True)
    def save(text: str) -> str:
        return text

    entry = ToolRegistry().register(save)
    assert entry.spec is save.spec
    assert entry.handler is save
    assert entry.options is save.options
    assert (entry.options.toolsets, entry.options.timeout, entry.options.retries) == (
        frozenset({"io"}),
        1.5,
        2,
    )
    assert entry.options.sequential is True
    assert entry.origin == f"test_registry.py:{line_of(save.fn)}"


def test_duplicate_name_is_refused_naming_both_origins() -> None:
    def plus(a: int, b: int) -> int:
        return a + b

    tools = registry()
    with pytest.raises(DuplicateToolError) as raised:
        tools.register(tool(name="add_numbers")(plus))
    assert str(raised.value) == (
        f"duplicate tool name: 'add_numbers' from test_registry.py:{line_of(plus)} "
        f"(already registered from test_registry.py:{line_of(add_numbers.fn)}); "
        "give one of them another name with tool(name=...)"
    )
    assert tools.get("add_numbers") is not None
    assert tools.get("add_numbers").handler is add_numbers  # type: ignore[union-attr]


def test_duplicate_in_the_constructor_is_refused() -> None:
    with pytest.raises(DuplicateToolError, match=r"duplicate tool name: 'shout'"):
        ToolRegistry([shout, tool(name="shout")(lambda: "HI")])


def test_renamed_tool_registers_beside_the_original() -> None:
    @tool(name="add_numbers_v2")
    def add_numbers(left: int, right: int) -> int:
        return left + right

    tools = registry()
    tools.register(add_numbers)
    assert "add_numbers_v2" in tools


def test_plain_function_is_made_a_tool() -> None:
    def greet(name: str) -> str:
        """Greet someone."""
        return f"hi {name}"

    entry = ToolRegistry([greet]).view().dispatch["greet"]
    assert entry.spec.description == "Greet someone."
    assert entry.spec.parameters["properties"] == {"name": {"type": "string"}}


def test_view_without_toolsets_has_every_tool() -> None:
    view = registry().view()
    assert view.names == ("add_numbers", "count_chars", "shout", "now")


def test_view_with_toolsets_keeps_tools_in_any_of_them() -> None:
    tools = registry()
    assert tools.view(toolsets=["math"]).names == ("add_numbers", "count_chars")
    assert tools.view(toolsets=["text"]).names == ("count_chars", "shout")
    assert tools.view(toolsets=["math", "text"]).names == ("add_numbers", "count_chars", "shout")
    assert tools.view(toolsets=[]).names == ()


def test_unknown_toolset_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"^unknown toolset\(s\): 'maths'; known: math, text$"):
        registry().view(toolsets=["math", "maths"])


def test_specs_and_dispatch_come_from_the_same_entries() -> None:
    view = registry().view(toolsets=["text"])
    assert [spec.name for spec in view.specs] == list(view.dispatch)
    for spec in view.specs:
        assert view.dispatch[spec.name].spec is spec
    assert view.dispatch["shout"].handler is shout


def test_a_view_is_a_snapshot_and_read_only() -> None:
    tools = registry()
    view = tools.view()
    tools.register(tool(name="later")(lambda: "x"))
    assert "later" not in view.names
    with pytest.raises(TypeError):
        view.dispatch["later"] = tools.view().dispatch["later"]  # type: ignore[index]


@pytest.mark.parametrize(
    "make_tools",
    [
        pytest.param(lambda: [add_numbers, shout], id="list"),
        pytest.param(lambda: ToolRegistry([add_numbers, shout]), id="registry"),
        pytest.param(lambda: ToolRegistry([add_numbers, shout]).view(), id="view"),
    ],
)
def test_agent_accepts_a_list_a_registry_or_a_view(make_tools: Any) -> None:
    model = ScriptedModel([calls(call("add_numbers", left=2, right=3)), answer("5")])
    result = Agent(model, tools=make_tools()).run_sync("add 2 and 3")
    assert model.requests[0].tool_names == ["add_numbers", "shout"]
    assert tool_messages(result.messages) == ["5"]


def test_agent_with_a_list_refuses_duplicates() -> None:
    with pytest.raises(DuplicateToolError):
        Agent(ScriptedModel([]), tools=[shout, shout])


def test_a_tool_outside_the_view_cannot_run() -> None:
    view = registry().view(toolsets=["text"])
    model = ScriptedModel([calls(call("add_numbers", left=1, right=2)), answer("cannot")])
    result = Agent(model, tools=view).run_sync("add")
    assert model.requests[0].tool_names == ["count_chars", "shout"]
    assert tool_messages(result.messages) == [
        "error[unknown_tool]: there is no tool named 'add_numbers'; "
        "available tools: count_chars, shout"
    ]


class Echo:
    """A hand-written handler: the same narrow contract a FunctionTool meets."""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if set(arguments) != {"text"}:
            raise InvalidArguments([ArgumentProblem("text", "missing (required)")])
        return arguments

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> str:
        return f"{context.tool_name}:{arguments['text']}"


def test_a_tool_entry_with_its_own_handler_registers_and_runs() -> None:
    spec = ToolSpec(
        name="echo",
        description="Echo the text.",
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
    )
    entry = ToolEntry(spec=spec, handler=Echo(), options=ToolOptions(toolsets=frozenset({"text"})))
    tools = ToolRegistry([entry])
    assert tools.view(toolsets=["text"]).dispatch["echo"] is entry
    model = ScriptedModel([calls(call("echo", text="hi"), call("echo", "c2")), answer("ok")])
    result = Agent(model, tools=tools).run_sync("echo hi")
    assert tool_messages(result.messages) == [
        "echo:hi",
        "error[invalid_arguments]: the arguments for 'echo' do not match its schema:\n"
        "- text: missing (required)",
    ]


def test_empty_view() -> None:
    assert ToolView.of(()).names == ()
    model = ScriptedModel([answer("hello")])
    assert Agent(model).run_sync("hi").answer == "hello"
    assert model.requests[0].tools == ()


TOOLS_ACCEPTED = (
    "tools= takes a ToolView, a ToolRegistry, or a list of tools (functions, @tool functions, "
    "ToolEntry, Toolset); got "
)


@pytest.mark.parametrize(
    ("tools", "got"),
    [
        pytest.param(types.ModuleType("my_tools"), "a module 'my_tools'", id="module"),
        pytest.param(42, "int 42", id="number"),
        pytest.param("add_numbers", "str 'add_numbers'", id="string"),
    ],
)
def test_agent_with_something_that_is_not_tools_says_what_tools_takes(
    tools: object, got: str
) -> None:
    with pytest.raises(TypeError) as raised:
        Agent(ScriptedModel([]), tools)  # type: ignore[arg-type]
    assert str(raised.value) == TOOLS_ACCEPTED + got


def test_registering_a_module_says_what_a_registry_takes() -> None:
    with pytest.raises(TypeError) as raised:
        ToolRegistry([types.ModuleType("my_tools")])
    assert str(raised.value) == TOOLS_ACCEPTED + "a module 'my_tools'"
