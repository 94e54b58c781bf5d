"""OpenAIChatModel against a real HTTP server on 127.0.0.1, through the real openai SDK.

Chat Completions as OpenAI, Azure OpenAI and OpenAI-compatible servers speak it; each test
asserts the JSON the SDK sent and what the run produced, as JSON and as a chunk stream.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from _openai_server import (
    ADD_SCHEMA,
    FakeOpenAI,
    Reply,
    add_numbers_tool,
    chat_call,
    completion_body,
    completion_chunks,
    error_reply,
    weather_spec,
)
from tooldeck import Agent, Message, ModelSettings, ToolSpec
from tooldeck.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelNotConfigured,
    ModelOutputTruncated,
    ModelRateLimited,
    ModelRefused,
    ModelUnavailable,
)
from tooldeck.models.openai import HostedTool, OpenAIChatModel
from tooldeck.models.resolve import resolve_model

ADD_TOOL_JSON = {
    "type": "function",
    "function": {
        "name": "add_numbers",
        "description": "Add two integers.",
        "parameters": ADD_SCHEMA,
        "strict": True,
    },
}
WEATHER = weather_spec()


def make_model(server: FakeOpenAI, stream: bool = False, **options: Any) -> OpenAIChatModel:
    options.setdefault("max_retries", 0)
    return OpenAIChatModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, **options
    )


def respond(server: FakeOpenAI, body: dict[str, Any], stream: bool) -> None:
    server.reply(Reply(events=completion_chunks(body)) if stream else Reply(body=body))


def sent(server: FakeOpenAI, index: int, stream: bool) -> dict[str, Any]:
    """Request ``index`` without the streaming fields, after checking they were right."""
    body = dict(server.bodies[index])
    assert body.pop("stream", False) is stream
    assert body.pop("stream_options", None) == ({"include_usage": True} if stream else None)
    return body


async def test_plain_answer_with_system_instructions_and_usage(
    server: FakeOpenAI, stream: bool
) -> None:
    respond(server, completion_body("Hello there!", usage=(19, 3)), stream)
    agent: Agent[None] = Agent(make_model(server, stream), instructions="Be brief.")

    result = await agent.run("Hi")

    assert result.answer == "Hello there!"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (19, 3)
    assert sent(server, 0, stream) == {
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
    }
    assert server.requests[0].path == "/v1/chat/completions"


async def test_one_call_then_answer_pairs_call_ids(server: FakeOpenAI, stream: bool) -> None:
    respond(
        server, completion_body(None, [chat_call("call_7", "add_numbers", '{"a":2,"b":3}')]), stream
    )
    respond(server, completion_body("2 + 3 = 5"), stream)
    agent: Agent[None] = Agent(make_model(server, stream), tools=[add_numbers_tool()])

    result = await agent.run("What is 2 + 3?")

    assert result.answer == "2 + 3 = 5"
    assert [(t.call.id, t.call.arguments, t.result.output) for t in result.tool_trace] == [
        ("call_7", {"a": 2, "b": 3}, "5")
    ]
    assert sent(server, 0, stream) == {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "user", "content": "What is 2 + 3?"}],
        "tools": [ADD_TOOL_JSON],
        "tool_choice": "auto",
    }
    assert sent(server, 1, stream)["messages"] == [
        {"role": "user", "content": "What is 2 + 3?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "add_numbers", "arguments": '{"a": 2, "b": 3}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_7", "content": "5"},
    ]


async def test_several_calls_in_one_turn_each_get_their_result(
    server: FakeOpenAI, stream: bool
) -> None:
    turn = [
        chat_call("call_a", "add_numbers", '{"a":1,"b":2}'),
        chat_call("call_b", "add_numbers", '{"a":10,"b":20}'),
    ]
    respond(server, completion_body("Adding both.", turn), stream)
    respond(server, completion_body("3 and 30"), stream)
    agent: Agent[None] = Agent(make_model(server, stream), tools=[add_numbers_tool()])

    result = await agent.run("Add both pairs")

    assert result.answer == "3 and 30"
    assistant, *tools = sent(server, 1, stream)["messages"][1:]
    assert assistant["content"] == "Adding both."
    assert [call["id"] for call in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert tools == [
        {"role": "tool", "tool_call_id": "call_a", "content": "3"},
        {"role": "tool", "tool_call_id": "call_b", "content": "30"},
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice_is_mapped(server: FakeOpenAI, choice: str, wire: object) -> None:
    respond(server, completion_body("ok"), stream=False)

    await make_model(server).complete(
        [Message.user("Weather?")], [WEATHER], ModelSettings(tool_choice=choice)
    )

    assert server.bodies[0]["tool_choice"] == wire


async def test_strict_flag_and_settings_are_sent(server: FakeOpenAI) -> None:
    respond(server, completion_body("ok"), stream=False)
    loose = ToolSpec(name="note", parameters={"type": "object", "properties": {}}, strict=False)
    settings = ModelSettings(parallel_tool_calls=False, temperature=0.2, max_tokens=64)
    model = make_model(server, instructions_role="developer")

    await model.complete([Message.user("x")], [WEATHER, loose], settings, "Rules.")

    assert server.bodies[0] == {
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "developer", "content": "Rules."},
            {"role": "user", "content": "x"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current temperature for a city.",
                    "parameters": WEATHER.parameters,
                    "strict": True,
                },
            },
            {
                "type": "function",
                "function": {"name": "note", "parameters": {"type": "object", "properties": {}}},
            },
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "max_tokens": 64,
    }


async def test_max_tokens_field_follows_the_server_kind(server: FakeOpenAI) -> None:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
    respond(server, completion_body("ok"), stream=False)
    respond(server, completion_body("ok"), stream=False)
    settings = ModelSettings(max_tokens=9)

    await OpenAIChatModel("m", client=client).complete([Message.user("x")], [], settings)
    await make_model(server, max_tokens_param="max_completion_tokens").complete(
        [Message.user("x")], [], settings
    )

    assert [body.get("max_completion_tokens") for body in server.bodies] == [9, 9]
    assert all("max_tokens" not in body for body in server.bodies)
    await client.close()


def test_hosted_tools_are_refused_by_name() -> None:
    with pytest.raises(ModelNotConfigured, match=r"hosted tool 'web_search' needs the Responses"):
        OpenAIChatModel("gpt-4.1-mini", api_key="k", hosted_tools=[HostedTool.web_search()])
    with pytest.raises(ModelNotConfigured, match=r"'code_interpreter'"):
        resolve_model(
            "openai-chat:gpt-4.1-mini",
            api_key="k",
            hosted_tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
        )


async def test_malformed_arguments_reach_the_model_as_invalid_json(
    server: FakeOpenAI, stream: bool
) -> None:
    respond(server, completion_body(None, [chat_call("call_1", "add_numbers", "{'a': 2}")]), stream)
    respond(server, completion_body("Sorry."), stream)
    agent: Agent[None] = Agent(make_model(server, stream), tools=[add_numbers_tool()])

    result = await agent.run("Add")

    assert result.tool_trace[0].result.error_code == "invalid_json"
    assistant, tool = sent(server, 1, stream)["messages"][1:]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{'a': 2}"
    assert tool["tool_call_id"] == "call_1"
    assert tool["content"].startswith("error[invalid_json]: ")
    assert result.answer == "Sorry."


async def test_hostile_arguments_and_text_become_observations_not_model_errors(
    server: FakeOpenAI, stream: bool
) -> None:
    deep = "[" * 100_000
    surrogate = '{"a": "\\ud800", "b": 1}'  # JSON for a lone surrogate, as a broken model sends
    calls = [
        chat_call("call_1", "add_numbers", deep),
        chat_call("call_2", "add_numbers", surrogate),
    ]
    respond(server, completion_body("\ud800 thinking", calls), stream)
    respond(server, completion_body("Sorry."), stream)
    agent: Agent[None] = Agent(make_model(server, stream), tools=[add_numbers_tool()])

    result = await agent.run("Add")

    assert [trace.result.output for trace in result.tool_trace] == [
        "error[invalid_json]: the arguments for 'add_numbers' are nested too deeply to read; "
        "send one flat JSON object",
        "error[invalid_json]: the arguments for 'add_numbers' contain text that is not valid "
        "Unicode (a lone surrogate such as '\\ud800'); send valid UTF-8 text",
    ]
    assistant = sent(server, 1, stream)["messages"][1]
    assert assistant["content"] == "\ufffd thinking"  # repaired, so the request could be sent
    assert [call["function"]["arguments"] for call in assistant["tool_calls"]] == [deep, surrogate]
    assert result.answer == "Sorry."


async def test_stream_that_repeats_the_call_name_in_every_chunk(server: FakeOpenAI) -> None:
    """llama.cpp's server sends the id and the whole name again with each arguments piece."""
    head = {"index": 0, "id": "call_x", "type": "function"}
    pieces = ['{"a": 4,', ' "b": 5}']
    deltas = [
        {"tool_calls": [{**head, "function": {"name": "add_numbers", "arguments": piece}}]}
        for piece in pieces
    ]
    chunks = [
        {
            "id": "chatcmpl-2",
            "object": "chat.completion.chunk",
            "created": 1741476542,
            "model": "gemma",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        for delta, finish in [(deltas[0], None), (deltas[1], None), ({}, "tool_calls")]
    ]
    server.reply(Reply(events=[(None, chunk) for chunk in chunks] + [(None, "[DONE]")]))

    output = await make_model(server, stream=True).complete(
        [Message.user("x")], [], ModelSettings()
    )

    assert [(c.id, c.name, c.arguments) for c in output.tool_calls] == [
        ("call_x", "add_numbers", {"a": 4, "b": 5})
    ]
    assert output.usage is None


async def test_unknown_tool_call_kind_is_kept_not_crashed(server: FakeOpenAI) -> None:
    custom = {"id": "call_9", "type": "custom", "custom": {"name": "grammar", "input": "x+1"}}
    respond(server, completion_body("Here.", [custom], finish_reason="stop"), stream=False)

    output = await make_model(server).complete([Message.user("x")], [], ModelSettings())

    assert output.content == "Here."
    assert output.tool_calls == ()
    assert output.provider_items == (custom,)


# --- failures ------------------------------------------------------------------------------


async def test_unauthorized_says_which_key_and_keeps_the_run(server: FakeOpenAI) -> None:
    server.reply(error_reply(401, "Invalid API key.", "invalid_request_error"))
    agent: Agent[None] = Agent(make_model(server))

    with pytest.raises(
        ModelAuthError, match=r"HTTP 401.*Invalid API key.*OPENAI_API_KEY"
    ) as caught:
        await agent.run("Hi")

    assert caught.value.result is not None
    assert caught.value.result.messages == (Message.user("Hi"),)


async def test_rate_limit_is_raised_after_the_sdk_retries(server: FakeOpenAI) -> None:
    limited = error_reply(429, "Too many requests", "requests", "rate_limit_exceeded")
    server.reply(limited, limited, limited)

    with pytest.raises(ModelRateLimited, match="after 2 retries: Too many requests"):
        await make_model(server, max_retries=2).complete([Message.user("x")], [], ModelSettings())

    assert len(server.requests) == 3


@pytest.mark.parametrize(("status", "error"), [(400, ModelBadRequest), (503, ModelUnavailable)])
async def test_error_statuses_map_to_errors(
    server: FakeOpenAI, status: int, error: type[Exception]
) -> None:
    server.reply(error_reply(status, "Nope.", "invalid_request_error"))

    with pytest.raises(error, match=f"HTTP {status}.*Nope."):
        await make_model(server).complete([Message.user("x")], [], ModelSettings())


async def test_refusal_is_a_model_error_with_the_text(server: FakeOpenAI) -> None:
    respond(server, completion_body(None, refusal="I can't help with that."), stream=False)

    with pytest.raises(ModelRefused) as caught:
        await make_model(server).complete([Message.user("x")], [], ModelSettings())

    assert caught.value.refusal == "I can't help with that."


async def test_length_finish_is_truncated_and_content_filter_is_refused(
    server: FakeOpenAI, stream: bool
) -> None:
    respond(server, completion_body("The first half", finish_reason="length"), stream)
    respond(server, completion_body("", finish_reason="content_filter"), stream)
    model = make_model(server, stream)

    with pytest.raises(ModelOutputTruncated, match="finish_reason 'length'") as caught:
        await model.complete([Message.user("x")], [], ModelSettings(max_tokens=3))
    assert caught.value.partial_text == "The first half"
    with pytest.raises(ModelRefused, match="content filter"):
        await model.complete([Message.user("x")], [], ModelSettings())


# --- construction: keys, base_url, Azure ---------------------------------------------------


async def test_base_url_server_needs_no_key(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    respond(server, completion_body("ok"), stream=False)
    model = resolve_model("openai-chat:llama", base_url=server.url, max_retries=0)

    await model.complete([Message.user("x")], [], ModelSettings())

    assert model.name == "openai-chat:llama"
    assert server.requests[0].headers["authorization"] == "Bearer no-key-needed"


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    with pytest.raises(ModelNotConfigured, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4.1-mini")


async def test_azure_deployment_url_version_and_key(server: FakeOpenAI) -> None:
    respond(server, completion_body("from azure"), stream=False)
    model = resolve_model(
        "azure:my-gpt",
        endpoint=server.root,
        api_version="2024-10-21",
        api_key="az-key",
        max_retries=0,
    )

    output = await model.complete([Message.user("x")], [], ModelSettings(max_tokens=5))
    await model.aclose()

    request = server.requests[0]
    assert output.content == "from azure"
    assert model.name == "azure:my-gpt"
    assert request.path == "/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21"
    assert request.headers["api-key"] == "az-key"
    assert request.body == {
        "model": "my-gpt",
        "messages": [{"role": "user", "content": "x"}],
        "max_completion_tokens": 5,
    }


async def test_azure_unauthorized_names_the_azure_variable(server: FakeOpenAI) -> None:
    server.reply(error_reply(401, "Access denied due to invalid subscription key.", "401"))
    model = OpenAIChatModel.azure(
        "my-gpt", endpoint=server.root, api_version="2024-10-21", api_key="bad", max_retries=0
    )

    with pytest.raises(ModelAuthError, match="AZURE_OPENAI_API_KEY"):
        await model.complete([Message.user("x")], [], ModelSettings())


def test_azure_missing_settings_are_all_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)

    with pytest.raises(ModelNotConfigured) as caught:
        OpenAIChatModel.azure("my-gpt")

    message = str(caught.value)
    for name in ("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION", "AZURE_OPENAI_API_KEY"):
        assert name in message


def test_azure_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example-resource.openai.azure.com")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-env")
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)

    model = OpenAIChatModel.azure("my-gpt")

    assert str(model.client.base_url) == "https://example-resource.openai.azure.com/openai/"


def test_importing_tooldeck_does_not_import_openai() -> None:
    code = (
        "import sys\n"
        "from tooldeck.models.resolve import resolve_model\n"
        "before = 'openai' in sys.modules\n"
        "resolve_model('openai-chat:m', base_url='http://127.0.0.1:9/v1')\n"
        "print(before, 'openai' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
