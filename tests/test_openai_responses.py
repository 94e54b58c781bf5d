"""OpenAIResponsesModel against a real HTTP server on 127.0.0.1, through the real openai SDK.

Every test asserts the JSON body the SDK actually sent and what the run produced; the
``stream`` parameter runs the same exchange as server-sent events.
"""

from __future__ import annotations

from typing import Any

import pytest

from _openai_server import (
    ADD_SCHEMA,
    FakeOpenAI,
    Reply,
    add_numbers_tool,
    call_item,
    error_reply,
    message_item,
    refusal_item,
    response_body,
    response_events,
    running,
    weather_spec,
)
from tooldeck import Agent, Limits, Message, ModelSettings, ToolSpec
from tooldeck.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelNotConfigured,
    ModelOutputTruncated,
    ModelRateLimited,
    ModelRefused,
    ModelUnavailable,
    ProviderError,
)
from tooldeck.models.openai import HostedTool, OpenAIResponsesModel
from tooldeck.models.resolve import resolve_model

ADD_TOOL_JSON = {
    "type": "function",
    "name": "add_numbers",
    "description": "Add two integers.",
    "parameters": ADD_SCHEMA,
    "strict": True,
}
WEATHER = weather_spec()


def make_model(server: FakeOpenAI, stream: bool = False, **options: Any) -> OpenAIResponsesModel:
    options.setdefault("max_retries", 0)
    return OpenAIResponsesModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, **options
    )


def respond(server: FakeOpenAI, body: dict[str, Any], stream: bool) -> None:
    server.reply(Reply(events=response_events(body)) if stream else Reply(body=body))


def sent(server: FakeOpenAI, index: int, stream: bool) -> dict[str, Any]:
    """Request ``index`` without the ``stream`` flag, after checking the flag was right."""
    body = dict(server.bodies[index])
    assert body.pop("stream", False) is stream
    return body


async def test_plain_answer_sends_instructions_and_maps_usage(
    server: FakeOpenAI, stream: bool
) -> None:
    respond(server, response_body([message_item("Hello there!")], usage=(31, 4)), stream)
    agent: Agent[None] = Agent(make_model(server, stream), instructions="Be brief.")

    result = await agent.run("Hi")

    assert result.answer == "Hello there!"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (31, 4)
    assert result.usage.requests == 1
    assert sent(server, 0, stream) == {
        "model": "gpt-4.1-mini",
        "input": [{"role": "user", "content": "Hi"}],
        "instructions": "Be brief.",
    }
    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == "Bearer sk-test"


async def test_one_call_then_answer_pairs_call_ids(server: FakeOpenAI, stream: bool) -> None:
    respond(server, response_body([call_item("call_7", "add_numbers", '{"a":2,"b":3}')]), stream)
    respond(server, response_body([message_item("2 + 3 = 5")], id="resp_2"), stream)
    agent: Agent[None] = Agent(make_model(server, stream), tools=[add_numbers_tool()])

    result = await agent.run("What is 2 + 3?")

    assert result.answer == "2 + 3 = 5"
    assert [(t.call.id, t.call.arguments, t.result.output) for t in result.tool_trace] == [
        ("call_7", {"a": 2, "b": 3}, "5")
    ]
    assert sent(server, 0, stream) == {
        "model": "gpt-4.1-mini",
        "input": [{"role": "user", "content": "What is 2 + 3?"}],
        "tools": [ADD_TOOL_JSON],
        "tool_choice": "auto",
    }
    assert sent(server, 1, stream)["input"] == [
        {"role": "user", "content": "What is 2 + 3?"},
        {
            "type": "function_call",
            "call_id": "call_7",
            "name": "add_numbers",
            "arguments": '{"a": 2, "b": 3}',
        },
        {"type": "function_call_output", "call_id": "call_7", "output": "5"},
    ]
    assert result.usage.requests == 2


