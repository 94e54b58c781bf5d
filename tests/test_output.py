"""Typed answers: ``Agent(output_type=T)`` validated like a tool call, on every kind of model."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from helpers import answer, call, calls, tool_messages
from tooldeck import (
    Agent,
    Approve,
    AssistantOutput,
    Limits,
    RunContext,
    ScriptedModel,
    ToolCall,
    tool,
)
from tooldeck.errors import LimitExceeded, ModelRetry


class City(BaseModel):
    name: str
    population: int = Field(ge=0)
    country: str = "unknown"


class NativeModel(ScriptedModel):
    """A scripted model that says it holds answers to the schema itself (like OpenAI's)."""

    native_output = True


def final(arguments: dict[str, Any] | str, call_id: str = "f1") -> AssistantOutput:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return AssistantOutput(tool_calls=(ToolCall.from_json(call_id, "final_answer", text),))


@tool
def lookup(city: str) -> str:
    """Look up facts about a city."""
    return f"{city}: 2,100,000 people, France"


def test_a_model_without_structured_output_answers_through_a_final_answer_tool() -> None:
    model = ScriptedModel([final({"name": "Paris", "population": 2100000, "country": "France"})])
    result = Agent(model, output_type=City).run_sync("Tell me about Paris.")
    assert result.output == City(name="Paris", population=2100000, country="France")
    assert result.answer == '{"name": "Paris", "population": 2100000, "country": "France"}'
    assert result.stop_reason == "answer"
    request = model.requests[0]
    assert request.tool_names == ["final_answer"]
    assert request.settings.tool_choice == "required"
    assert request.tools[0].parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "population": {"type": "integer", "minimum": 0},
            "country": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": "unknown"},
        },
        "required": ["name", "population", "country"],
        "additionalProperties": False,
    }
    # the transcript stays whole: the final_answer call has its result
    assert tool_messages(result.messages) == ["final answer accepted"]


def test_an_answer_that_does_not_validate_is_an_observation_the_model_corrects() -> None:
    model = ScriptedModel(
        [
            final({"name": "Paris", "population": -5, "country": None, "mayor": "x"}),
            final({"name": "Paris", "population": 2100000, "country": None}, "f2"),
        ]
    )
    result = Agent(model, output_type=City).run_sync("Tell me about Paris.")
    assert result.output == City(name="Paris", population=2100000)  # null means the default
    assert tool_messages(model.requests[1].messages) == [
        "error[invalid_output]: the answer does not match the output schema:\n"
        "- population: Input should be greater than or equal to 0 (got -5)\n"
        "- mayor: unexpected field (not in the schema)"
    ]
    assert result.tool_trace[0].result.error_code == "invalid_output"


def test_output_retries_end_the_run_with_the_partial_result() -> None:
    bad = [final({"name": "Paris"}, f"f{i}") for i in range(5)]
    agent = Agent(ScriptedModel(bad), output_type=City, output_retries=1)
    with pytest.raises(LimitExceeded) as caught:
        agent.run_sync("Tell me about Paris.")
    assert caught.value.limit == "output_retries"
    assert str(caught.value) == (
        "the model's answer did not fit the output type 2 times (output_retries=1); the last "
        "problem: the answer does not match the output schema:\n- population: missing (required)"
    )
    result = caught.value.result
    assert result is not None
    assert result.stop_reason == "output_retries"
    assert len(result.tool_trace) == 2
    assert result.output is None


def test_a_text_answer_is_refused_when_a_final_answer_tool_is_expected() -> None:
    model = ScriptedModel([answer("Paris is big."), final({"name": "Paris", "population": 1})])
    result = Agent(model, output_type=City).run_sync("Tell me about Paris.")
    assert result.output == City(name="Paris", population=1)
    assert model.requests[1].messages[-1].content == (
        "error[invalid_output]: answer by calling the 'final_answer' tool, not with text"
    )


def test_tools_run_before_the_final_answer() -> None:
    model = ScriptedModel(
        [
            calls(call("lookup", "c1", city="Paris")),
            final({"name": "Paris", "population": 2100000, "country": "France"}),
        ]
    )
    result = Agent(model, [lookup], output_type=City).run_sync("Tell me about Paris.")
    assert result.output == City(name="Paris", population=2100000, country="France")
    assert model.requests[0].tool_names == ["lookup", "final_answer"]
    assert model.requests[1].settings.tool_choice == "required"


