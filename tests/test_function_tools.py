"""``@tool`` on plain functions: definition errors, calling, context injection, methods."""

import asyncio
import typing
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import answer, call, calls, tool_messages
from tooldeck import (
    Agent,
    AssistantOutput,
    FunctionTool,
    RunContext,
    ScriptedModel,
    ToolDefinitionError,
    tool,
)
from tooldeck.tools.options import ToolOptions


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


class Plain:
    """A class pydantic knows no schema for."""


class LegacyMovie(typing.TypedDict):
    title: str


class Tagged(BaseModel):
    tags: dict[str, str]


# --- decoration-time errors ---------------------------------------------------------------


def test_type_without_schema_names_function_parameter_and_type() -> None:
    def describe(thing: Plain) -> str:
        return "?"

    with pytest.raises(ToolDefinitionError) as raised:
        tool(describe)
    message = str(raised.value)
    assert message.startswith("tool 'describe': parameter 'thing' has type Plain")
    assert "no JSON Schema" in message
    assert "arbitrary_types_allowed" not in message  # pydantic's advice does not apply


def test_callable_parameter_is_refused_at_decoration() -> None:
    def apply(callback: Callable[[int], int]) -> int:
        return callback(1)

    with pytest.raises(ToolDefinitionError) as raised:
        tool(apply)
    assert str(raised.value).startswith(
        "tool 'apply': parameter 'callback' has type Callable[[int], int], which has no JSON Schema"
    )


def test_typing_typed_dict_on_python_311_says_to_use_typing_extensions() -> None:
    def save(movie: LegacyMovie) -> str:
        return movie["title"]

    with pytest.raises(ToolDefinitionError) as raised:
        tool(save)
    message = str(raised.value)
    assert message.startswith("tool 'save': parameter 'movie' has type LegacyMovie")
    assert "typing_extensions.TypedDict" in message


def test_missing_annotation_is_refused() -> None:
    def echo(text):  # type: ignore[no-untyped-def]
        return text

    with pytest.raises(ToolDefinitionError, match=r"tool 'echo': parameter 'text' has no type"):
        tool(echo)


def test_star_args_are_refused() -> None:
    def total(*values: int) -> int:
        return sum(values)

    with pytest.raises(ToolDefinitionError, match=r"tool 'total': \*values is not supported"):
        tool(total)


def test_star_kwargs_are_refused() -> None:
    def configure(**options: str) -> str:
        return ",".join(options)

    with pytest.raises(ToolDefinitionError, match=r"tool 'configure': \*\*options is not"):
        tool(configure)


def test_dict_parameter_cannot_be_strict_and_says_so() -> None:
    def count_words(counts: dict[str, int]) -> int:
        return sum(counts.values())

    with pytest.raises(ToolDefinitionError) as raised:
        tool(count_words)
    message = str(raised.value)
    assert message.startswith(
        "tool 'count_words' cannot use the strict schema form: "
        "parameter 'counts' has type dict[str, int]"
    )
    assert "free-form keys" in message
    assert "pass strict=False" in message


def test_dict_inside_a_model_names_the_parameter_and_the_field() -> None:
    def label(item: Tagged) -> str:
        return ""

    with pytest.raises(ToolDefinitionError) as raised:
        tool(label)
    message = str(raised.value)
    assert "parameter 'item' has type Tagged" in message
    assert "Tagged.tags" in message


def test_any_parameter_cannot_be_strict() -> None:
    def store(value: Any) -> None:
        return None

    with pytest.raises(ToolDefinitionError, match=r"parameter 'value' has type Any"):
        tool(store)


def test_dict_parameter_works_with_strict_false() -> None:
    @tool(strict=False)
    def count_words(counts: dict[str, int]) -> int:
        return sum(counts.values())

    assert count_words(**count_words.validate({"counts": {"a": 2, "b": "3"}})) == 5


def test_method_passed_unbound_says_to_bind_it() -> None:
    class Counter:
        def bump(self, by: int) -> int:
            return by

    with pytest.raises(ToolDefinitionError, match=r"pass the bound method: tool\(instance"):
        tool(Counter.bump)


def test_lambda_needs_a_name() -> None:
    with pytest.raises(ToolDefinitionError, match=r"pass name="):
        tool(lambda: "x")
    named = tool(name="constant")(lambda: "x")
    assert named.name == "constant"


def test_non_positive_timeout_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'wait': timeout must be positive"):

        @tool(timeout=0)
        def wait() -> None: ...