async def test_several_calls_in_one_turn_each_get_their_result(
    server: FakeOpenAI, stream: bool
) -> None:
    turn = [
        call_item("call_a", "add_numbers", '{"a":1,"b":2}'),
        call_item("call_b", "add_numbers", '{"a":10,"b":20}'),
    ]
    respond(server, response_body(turn), stream)
    respond(server, response_body([message_item("3 and 30")], id="resp_2"), stream)
    settings = ModelSettings(parallel_tool_calls=True)
    agent: Agent[None] = Agent(
        make_model(server, stream), tools=[add_numbers_tool()], settings=settings
    )

    result = await agent.run("Add both pairs")

    assert result.answer == "3 and 30"
    assert sent(server, 0, stream)["parallel_tool_calls"] is True
    assert sent(server, 1, stream)["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "add_numbers",
            "arguments": '{"a": 1, "b": 2}',
        },
        {
            "type": "function_call",
            "call_id": "call_b",
            "name": "add_numbers",
            "arguments": '{"a": 10, "b": 20}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "3"},
        {"type": "function_call_output", "call_id": "call_b", "output": "30"},
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ("get_weather", {"type": "function", "name": "get_weather"}),
        ("web_search", {"type": "web_search"}),
    ],
)
async def test_tool_choice_is_mapped(server: FakeOpenAI, choice: str, wire: object) -> None:
    respond(server, response_body([message_item("ok")]), stream=False)
    model = make_model(server, hosted_tools=[HostedTool.web_search()])

    await model.complete([Message.user("Weather?")], [WEATHER], ModelSettings(tool_choice=choice))

    assert server.bodies[0]["tool_choice"] == wire


async def test_strict_flag_and_sampling_settings_are_sent(server: FakeOpenAI) -> None:
    respond(server, response_body([message_item("ok")]), stream=False)
    loose = ToolSpec(name="note", parameters={"type": "object", "properties": {}}, strict=False)
    settings = ModelSettings(parallel_tool_calls=False, temperature=0.0, max_tokens=64)

    await make_model(server).complete([Message.user("x")], [WEATHER, loose], settings)

    assert server.bodies[0] == {
        "model": "gpt-4.1-mini",
        "input": [{"role": "user", "content": "x"}],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current temperature for a city.",
                "parameters": WEATHER.parameters,
                "strict": True,
            },
            {
                "type": "function",
                "name": "note",
                "parameters": {"type": "object", "properties": {}},
                "strict": False,
            },
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "temperature": 0.0,
        "max_output_tokens": 64,
    }


