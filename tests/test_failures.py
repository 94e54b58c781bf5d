"""Every model mistake and tool failure becomes an observation the model reads next round."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from helpers import answer, call, calls, raw_call
from tooldeck import Agent, Limits, RunResult, ScriptedModel, tool
from tooldeck.errors import ErrorCode, InvalidArguments, ToolExecutionError


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Tell the weather in a city."""
    return f"sunny in {city} ({unit})"


def run(
    *outputs: object, tools: list[object] | None = None, **options: object
) -> tuple[RunResult, ScriptedModel]:
    model = ScriptedModel([*outputs, answer("done")])  # type: ignore[list-item]
    agent = Agent(model, tools if tools is not None else [add_numbers, get_weather], **options)  # type: ignore[arg-type]
    return agent.run_sync("go"), model


def observation(model: ScriptedModel, index: int = 0) -> str:
    """The text the model read for call ``index`` in its second request."""
    tool_messages = [m for m in model.requests[1].messages if m.role == "tool"]
    return tool_messages[index].content


def test_unknown_tool_names_the_tools_that_exist() -> None:
    result, model = run(calls(call("add_number", left=1, right=2)))
    assert observation(model) == (
        "error[unknown_tool]: there is no tool named 'add_number'; available tools: "
        "add_numbers, get_weather (did you mean 'add_numbers'?)"
    )
    assert result.tool_trace[0].result.error_code == ErrorCode.UNKNOWN_TOOL
    assert result.answer == "done"


def test_unknown_tool_with_no_tools_says_to_answer() -> None:
    _, model = run(calls(call("search", q="x")), tools=[])
    assert observation(model) == (
        "error[unknown_tool]: there is no tool named 'search'; no tools are available, answer directly"
    )


def test_broken_json_arguments_show_the_parse_error() -> None:
    result, model = run(calls(raw_call("add_numbers", '{"left": 1, "right": ')))
    text = observation(model)
    assert text.startswith(
        "error[invalid_json]: the arguments for 'add_numbers' are not valid JSON ("
    )
    assert "Expecting value: line 1 column 22" in text
    assert text.endswith("send them as one JSON object")
    assert result.tool_trace[0].call.raw_arguments == '{"left": 1, "right": '


def test_arguments_that_are_not_an_object_are_invalid_json() -> None:
    _, model = run(calls(raw_call("add_numbers", "[1, 2]")))
    assert observation(model) == (
        "error[invalid_json]: the arguments for 'add_numbers' must be a JSON object, got an array"
    )


def test_schema_violations_list_every_failing_field() -> None:
    result, model = run(calls(call("add_numbers", left="two", colour="red")))
    assert observation(model) == (
        "error[invalid_arguments]: the arguments for 'add_numbers' do not match its schema:\n"
        "- left: Input should be a valid integer, unable to parse string as an integer (got 'two')\n"
        "- right: missing (required)\n"
        "- colour: unexpected argument (the tool takes: left, right)"
    )
    error = result.tool_trace[0].error
    assert isinstance(error, InvalidArguments)
    assert [p.path for p in error.problems] == ["left", "right", "colour"]


def test_lax_values_are_accepted() -> None:
    result, _ = run(calls(call("add_numbers", left="2", right=3.0)))
    assert result.tool_trace[0].result.output == "5"


def test_a_raising_tool_shows_a_generic_line_and_keeps_the_exception() -> None:
    @tool
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    result, model = run(calls(call("divide", a=1, b=0)), tools=[divide])
    assert observation(model) == (
        "error[tool_error]: the tool 'divide' failed while running; try other arguments or another way"
    )
    assert "division" not in observation(model)
    assert isinstance(result.tool_trace[0].error, ZeroDivisionError)
    assert result.answer == "done"


def test_error_details_are_shown_when_asked() -> None:
    @tool
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    _, model = run(calls(call("divide", a=1, b=0)), tools=[divide], include_error_details=True)
    assert observation(model) == "error[tool_error]: ZeroDivisionError: float division by zero"


def test_on_error_turns_the_exception_into_the_text() -> None:
    @tool(on_error=lambda error: f"lookup failed: {error}; try a city name")
    def lookup(city: str) -> str:
        """Look up a city."""
        raise KeyError(city)

    result, model = run(calls(call("lookup", city="Atlantis")), tools=[lookup])
    assert observation(model) == "error[tool_error]: lookup failed: 'Atlantis'; try a city name"
    assert isinstance(result.tool_trace[0].error, KeyError)