def test_calls_beside_an_accepted_final_answer_are_answered_as_not_run() -> None:
    turn = AssistantOutput(
        tool_calls=(
            ToolCall(id="c1", name="lookup", arguments={"city": "Paris"}),
            ToolCall(id="f1", name="final_answer", arguments={"name": "Paris", "population": 1}),
        )
    )
    result = Agent(ScriptedModel([turn]), [lookup], output_type=City).run_sync("Paris?")
    assert result.output == City(name="Paris", population=1)
    assert tool_messages(result.messages) == [
        "not run: the final answer ended the run",
        "final answer accepted",
    ]


def test_a_refused_final_answer_lets_the_other_calls_of_its_turn_run() -> None:
    turn = AssistantOutput(
        tool_calls=(
            ToolCall(id="c1", name="lookup", arguments={"city": "Paris"}),
            ToolCall(id="f1", name="final_answer", arguments={"name": "Paris"}),
        )
    )
    model = ScriptedModel([turn, final({"name": "Paris", "population": 1}, "f2")])
    result = Agent(model, [lookup], output_type=City).run_sync("Paris?")
    assert tool_messages(model.requests[1].messages) == [
        "Paris: 2,100,000 people, France",
        "error[invalid_output]: the answer does not match the output schema:\n"
        "- population: missing (required)",
    ]
    assert result.output == City(name="Paris", population=1)


# --- native structured output ---------------------------------------------------------------


def test_a_model_with_structured_output_gets_the_schema_and_answers_json_text() -> None:
    model = NativeModel([answer('{"name": "Oslo", "population": 700000, "country": "Norway"}')])
    result = Agent(model, output_type=City).run_sync("Oslo?")
    assert result.output == City(name="Oslo", population=700000, country="Norway")
    assert result.answer == '{"name": "Oslo", "population": 700000, "country": "Norway"}'
    request = model.requests[0]
    assert request.tools == ()
    assert request.settings.tool_choice == "auto"
    schema = request.settings.output_schema
    assert schema is not None
    assert (schema.name, schema.strict) == ("final_answer", True)
    assert schema.parameters["required"] == ["name", "population", "country"]


def test_native_text_that_is_not_json_is_an_observation() -> None:
    model = NativeModel([answer("Oslo is nice"), answer('{"name": "Oslo", "population": 1}')])
    result = Agent(model, output_type=City).run_sync("Oslo?")
    assert result.output == City(name="Oslo", population=1)
    correction = model.requests[1].messages[-1]
    assert correction.role == "user"
    assert correction.content == (
        "error[invalid_output]: the answer is not valid JSON (Expecting value: line 1 column 1 "
        "(char 0)); answer with one JSON value"
    )


def test_output_mode_tool_overrides_native() -> None:
    model = NativeModel([final({"name": "Oslo", "population": 1})])
    result = Agent(model, output_type=City, output_mode="tool").run_sync("Oslo?")
    assert result.output == City(name="Oslo", population=1)
    assert model.requests[0].settings.output_schema is None


def test_output_mode_native_needs_a_model_that_has_it() -> None:
    with pytest.raises(
        ValueError,
        match=r"output_mode='native' needs a model with structured output; scripted has none",
    ):
        Agent(ScriptedModel([]), output_type=City, output_mode="native")


# --- every kind of type ----------------------------------------------------------------------


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Person(TypedDict):
    name: str
    age: int


@pytest.mark.parametrize(
    ("output_type", "sent", "expected"),
    [
        (Point, {"x": 1.5, "y": 2}, Point(1.5, 2.0)),
        (Person, {"name": "Ada", "age": 36}, {"name": "Ada", "age": 36}),
        (list[int], {"result": [1, 2, 3]}, [1, 2, 3]),
        (Literal["yes", "no"], {"result": "yes"}, "yes"),
        (int, {"result": 42}, 42),
        (bool, {"result": False}, False),
    ],
    ids=["dataclass", "typeddict", "list", "literal", "int", "bool"],
)
def test_any_type_a_tool_parameter_can_be(
    output_type: Any, sent: dict[str, Any], expected: Any
) -> None:
    model = ScriptedModel([final(sent)])
    result = Agent(model, output_type=output_type).run_sync("go")
    assert result.output == expected
    schema = model.requests[0].tools[0].parameters
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


def test_a_scalar_is_wrapped_in_a_result_field_and_refused_with_its_path() -> None:
    model = ScriptedModel([final({"result": "many"}), final({"result": 3}, "f2")])
    result = Agent(model, output_type=int).run_sync("how many?")
    assert result.output == 3
    assert model.requests[0].tools[0].parameters == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "additionalProperties": False,
    }
    assert tool_messages(model.requests[1].messages) == [
        "error[invalid_output]: the answer does not match the output schema:\n"
        "- result: Input should be a valid integer, unable to parse string as an integer (got 'many')"
    ]


