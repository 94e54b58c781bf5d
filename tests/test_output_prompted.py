"""Typed answers asked for in the instructions: ``output_mode="prompted"``, and ``"auto"``
falling back to it (once, then remembered) where a server refuses structured output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from _openai_server import FakeOpenAI, Reply, completion_body, completion_chunks, error_reply
from helpers import answer, call, calls
from tooldeck import Agent, AssistantOutput, ScriptedModel, tool
from tooldeck.errors import ModelAuthError, ProviderError
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.models.scripted import RecordedRequest
from tooldeck.run.events import FinalAnswer


class City(BaseModel):
    name: str
    population: int


CITY_SCHEMA = {
    "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"],
    "type": "object",
    "additionalProperties": False,
}
RULE = (
    "When you give your final answer, reply with only one JSON object that matches this JSON "
    "Schema, and no other text:\n" + json.dumps(CITY_SCHEMA)
)
"""What the model reads of the schema (the strict form tool schemas have, in its order)."""


@tool
def look_up(city: str) -> str:
    """Look a city up."""
    return f"{city}: 2,100,000 people"


def test_prompted_mode_puts_the_schema_in_the_instructions_and_reads_the_text() -> None:
    model = ScriptedModel(
        [
            calls(call("look_up", "c1", city="Paris")),
            answer('Here it is:\n```json\n{"name": "Paris", "population": 2100000}\n```'),
        ]
    )
    agent = Agent(
        model, [look_up], instructions="Be brief.", output_type=City, output_mode="prompted"
    )

    result = agent.run_sync("How many people live in Paris?")

    assert result.output == City(name="Paris", population=2100000)
    for request in model.requests:
        assert request.instructions == f"Be brief.\n\n{RULE}"
        assert request.settings.output_schema is None
        assert request.settings.tool_choice == "auto"
        assert [spec.name for spec in request.tools] == ["look_up"]  # no final_answer tool


def test_a_prompted_answer_that_does_not_fit_is_an_observation_the_model_corrects() -> None:
    model = ScriptedModel(
        [
            answer("Paris has about two million people."),
            answer('{"name": "Paris", "population": "many"}'),
            answer('Sure: {"name": "Paris", "population": 2100000} as asked'),
        ]
    )
    agent = Agent(model, output_type=City, output_mode="prompted")

    result = agent.run_sync("Paris?")

    assert result.output == City(name="Paris", population=2100000)
    observations = [m.content for m in result.messages if m.role == "user"][1:]
    assert observations == [
        "error[invalid_output]: the answer is not valid JSON (Expecting value: line 1 column 1 "
        "(char 0)); answer with one JSON value",
        "error[invalid_output]: the answer does not match the output schema:\n- population: "
        "Input should be a valid integer, unable to parse string as an integer (got 'many')",
    ]


class NativeScripted(ScriptedModel):
    """A scripted model that claims structured output, as an OpenAI-compatible server does."""

    native_output = True


def refusing(then: AssistantOutput, status: int = 500) -> Any:
    """A scripted reply that fails like llama.cpp's server when asked for structured output."""

    def reply(request: RecordedRequest) -> AssistantOutput:
        if request.settings.output_schema is not None:
            raise ProviderError(
                f"HTTP {status}: response_format json_schema is not supported", status
            )
        return then

    return reply


def sent(model: ScriptedModel) -> list[tuple[bool, bool]]:
    """For each request: (it asked for structured output, the schema was in the instructions)."""
    return [(r.settings.output_schema is not None, RULE in r.instructions) for r in model.requests]


@pytest.mark.parametrize("status", [500, 400])
async def test_auto_falls_back_once_where_the_server_refuses_and_remembers_the_model(
    status: int,
) -> None:
    good = answer('{"name": "Rome", "population": 2800000}')
    model = NativeScripted([refusing(good, status), refusing(good, status), refusing(good)])
    agent = Agent(model, output_type=City)

    first = await agent.run("Rome?")
    assert first.output == City(name="Rome", population=2800000)
    assert sent(model) == [(True, False), (False, True)]

    again = await Agent(model, output_type=City).run("Rome again?")  # another agent, same model
    assert again.output == first.output
    assert sent(model)[2:] == [(False, True)]  # no refused request first


async def test_a_streamed_run_falls_back_the_same_way() -> None:
    good = answer('{"name": "Oslo", "population": 700000}')
    model = NativeScripted([refusing(good), refusing(good)])
    agent = Agent(model, output_type=City)
    finals = [e async for e in agent.stream("Oslo?", deltas=True) if isinstance(e, FinalAnswer)]
    assert [final.result.output for final in finals] == [City(name="Oslo", population=700000)]
    assert sent(model) == [(True, False), (False, True)]


async def test_other_failures_and_an_explicit_native_mode_do_not_fall_back() -> None:
    def unauthorized(request: RecordedRequest) -> AssistantOutput:
        raise ModelAuthError("HTTP 401: bad key", 401)

    model = NativeScripted([unauthorized])
    with pytest.raises(ModelAuthError):
        await Agent(model, output_type=City).run("Rome?")
    assert len(model.requests) == 1

    native = NativeScripted([refusing(answer("{}"))])
    with pytest.raises(ProviderError, match="HTTP 500"):
        await Agent(native, output_type=City, output_mode="native").run("Rome?")
    assert sent(native) == [(True, False)]


def test_an_unknown_output_mode_names_the_four() -> None:
    with pytest.raises(ValueError, match="output_mode") as raised:
        Agent(ScriptedModel([]), output_type=City, output_mode="json")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "output_mode must be 'auto', 'native', 'tool' or 'prompted', got 'json'"
    )


async def test_an_openai_compatible_server_refusing_response_format_gets_the_prompted_way(
    server: FakeOpenAI, stream: bool
) -> None:
    server.reply(error_reply(500, "Input should be 'text' or 'json_object'", "server_error"))
    body = completion_body('{"name": "Lima", "population": 10000000}')
    server.reply(Reply(events=completion_chunks(body)) if stream else Reply(body=body))
    model = OpenAIChatModel(
        "local", base_url=server.url, api_key="sk-test", stream=stream, max_retries=0
    )
    try:
        result = await Agent(model, output_type=City, instructions="Be exact.").run("Lima?")
    finally:
        await model.aclose()

    assert result.output == City(name="Lima", population=10000000)
    refused, prompted = server.bodies
    assert refused["response_format"]["type"] == "json_schema"
    assert "response_format" not in prompted
    assert prompted["messages"][0] == {"role": "system", "content": f"Be exact.\n\n{RULE}"}
