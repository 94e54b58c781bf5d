"""Typed answers through both OpenAI APIs: the structured-output format in the exact request."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from _openai_server import (
    ADD_SCHEMA,
    FakeOpenAI,
    Reply,
    add_numbers_tool,
    chat_call,
    completion_body,
    completion_chunks,
    error_reply,
    message_item,
    response_body,
    response_events,
)
from tooldeck import Agent
from tooldeck.errors import ModelError, ProviderError
from tooldeck.models.openai import OpenAIChatModel, OpenAIResponsesModel


class Sum(BaseModel):
    total: int
    explanation: str


SUM_SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "integer"}, "explanation": {"type": "string"}},
    "required": ["total", "explanation"],
    "additionalProperties": False,
}
DESCRIPTION = "The final answer."


def chat_model(server: FakeOpenAI, stream: bool) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, max_retries=0
    )


def responses_model(server: FakeOpenAI, stream: bool) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, max_retries=0
    )


def chat_reply(server: FakeOpenAI, body: dict[str, Any], stream: bool) -> None:
    server.reply(Reply(events=completion_chunks(body)) if stream else Reply(body=body))


def responses_reply(server: FakeOpenAI, body: dict[str, Any], stream: bool) -> None:
    server.reply(Reply(events=response_events(body)) if stream else Reply(body=body))


async def test_chat_completions_sends_response_format_beside_the_tools(
    server: FakeOpenAI, stream: bool
) -> None:
    chat_reply(
        server,
        completion_body(None, [chat_call("call_1", "add_numbers", '{"a": 2, "b": 3}')]),
        stream,
    )
    chat_reply(server, completion_body('{"total": 5, "explanation": "2 plus 3"}'), stream)
    agent = Agent(chat_model(server, stream), [add_numbers_tool()], output_type=Sum)

    result = await agent.run("Add 2 and 3.")

    assert result.output == Sum(total=5, explanation="2 plus 3")
    body = server.bodies[0]
    body.pop("stream", None)
    body.pop("stream_options", None)
    assert body == {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "user", "content": "Add 2 and 3."}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "add_numbers",
                    "description": "Add two integers.",
                    "parameters": ADD_SCHEMA,
                    "strict": True,
                },
            }
        ],
        "tool_choice": "auto",
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "final_answer",
                "description": DESCRIPTION,
                "schema": SUM_SCHEMA,
                "strict": True,
            },
        },
    }
    assert server.bodies[1]["response_format"] == body["response_format"]


async def test_chat_completions_invalid_answer_is_sent_back_as_an_observation(
    server: FakeOpenAI, stream: bool
) -> None:
    chat_reply(server, completion_body('{"total": "five"}'), stream)
    chat_reply(server, completion_body('{"total": 5, "explanation": "sum"}'), stream)
    agent = Agent(chat_model(server, stream), output_type=Sum)

    result = await agent.run("Add 2 and 3.")

    assert result.output == Sum(total=5, explanation="sum")
    assert server.bodies[1]["messages"][1:] == [
        {"role": "assistant", "content": '{"total": "five"}'},
        {
            "role": "user",
            "content": "error[invalid_output]: the answer does not match the output schema:\n"
            "- total: Input should be a valid integer, unable to parse string as an integer (got 'five')\n"
            "- explanation: missing (required)",
        },
    ]


async def test_responses_sends_text_format_json_schema(server: FakeOpenAI, stream: bool) -> None:
    responses_reply(
        server, response_body([message_item('{"total": 7, "explanation": "3 plus 4"}')]), stream
    )
    agent = Agent(responses_model(server, stream), output_type=Sum, instructions="Be exact.")

    result = await agent.run("Add 3 and 4.")

    assert result.output == Sum(total=7, explanation="3 plus 4")
    assert result.answer == '{"total": 7, "explanation": "3 plus 4"}'
    body = server.bodies[0]
    body.pop("stream", None)
    assert body == {
        "model": "gpt-4.1-mini",
        "input": [{"role": "user", "content": "Add 3 and 4."}],
        "instructions": "Be exact.",
        "text": {
            "format": {
                "type": "json_schema",
                "name": "final_answer",
                "description": DESCRIPTION,
                "schema": SUM_SCHEMA,
                "strict": True,
            }
        },
    }


async def test_the_tool_mode_sends_a_final_answer_tool_instead(
    server: FakeOpenAI, stream: bool
) -> None:
    chat_reply(
        server,
        completion_body(
            None, [chat_call("call_f", "final_answer", '{"total": 1, "explanation": "one"}')]
        ),
        stream,
    )
    agent = Agent(chat_model(server, stream), output_type=Sum, output_mode="tool")

    result = await agent.run("One?")

    assert result.output == Sum(total=1, explanation="one")
    body = server.bodies[0]
    assert "response_format" not in body
    assert body["tool_choice"] == "required"
    assert [tool["function"]["name"] for tool in body["tools"]] == ["final_answer"]
    assert body["tools"][0]["function"]["parameters"] == SUM_SCHEMA


async def test_a_server_refusing_the_forced_final_answer_call_is_told_of_the_prompted_way(
    server: FakeOpenAI, stream: bool
) -> None:
    server.reply(error_reply(500, "tool_choice 'required' is not supported", "server_error"))
    agent = Agent(chat_model(server, stream), output_type=Sum, output_mode="tool")

    with pytest.raises(ProviderError) as refused:
        await agent.run("One?")

    assert refused.value.status_code == 500
    assert refused.value.__notes__[-1] == (
        "(the request forced a call of the final_answer tool, which asks for the typed answer; "
        "some servers refuse forced tool calls: output_mode='prompted' asks for it in the "
        "instructions instead)"
    )
    assert server.bodies[0]["tool_choice"] == "required"


async def test_a_failure_that_is_no_refusal_carries_no_such_note(
    server: FakeOpenAI, stream: bool
) -> None:
    server.reply(error_reply(503, "overloaded", "server_error"))
    agent = Agent(chat_model(server, stream), output_type=Sum, output_mode="tool")

    with pytest.raises(ModelError) as refused:
        await agent.run("One?")

    assert not any("final_answer" in note for note in getattr(refused.value, "__notes__", ()))
