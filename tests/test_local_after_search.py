"""The local model's turn after a tool search still answers the user's message.

A search finds tools; it does not do the task. The turn after ``search_tools`` results is
decided by the fit of the user's message to the tools the search revealed (the default
weights' rule), not by the model's log-odds after a tool result, which favour answering:
the 270M model then answered BFCL's questions with text copied from the prompt's worked
example ("The word "banana" has 6 letters.") in 10 of 10 searching cases.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from tooldeck import AssistantOutput, Message, ModelSettings, ToolCall, ToolSpec, tool
from tooldeck.cli.demo import add_numbers, get_weather
from tooldeck.models.local import LocalModel
from tooldeck.models.local._decide import CallRule, answered_message
from tooldeck.models.local._engine import TurnRequest, _decided
from tooldeck.models.local._grammar import plan_turn
from tooldeck.search import FOUND, SEARCH_TOOL


@tool(name=SEARCH_TOOL)
def search_tools(query: str, limit: int = 5) -> str:
    """Find tools for a task among those not shown yet."""
    return ""


SEARCH = search_tools.spec
QUESTION = "What's the weather like in Tokyo?"


def searched(*found: ToolSpec, number: int = 1) -> list[Message]:
    """A search call and its answer naming ``found``."""
    call = ToolCall(id=f"call_{number}", name=SEARCH_TOOL, arguments={"query": "weather"})
    lines = "\n".join(f"{spec.name}: {spec.description}" for spec in found)
    return [
        Message.assistant(AssistantOutput(tool_calls=(call,))),
        Message.tool(call.id, f"{FOUND}\n{lines}"),
    ]


def test_a_turn_after_searches_answers_the_users_message_against_the_tools_found() -> None:
    tools = (SEARCH, get_weather.spec, add_numbers.spec)
    asked = [Message.user(QUESTION)]
    assert answered_message(asked, tools) == (QUESTION, tools)  # the first turn: every tool
    after = [*asked, *searched(get_weather.spec), *searched(add_numbers.spec, number=2)]
    assert answered_message(after, tools) == (QUESTION, tools[1:])  # not the search itself


def test_a_turn_after_any_other_tool_or_a_search_that_revealed_nothing_reads_no_fit() -> None:
    weather = ToolCall(id="call_2", name="get_weather", arguments={"city": "Tokyo"})
    did = [
        Message.user(QUESTION),
        *searched(get_weather.spec),
        Message.assistant(AssistantOutput(tool_calls=(weather,))),
        Message.tool("call_2", "sunny"),
    ]
    assert answered_message(did, (SEARCH, get_weather.spec)) is None  # the model's score then
    nothing = [Message.user(QUESTION), *searched()]
    assert answered_message(nothing, (SEARCH,)) is None  # only the search shown: no fit
    assert answered_message([], (SEARCH,)) is None


def test_a_call_decided_by_the_fit_after_a_search_calls_a_tool_it_found() -> None:
    auto = plan_turn((SEARCH, get_weather.spec), ModelSettings())
    rule = CallRule(min_fit=0.5)
    turn = TurnRequest((), auto.tools, "", auto, 0.0, 64, rule, threading.Event())
    calls = _decided(turn, -3.0, 0.6, (get_weather.spec,))  # log-odds say answer; fit, call
    assert (calls.allow_answer, calls.tools) == (False, (get_weather.spec,))
    assert _decided(turn, 3.0, 0.4, (get_weather.spec,)).tools == ()  # fits nothing: answer
    # Decided by the log-odds (no fit read), the plan keeps every tool.
    assert _decided(turn, 3.0, None, None).tools == auto.tools


@pytest.mark.slow
def test_the_default_weights_call_the_tool_a_search_found() -> None:
    model = LocalModel()
    # Before: the log-odds after the search's answer said "answer"; once told to call, the
    # model wrote the search again, copying the line above it.
    messages = [Message.user(QUESTION), *searched(get_weather.spec)]
    tools = (SEARCH, get_weather.spec)
    try:
        output = asyncio.run(model.complete(messages, tools, ModelSettings(max_tokens=64)))
    finally:
        asyncio.run(model.aclose())
    assert [call.name for call in output.tool_calls] == ["get_weather"], output.content
    assert model.last_turn is not None
    assert model.last_turn.fit is not None  # decided by the fit, as a first turn is
    assert model.last_turn.fit > model.call_rule.min_fit  # type: ignore[operator]