async def test_hosted_tools_pass_through_and_their_activity_is_kept(
    server: FakeOpenAI, stream: bool
) -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "tooldeck release"},
    }
    respond(server, response_body([search, message_item("It shipped.")]), stream)
    respond(server, response_body([message_item("You asked about tooldeck.")]), stream)
    hosted = [HostedTool.web_search(), {"type": "file_search", "vector_store_ids": ["vs_1"]}]
    model = make_model(server, stream, hosted_tools=hosted)
    agent: Agent[None] = Agent(model, tools=[add_numbers_tool()])

    first = await agent.run("Did tooldeck ship?")
    second = await agent.run("What did I ask?", history=first.messages)

    assert sent(server, 0, stream)["tools"] == [
        ADD_TOOL_JSON,
        {"type": "web_search"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
    ]
    assert first.answer == "It shipped."
    assert first.messages[-1].provider_items == (search,)
    assert sent(server, 1, stream)["input"] == [
        {"role": "user", "content": "Did tooldeck ship?"},
        search,
        {"role": "assistant", "content": "It shipped."},
        {"role": "user", "content": "What did I ask?"},
    ]
    assert second.answer == "You asked about tooldeck."


async def test_unknown_output_item_is_kept_and_not_sent_back(server: FakeOpenAI) -> None:
    novel = {"type": "hologram_call", "id": "hg_1", "status": "completed", "frames": [1, 2]}
    respond(server, response_body([novel, message_item("Done.")]), stream=False)
    respond(server, response_body([message_item("Again.")]), stream=False)
    agent: Agent[None] = Agent(make_model(server))

    first = await agent.run("Show me")
    await agent.run("Once more", history=first.messages)

    assert first.answer == "Done."
    assert first.messages[-1].provider_items == (novel,)
    assert novel not in server.bodies[1]["input"]


async def test_malformed_arguments_reach_the_model_as_invalid_json(
    server: FakeOpenAI, stream: bool
) -> None:
    respond(server, response_body([call_item("call_1", "add_numbers", '{"a": 2, "b":')]), stream)
    respond(server, response_body([message_item("Sorry.")]), stream)
    agent: Agent[None] = Agent(make_model(server, stream), tools=[add_numbers_tool()])

    result = await agent.run("Add")

    assert result.tool_trace[0].result.error_code == "invalid_json"
    call, output = sent(server, 1, stream)["input"][1:]
    assert call["arguments"] == '{"a": 2, "b":'
    assert output["call_id"] == "call_1"
    assert output["output"].startswith("error[invalid_json]: ")
    assert result.answer == "Sorry."


@pytest.mark.parametrize("where", ["only_in_item_events", "only_in_completed_event"])
async def test_a_stream_is_assembled_wherever_its_items_arrive(
    server: FakeOpenAI, where: str
) -> None:
    final = response_body([call_item("call_1", "add_numbers", '{"a":1,"b":2}')])
    events = response_events(final)
    if where == "only_in_item_events":
        name, completed = events[-1]
        events[-1] = (name, {**completed, "response": {**final, "output": []}})
    else:
        events = [event for event in events if not event[0].startswith("response.output_item")]
    server.reply(Reply(events=events))

    output = await make_model(server, stream=True).complete(
        [Message.user("1+2")], [], ModelSettings()
    )

    assert [(c.id, c.name, c.arguments) for c in output.tool_calls] == [
        ("call_1", "add_numbers", {"a": 1, "b": 2})
    ]
    assert output.usage is not None
    assert output.usage.input_tokens == 12


async def test_reasoning_items_go_back_before_the_calls_they_led_to(server: FakeOpenAI) -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    turn = [reasoning, call_item("call_1", "add_numbers", '{"a":1,"b":1}')]
    respond(server, response_body(turn), False)
    respond(server, response_body([message_item("2")], id="resp_2"), False)
    model = make_model(
        server, store=False, request_options={"include": ["reasoning.encrypted_content"]}
    )
    agent: Agent[None] = Agent(model, tools=[add_numbers_tool()])

    result = await agent.run("1+1?")

    assert result.messages[1].provider_items == (reasoning,)
    first, second = server.bodies
    assert (first["store"], first["include"]) == (False, ["reasoning.encrypted_content"])
    assert [item.get("type") for item in second["input"]] == [
        None,
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert second["input"][1] == reasoning


def test_server_state_needs_stored_responses() -> None:
    with pytest.raises(ModelNotConfigured, match="drop store=False"):
        OpenAIResponsesModel("m", api_key="k", server_state=True, store=False)


async def test_server_state_sends_only_new_items_after_a_stored_response(
    server: FakeOpenAI,
) -> None:
    respond(server, response_body([call_item("call_1", "add_numbers", '{"a":1,"b":1}')]), False)
    respond(server, response_body([message_item("2")], id="resp_2"), False)
    agent: Agent[None] = Agent(
        make_model(server, server_state=True), tools=[add_numbers_tool()], instructions="Math."
    )

    result = await agent.run("1+1?")

    assert result.answer == "2"
    second = server.bodies[1]
    assert second["previous_response_id"] == "resp_1"
    assert second["instructions"] == "Math."
    assert second["input"] == [{"type": "function_call_output", "call_id": "call_1", "output": "2"}]


# --- failures ------------------------------------------------------------------------------


async def test_unauthorized_says_which_key_and_keeps_the_run(server: FakeOpenAI) -> None:
    server.reply(error_reply(401, "Incorrect API key provided: sk-test.", "invalid_request_error"))
    agent: Agent[None] = Agent(make_model(server))

    with pytest.raises(ModelAuthError) as caught:
        await agent.run("Hi")

    message = str(caught.value)
    assert "HTTP 401" in message
    assert "Incorrect API key provided" in message
    assert "OPENAI_API_KEY" in message
    assert caught.value.status_code == 401
    assert caught.value.result is not None
    assert caught.value.result.messages == (Message.user("Hi"),)
    assert caught.value.result.stop_reason == "model_error"


async def test_rate_limit_is_raised_after_the_sdk_retries(server: FakeOpenAI) -> None:
    limited = error_reply(429, "Rate limit reached for requests", "requests", "rate_limit_exceeded")
    server.reply(limited, limited)
    agent: Agent[None] = Agent(make_model(server, max_retries=1))

    with pytest.raises(ModelRateLimited, match=r"after 1 retries: Rate limit reached"):
        await agent.run("Hi")

    assert len(server.requests) == 2


async def test_bad_request_names_the_parameter(server: FakeOpenAI) -> None:
    body = {
        "error": {
            "message": "Invalid schema for function 'get_weather'.",
            "type": "invalid_request_error",
            "param": "tools[0].parameters",
            "code": "invalid_function_parameters",
        }
    }
    server.reply(Reply(400, body))

    with pytest.raises(ModelBadRequest) as caught:
        await make_model(server).complete([Message.user("x")], [WEATHER], ModelSettings())

    assert "HTTP 400" in str(caught.value)
    assert "Invalid schema for function 'get_weather'." in str(caught.value)
    assert "'tools[0].parameters'" in str(caught.value)


async def test_server_error_is_unavailable_after_retries(server: FakeOpenAI) -> None:
    failing = error_reply(500, "The server had an error.", "server_error")
    server.reply(failing, failing, failing)

    with pytest.raises(ModelUnavailable, match=r"HTTP 500 .*after 2 retries"):
        await make_model(server, max_retries=2).complete([Message.user("x")], [], ModelSettings())

    assert len(server.requests) == 3


async def test_unreachable_server_is_unavailable() -> None:
    with running() as gone:
        url = gone.url
    model = OpenAIResponsesModel("gpt-4.1-mini", base_url=url, api_key="k", max_retries=0)

    with pytest.raises(ModelUnavailable, match=r"could not connect to http://127\.0\.0\.1"):
        await model.complete([Message.user("x")], [], ModelSettings())


async def test_refusal_is_a_model_error_with_the_text(server: FakeOpenAI, stream: bool) -> None:
    respond(server, response_body([refusal_item("I can't help with that.")]), stream)

    with pytest.raises(ModelRefused) as caught:
        await make_model(server, stream).complete([Message.user("x")], [], ModelSettings())

    assert caught.value.refusal == "I can't help with that."


async def test_incomplete_response_is_truncated_with_partial_text(
    server: FakeOpenAI, stream: bool
) -> None:
    cut = response_body(
        [message_item("The first half")], status="incomplete", incomplete_reason="max_output_tokens"
    )
    respond(server, cut, stream)
    settings = ModelSettings(max_tokens=4)

    with pytest.raises(ModelOutputTruncated, match="max_output_tokens") as caught:
        await make_model(server, stream).complete([Message.user("x")], [], settings)

    assert caught.value.partial_text == "The first half"


async def test_failed_response_and_stream_error_event_say_what_happened(
    server: FakeOpenAI,
) -> None:
    error = {"code": "server_error", "message": "The model failed to generate a response."}
    respond(server, response_body([], status="failed", error=error, usage=None), stream=True)
    error_event = {"type": "error", "code": "ERR_X", "message": "Boom", "param": None}
    server.reply(Reply(events=[("error", {**error_event, "sequence_number": 0})]))
    model = make_model(server, stream=True)

    with pytest.raises(ProviderError, match="server_error: The model failed"):
        await model.complete([Message.user("x")], [], ModelSettings())
    with pytest.raises(ProviderError, match="stream reported an error: ERR_X: Boom"):
        await model.complete([Message.user("x")], [], ModelSettings())


# --- construction --------------------------------------------------------------------------


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    with pytest.raises(ModelNotConfigured, match="set the OPENAI_API_KEY environment variable"):
        resolve_model("openai:gpt-4.1-mini")


async def test_a_client_passed_in_is_used_as_is(server: FakeOpenAI) -> None:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        base_url=server.url, api_key="sk-gateway", default_headers={"x-gateway": "team-a"}
    )
    respond(server, response_body([message_item("ok")]), stream=False)
    model = OpenAIResponsesModel("gpt-4.1-mini", client=client)

    await model.complete([Message.user("x")], [], ModelSettings())
    await model.aclose()

    assert model.client is client
    assert server.requests[0].headers["x-gateway"] == "team-a"
    assert server.requests[0].headers["authorization"] == "Bearer sk-gateway"
    assert not client.is_closed()
    with pytest.raises(ModelNotConfigured, match="api_key would be ignored"):
        OpenAIResponsesModel("gpt-4.1-mini", client=client, api_key="other")
    await client.close()


def test_model_string_resolves_with_options(server: FakeOpenAI) -> None:
    model = resolve_model("openai:gpt-4.1-mini", base_url=server.url, api_key="k")

    assert isinstance(model, OpenAIResponsesModel)
    assert model.name == "openai:gpt-4.1-mini"
    assert str(model.client.base_url) == server.url + "/"


def test_hosted_tool_without_a_type_is_refused() -> None:
    with pytest.raises(ModelNotConfigured, match="needs a 'type'"):
        OpenAIResponsesModel("m", api_key="k", hosted_tools=[{"name": "search"}])


def test_limits_do_not_change_the_request_count_the_run_reports(server: FakeOpenAI) -> None:
    respond(server, response_body([call_item("c1", "add_numbers", '{"a":1,"b":2}')]), False)
    respond(server, response_body([message_item("3")]), False)
    agent: Agent[None] = Agent(
        make_model(server), tools=[add_numbers_tool()], limits=Limits(max_rounds=2)
    )

    result = agent.run_sync("1+2")

    assert result.answer == "3"
    assert result.usage.requests == len(server.requests) == 2