def test_a_broken_on_error_falls_back_to_the_generic_line() -> None:
    def bad_handler(error: Exception) -> str:
        raise RuntimeError("handler bug")

    @tool(on_error=bad_handler)
    def lookup(city: str) -> str:
        """Look up a city."""
        raise KeyError(city)

    result, model = run(calls(call("lookup", city="x")), tools=[lookup])
    assert observation(model).startswith(
        "error[tool_error]: the tool 'lookup' failed while running"
    )
    assert isinstance(result.tool_trace[0].error, KeyError)


def test_on_error_raise_ends_the_run_with_the_partial_result() -> None:
    @tool(on_error="raise")
    def charge(amount: int) -> str:
        """Charge a card."""
        raise PermissionError("card declined")

    model = ScriptedModel(
        [calls(call("add_numbers", "a", left=1, right=1), call("charge", "b", amount=5))]
    )
    with pytest.raises(
        ToolExecutionError, match="tool 'charge' raised PermissionError: card declined"
    ) as caught:
        Agent(model, [add_numbers, charge]).run_sync("go")
    stopped = caught.value
    assert isinstance(stopped.__cause__, PermissionError)
    assert stopped.tool_name == "charge"
    assert stopped.result is not None
    assert stopped.result.stop_reason == "tool_raised"
    assert next(t.result.output for t in stopped.result.tool_trace) == "2"
    assert [m.role for m in stopped.result.messages] == ["user", "assistant", "tool", "tool"]


def test_async_tool_past_its_timeout_is_cancelled() -> None:
    cancelled = False

    @tool(timeout=0.05)
    async def hang(seconds: float) -> str:
        """Wait."""
        nonlocal cancelled
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled = True
            raise
        return "woke"

    result, model = run(calls(call("hang", seconds=5)), tools=[hang])
    assert observation(model) == (
        "error[tool_timeout]: 'hang' did not finish within 0.05 s and was stopped; "
        "try smaller inputs or another approach"
    )
    assert cancelled
    assert result.tool_trace[0].duration_s < 1
    assert result.answer == "done"


def test_sync_tool_past_its_timeout_is_abandoned_and_the_loop_goes_on() -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def stuck() -> str:
        """Block."""
        release.wait(5)
        return "finally"

    started = time.perf_counter()
    result, model = run(calls(call("stuck")), tools=[stuck])
    elapsed = time.perf_counter() - started
    release.set()
    assert observation(model) == (
        "error[tool_timeout]: 'stuck' did not finish within 0.05 s and may still complete in "
        "the background: check whether it took effect before calling it again, do not retry "
        "it blindly"
    )
    assert elapsed < 2
    assert result.answer == "done"


def test_a_tool_raising_timeout_error_itself_is_a_tool_error() -> None:
    @tool
    def remote() -> str:
        """Call a remote service."""
        raise TimeoutError("socket timed out")

    result, model = run(calls(call("remote")), tools=[remote])
    assert observation(model).startswith("error[tool_error]:")
    assert isinstance(result.tool_trace[0].error, TimeoutError)


def test_repeated_identical_calls_are_refused_with_the_previous_result() -> None:
    same = [calls(call("get_weather", f"c{i}", city="Paris")) for i in range(3)]
    result, _model = run(*same, limits=Limits(repeat_limit=2))
    outputs = [t.result.output for t in result.tool_trace]
    assert outputs[:2] == ["sunny in Paris (celsius)"] * 2
    assert outputs[2] == (
        "error[repeated_call]: you already called 'get_weather' with these exact arguments "
        "2 times; do not call it again with the same arguments. Its last result was:\n"
        "sunny in Paris (celsius)"
    )
    assert result.answer == "done"


def test_same_tool_with_other_arguments_is_not_a_repeat() -> None:
    cities = [calls(call("get_weather", f"c{i}", city=f"City{i}")) for i in range(4)]
    result, _ = run(*cities, limits=Limits(repeat_limit=1))
    assert all(t.result.ok for t in result.tool_trace)


def test_one_bad_call_does_not_stop_the_others_in_its_turn() -> None:
    result, model = run(
        calls(
            call("add_numbers", "a", left=1, right=2),
            call("nope", "b"),
            raw_call("add_numbers", "{oops", "c"),
            call("get_weather", "d", city="Oslo"),
        )
    )
    codes = [t.result.error_code for t in result.tool_trace]
    assert codes == [None, "unknown_tool", "invalid_json", None]
    assert [m.tool_call_id for m in model.requests[1].messages if m.role == "tool"] == [
        "a",
        "b",
        "c",
        "d",
    ]