def test_without_output_type_nothing_changes_and_output_is_the_answer() -> None:
    model = ScriptedModel([answer("hi")])
    result = Agent(model).run_sync("hello")
    assert (result.answer, result.output) == ("hi", "hi")
    assert model.requests[0].settings.output_schema is None
    assert model.requests[0].settings.tool_choice == "auto"


# --- output validators -----------------------------------------------------------------------


def test_output_validators_check_and_may_change_the_value_in_order() -> None:
    seen: list[tuple[str, Any]] = []

    def known_country(city: City) -> City:
        seen.append(("plain", city.country))
        return city.model_copy(update={"country": city.country.upper()})

    async def with_context(ctx: RunContext[str], city: City) -> None:
        await asyncio.sleep(0)
        seen.append((ctx.deps, city.country))

    model = ScriptedModel([final({"name": "Paris", "population": 1, "country": "fr"})])
    agent = Agent(model, output_type=City, output_validators=[known_country, with_context])
    result = agent.run_sync("Paris?", deps="db")
    assert seen == [("plain", "fr"), ("db", "FR")]
    assert result.output == City(name="Paris", population=1, country="FR")


def test_model_retry_in_an_output_validator_asks_the_model_again() -> None:
    def big_cities_only(city: City) -> City:
        if city.population < 1000:
            raise ModelRetry(f"{city.name} has {city.population} people; pick a city over 1000")
        return city

    model = ScriptedModel(
        [
            final({"name": "Hum", "population": 30}),
            final({"name": "Zagreb", "population": 800000}, "f2"),
        ]
    )
    agent = Agent(model, output_type=City, output_validators=[big_cities_only])
    result = agent.run_sync("a city in Croatia")
    assert result.output == City(name="Zagreb", population=800000)
    assert tool_messages(model.requests[1].messages) == [
        "error[invalid_output]: Hum has 30 people; pick a city over 1000"
    ]


def test_model_retry_in_a_tool_shows_its_message_to_the_model() -> None:
    @tool
    def search(query: str) -> str:
        """Search the web."""
        raise ModelRetry(f"no results for {query!r}; use fewer words")

    model = ScriptedModel([calls(call("search", query="big old city")), answer("ok")])
    result = Agent(model, [search]).run_sync("go")
    assert tool_messages(result.messages) == [
        "error[tool_error]: no results for 'big old city'; use fewer words"
    ]


def test_output_validators_need_an_output_type() -> None:
    with pytest.raises(ValueError, match="output_validators need an output_type"):
        Agent(ScriptedModel([]), output_validators=[lambda value: value])


# --- with the rest of the loop ----------------------------------------------------------------


def test_a_paused_typed_run_resumes_typed() -> None:
    @tool(requires_approval=True)
    def census(city: str) -> int:
        """Count the people of a city."""
        return 2100000

    model = ScriptedModel(
        [calls(call("census", "c1", city="Paris")), final({"name": "Paris", "population": 2100000})]
    )
    agent = Agent(model, [census], output_type=City)
    paused = agent.run_sync("How many people live in Paris?")
    assert paused.stop_reason == "paused"
    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint.to_json(), {"c1": Approve()})
    assert done.output == City(name="Paris", population=2100000)


def test_a_last_answer_at_a_limit_is_asked_for_through_final_answer() -> None:
    model = ScriptedModel(
        [calls(call("lookup", "c1", city="Paris")), final({"name": "Paris", "population": 9})]
    )
    agent = Agent(
        model, [lookup], output_type=City, limits=Limits(max_rounds=1), on_limit="final_answer"
    )
    result = agent.run_sync("Paris?")
    assert result.output == City(name="Paris", population=9)
    assert result.stop_reason == "max_rounds"
    assert model.requests[1].settings.tool_choice == "final_answer"
    assert model.requests[1].tool_names == ["final_answer"]


def test_a_typed_result_round_trips_through_json() -> None:
    model = ScriptedModel([final({"name": "Paris", "population": 1})])
    result = Agent(model, output_type=City).run_sync("Paris?")
    again = type(result).model_validate_json(result.model_dump_json())
    assert again.output == {"name": "Paris", "population": 1, "country": "unknown"}
    assert again.answer == result.answer