# --- names, descriptions, plain calls -----------------------------------------------------


def test_decorated_function_is_still_the_plain_function() -> None:
    assert isinstance(add_numbers, FunctionTool)
    assert add_numbers(2, 3) == 5
    assert add_numbers(left=4, right=5) == 9


def test_name_and_description_come_from_the_function() -> None:
    assert add_numbers.spec.name == "add_numbers"
    assert add_numbers.spec.description == "Add two integers."


def test_name_and_description_overrides() -> None:
    @tool(name="sum_two", description="Sum two numbers exactly.")
    def add(left: int, right: int) -> int:
        """Ignored docstring."""
        return left + right

    assert (add.spec.name, add.spec.description) == ("sum_two", "Sum two numbers exactly.")
    assert add(1, 2) == 3


def test_empty_description_override_wins_over_the_docstring() -> None:
    @tool(description="")
    def quiet() -> str:
        """Docstring."""
        return ""

    assert quiet.spec.description == ""


def test_docstring_sections_stay_out_of_the_description() -> None:
    @tool
    def search(query: str, limit: int = 5) -> list[str]:
        """Search the notes.

        Matches are case-insensitive.

        Args:
            query: Words to look for.
            limit: At most this many
                results.

        Returns:
            The matching titles.
        """
        return []

    assert search.spec.description == "Search the notes.\n\nMatches are case-insensitive."
    properties = search.spec.parameters["properties"]
    assert properties["query"]["description"] == "Words to look for."
    assert properties["limit"]["description"] == "At most this many results."


def test_options_are_kept_on_the_tool() -> None:
    def on_error(error: Exception) -> str:
        return "oops"

    @tool(toolsets=["math"], timeout=2.5, retries=1, sequential=True, on_error=on_error)
    def divide(left: float, right: float) -> float:
        return left / right

    assert divide.options == ToolOptions(
        toolsets=frozenset({"math"}), timeout=2.5, retries=1, sequential=True, on_error=on_error
    )


def test_bad_option_values_are_refused_at_decoration() -> None:
    def double(n: int) -> int:
        return 2 * n

    with pytest.raises(
        ToolDefinitionError, match=r"tool 'double': timeout must be positive, got 0"
    ):
        tool(timeout=0)(double)
    with pytest.raises(ToolDefinitionError, match=r"tool 'double': retries must be >= 0, got -1"):
        tool(retries=-1)(double)
    with pytest.raises(
        ToolDefinitionError, match=r"requires_approval must be True, False or a function"
    ):
        tool(requires_approval="yes")(double)  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match=r"on_error must be a function .* or 'raise'"):
        tool(on_error="ignore")(double)  # type: ignore[arg-type]


# --- running through the loop ---------------------------------------------------------------


def test_run_context_is_injected_and_hidden_from_the_schema() -> None:
    seen: list[tuple[str, str, Any]] = []

    @tool
    def whoami(ctx: RunContext[dict[str, str]], greeting: str) -> str:
        """Greet the current user."""
        seen.append((ctx.call_id, ctx.tool_name, ctx.deps))
        return f"{greeting}, {ctx.deps['user']}"

    assert list(whoami.spec.parameters["properties"]) == ["greeting"]
    model = ScriptedModel([calls(call("whoami", "call-7", greeting="Hello")), answer("done")])
    result = Agent(model, tools=[whoami]).run_sync("who am I?", deps={"user": "ada"})

    assert seen == [("call-7", "whoami", {"user": "ada"})]
    assert tool_messages(result.messages) == ["Hello, ada"]


def test_run_context_can_be_any_parameter_position() -> None:
    @tool
    def tag(text: str, ctx: RunContext[str]) -> str:
        return f"{ctx.deps}:{text}"

    model = ScriptedModel([calls(call("tag", text="x")), answer("ok")])
    result = Agent(model, tools=[tag]).run_sync("tag it", deps="team")
    assert tool_messages(result.messages) == ["team:x"]


def test_bound_methods_share_the_object_state() -> None:
    class Cart:
        def __init__(self) -> None:
            self.items: list[str] = []

        def add(self, item: str) -> str:
            """Add an item to the cart."""
            self.items.append(item)
            return f"{len(self.items)} items"

        def count(self) -> int:
            """How many items are in the cart."""
            return len(self.items)

    cart = Cart()
    add, count = tool(cart.add), tool(cart.count)
    assert add.spec.parameters["properties"] == {"item": {"type": "string"}}
    model = ScriptedModel(
        [
            calls(call("add", "c1", item="tea"), call("add", "c2", item="jam")),
            calls(call("count", "c3")),
            answer("two items"),
        ]
    )
    result = Agent(model, tools=[add, count]).run_sync("fill the cart")

    assert sorted(cart.items) == ["jam", "tea"]
    assert tool_messages(result.messages)[-1] == "2"


def test_sync_and_async_tools_run_in_one_turn() -> None:
    @tool
    def shout(text: str) -> str:
        return text.upper()

    @tool
    async def whisper(text: str) -> str:
        await asyncio.sleep(0)
        return text.lower()

    assert (shout.is_async, whisper.is_async) == (False, True)
    model = ScriptedModel(
        [calls(call("shout", "c1", text="Hi"), call("whisper", "c2", text="Hi")), answer("ok")]
    )
    result = Agent(model, tools=[shout, whisper]).run_sync("say hi")
    assert tool_messages(result.messages) == ["HI", "hi"]


async def test_async_tool_stays_awaitable_as_a_plain_function() -> None:
    @tool
    async def double(value: int) -> int:
        return value * 2

    assert await double(21) == 42


def test_validated_arguments_reach_the_function_converted() -> None:
    received: list[Any] = []

    @tool
    def record(count: int, ratio: float) -> str:
        received.append((count, ratio))
        return "ok"

    model = ScriptedModel([calls(call("record", count="5", ratio=1)), answer("ok")])
    Agent(model, tools=[record]).run_sync("go")
    assert received == [(5, 1.0)]
    assert type(received[0][1]) is float


def test_positional_only_parameters_are_passed_by_position() -> None:
    @tool
    def power(base: int, /, exponent: int = 2) -> int:
        return base**exponent

    model = ScriptedModel([calls(call("power", base=3, exponent=None)), answer("9")])
    result = Agent(model, tools=[power]).run_sync("square 3")
    assert tool_messages(result.messages) == ["9"]


def test_tool_spec_is_what_the_model_receives() -> None:
    model = ScriptedModel([AssistantOutput(content="no tools needed")])
    Agent(model, tools=[add_numbers]).run_sync("hi")
    (spec,) = model.requests[0].tools
    assert spec == add_numbers.spec
    assert spec.parameters == {
        "type": "object",
        "properties": {"left": {"type": "integer"}, "right": {"type": "integer"}},
        "required": ["left", "right"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("parameter", ["json", "copy", "schema", "fields", "validate", "type"])
def test_parameter_names_that_pydantic_models_also_use_still_work(parameter: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def lookup({parameter}: str) -> str:\n    return {parameter}\n", namespace)
    lookup = tool(namespace["lookup"])
    assert lookup.spec.parameters["properties"] == {parameter: {"type": "string"}}
    assert lookup(**lookup.validate({parameter: "v"})) == "v"


def test_model_config_parameter_is_refused_instead_of_vanishing() -> None:
    def configure(model_config: str) -> str:
        return model_config

    with pytest.raises(ToolDefinitionError, match=r"'model_config' is a name pydantic reserves"):
        tool(configure)


def google_forecast(city: str, days: int = 1) -> str:
    """Forecast the weather.

    Args:
        city (str): The city.
        days (int, optional): How many
            days ahead.

    Returns:
        str: The forecast.

    Raises:
        ValueError: For an unknown city.
    """
    return city


def numpy_forecast(city: str, days: int = 1) -> str:
    """Forecast the weather.

    Parameters
    ----------
    city : str
        The city.
    days : int, optional
        How many
        days ahead.

    Returns
    -------
    str
        The forecast.
    """
    return city


def sphinx_forecast(city: str, days: int = 1) -> str:
    """Forecast the weather.

    :param city: The city.
    :type city: str
    :param days: How many
        days ahead.
    :returns: The forecast.
    :rtype: str
    :raises ValueError: For an unknown city.
    """
    return city


@pytest.mark.parametrize("function", [google_forecast, numpy_forecast, sphinx_forecast])
def test_full_docstrings_in_each_style(function: Callable[..., str]) -> None:
    forecast = tool(function)
    assert forecast.spec.description == "Forecast the weather."
    assert forecast.spec.parameters["properties"] == {
        "city": {"type": "string", "description": "The city."},
        "days": {
            "anyOf": [{"type": "integer"}, {"type": "null"}],
            "description": "How many days ahead.",
            "default": 1,
        },
    }
