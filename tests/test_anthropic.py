"""AnthropicModel against a real HTTP server on 127.0.0.1, through the real anthropic SDK.

Every test asserts the JSON body the SDK sent to ``/v1/messages`` and what the run
produced; the ``stream`` parameter runs the same exchange as server-sent events.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from _anthropic_server import (
    MODEL,
    anthropic_server,
    error_reply,
    message_body,
    message_events,
    redacted_thinking,
    stream_error,
    text,
    thinking,
    tool_use,
)
from _loopback import LoopbackServer, Reply, running
from _openai_server import ADD_SCHEMA, add_numbers_tool, weather_spec
from test_docs import page_blocks
from tooldeck import Agent, Approve, FunctionTool, Message, ModelSettings, Reject, ToolSpec
from tooldeck.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelNotConfigured,
    ModelOutputTruncated,
    ModelRateLimited,
    ModelRefused,
    ModelUnavailable,
    ProviderError,
)
from tooldeck.models.anthropic import MAX_CONTINUATIONS, AnthropicModel
from tooldeck.models.resolve import resolve_model

ADD_TOOL = {"name": "add_numbers", "description": "Add two integers.", "input_schema": ADD_SCHEMA}
WEATHER = weather_spec()


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with anthropic_server() as fake:
        yield fake


def make_model(server: LoopbackServer, stream: bool = False, **options: Any) -> AnthropicModel:
    options.setdefault("max_retries", 0)
    return AnthropicModel(
        MODEL, base_url=server.root, api_key="sk-ant-test", stream=stream, **options
    )


def respond(server: LoopbackServer, body: dict[str, Any], stream: bool) -> None:
    server.reply(Reply(events=message_events(body)) if stream else Reply(body=body))


def sent(server: LoopbackServer, index: int, stream: bool) -> dict[str, Any]:
    """Request ``index`` without the ``stream`` flag, after checking the flag was right."""
    body = dict(server.bodies[index])
    assert body.pop("stream", False) is stream
    return body


def divide_tool() -> FunctionTool[..., float]:
    def divide(a: int, b: int) -> float:
        return a / b

    schema = {**ADD_SCHEMA}
    return FunctionTool(
        name="divide", description="Divide a by b.", parameters=schema, handler=divide
    )


async def test_plain_answer_sends_system_and_counts_cached_input(
    server: LoopbackServer, stream: bool
) -> None:
    respond(server, message_body([text("Hello there!")], usage=(20, 4), cached=100), stream)
    agent: Agent[None] = Agent(make_model(server, stream), instructions="Be brief.")

    result = await agent.run("Hi")

    assert result.answer == "Hello there!"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (120, 4)
    assert sent(server, 0, stream) == {
        "model": MODEL,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Hi"}],
        "system": "Be brief.",
    }
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["authorization"] == "Bearer sk-ant-test"
    assert request.headers["anthropic-version"]


async def test_parallel_calls_and_a_failing_tool_pair_results_in_one_user_message(
    server: LoopbackServer, stream: bool
) -> None:
    first = [
        text("I'll compute both."),
        tool_use("toolu_a", "add_numbers", {"a": 1, "b": 2}),
        tool_use("toolu_b", "divide", {"a": 1, "b": 0}),
    ]
    respond(server, message_body(first), stream)
    respond(server, message_body([text("1 + 2 = 3; 1 / 0 failed.")]), stream)
    agent: Agent[None] = Agent(
        make_model(server, stream), tools=[add_numbers_tool(), divide_tool()]
    )

    result = await agent.run("Add 1 and 2, divide 1 by 0")

    assert result.answer == "1 + 2 = 3; 1 / 0 failed."
    failure = result.tool_trace[1].result
    assert failure.error_code == "tool_error"
    assert sent(server, 0, stream)["tool_choice"] == {"type": "auto"}
    assert sent(server, 1, stream)["messages"] == [
        {"role": "user", "content": "Add 1 and 2, divide 1 by 0"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll compute both."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "add_numbers",
                    "input": {"a": 1, "b": 2},
                },
                {"type": "tool_use", "id": "toolu_b", "name": "divide", "input": {"a": 1, "b": 0}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "3"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": failure.output,
                    "is_error": True,
                },
            ],
        },
    ]
    assert result.usage.requests == 2


async def test_forced_tool_choice_applies_to_the_first_turn_only(server: LoopbackServer) -> None:
    respond(server, message_body([tool_use("toolu_1", "add_numbers", {"a": 2, "b": 3})]), False)
    respond(server, message_body([text("5")]), False)
    settings = ModelSettings(tool_choice="add_numbers", parallel_tool_calls=False)
    agent: Agent[None] = Agent(make_model(server), tools=[add_numbers_tool()], settings=settings)

    result = await agent.run("2 + 3?")

    assert result.answer == "5"
    first, second = server.bodies
    assert first["tools"] == [ADD_TOOL]
    assert first["tool_choice"] == {
        "type": "tool",
        "name": "add_numbers",
        "disable_parallel_tool_use": True,
    }
    assert second["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("get_weather", {"type": "tool", "name": "get_weather"}),
    ],
)
async def test_tool_choice_is_mapped(server: LoopbackServer, choice: str, wire: object) -> None:
    respond(server, message_body([text("ok")]), stream=False)

    await make_model(server).complete(
        [Message.user("Weather?")], [WEATHER], ModelSettings(tool_choice=choice)
    )

    assert server.bodies[0]["tool_choice"] == wire


async def test_schema_goes_unchanged_and_settings_and_options_are_sent(
    server: LoopbackServer,
) -> None:
    respond(server, message_body([text("ok")]), stream=False)
    loose = ToolSpec(name="note", parameters={"type": "object", "properties": {}}, strict=False)
    settings = ModelSettings(temperature=0.2, max_tokens=64)
    model = make_model(server, request_options={"metadata": {"user_id": "u-1"}, "max_tokens": 99})

    await model.complete([Message.user("x")], [WEATHER, loose], settings)

    assert server.bodies[0] == {
        "model": MODEL,
        "max_tokens": 99,
        "messages": [{"role": "user", "content": "x"}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current temperature for a city.",
                "input_schema": WEATHER.parameters,
            },
            {"name": "note", "input_schema": {"type": "object", "properties": {}}},
        ],
        "tool_choice": {"type": "auto"},
        "temperature": 0.2,
        "metadata": {"user_id": "u-1"},
    }


async def test_server_tool_blocks_are_kept_for_the_host_but_not_sent_back(
    server: LoopbackServer, stream: bool
) -> None:
    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "tooldeck release"},
    }
    respond(server, message_body([search, text("It shipped.")]), stream)
    respond(server, message_body([text("You asked about tooldeck.")]), stream)
    agent: Agent[None] = Agent(make_model(server, stream))

    first = await agent.run("Did tooldeck ship?")
    await agent.run("What did I ask?", history=first.messages)

    assert first.messages[-1].provider_items == (search,)  # streamed input parsed as sent
    assert sent(server, 1, stream)["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "It shipped."}],
    }


async def test_thinking_blocks_are_kept_and_replayed_unchanged(
    server: LoopbackServer, stream: bool
) -> None:
    thought = thinking("The user wants 1+1; use the tool.", "EqQBCgIYAhIM1gbcDa9GJwZA")
    hidden = redacted_thinking("EmwKAhgBEgy3va3pzix/LafPsn4a")
    respond(
        server,
        message_body([thought, hidden, tool_use("toolu_1", "add_numbers", {"a": 1, "b": 1})]),
        stream,
    )
    respond(server, message_body([text("2")]), stream)
    thinking_on = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    model = make_model(server, stream, request_options=thinking_on)
    agent: Agent[None] = Agent(model, tools=[add_numbers_tool()])

    result = await agent.run("1+1?")

    assert result.answer == "2"
    assert result.messages[1].provider_items == (thought, hidden)
    first, second = (sent(server, index, stream) for index in (0, 1))
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            thought,
            hidden,
            {"type": "tool_use", "id": "toolu_1", "name": "add_numbers", "input": {"a": 1, "b": 1}},
        ],
    }
    assert second["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "2"}
    ]


async def test_input_that_is_not_an_object_reaches_the_model_as_invalid_json(
    server: LoopbackServer, stream: bool
) -> None:
    respond(server, message_body([tool_use("toolu_1", "add_numbers", '{"a": 2, "b":')]), stream)
    respond(server, message_body([text("Sorry.")]), stream)
    agent: Agent[None] = Agent(make_model(server, stream), tools=[add_numbers_tool()])

    result = await agent.run("Add")

    call = result.tool_trace[0].call
    assert call.raw_arguments == '{"a": 2, "b":'
    assert result.tool_trace[0].result.error_code == "invalid_json"
    assistant, results = sent(server, 1, stream)["messages"][1:]
    assert assistant["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "add_numbers", "input": {}}
    ]
    assert results["content"][0]["content"].startswith("error[invalid_json]: ")
    assert results["content"][0]["is_error"] is True
    assert result.answer == "Sorry."


async def test_input_of_another_json_type_is_kept_as_its_json(server: LoopbackServer) -> None:
    respond(server, message_body([tool_use("toolu_1", "add_numbers", [1, 2])]), stream=False)

    output = await make_model(server).complete([Message.user("x")], [], ModelSettings())

    assert output.tool_calls[0].raw_arguments == "[1, 2]"


async def test_history_continues_with_earlier_text_as_a_text_block(server: LoopbackServer) -> None:
    respond(server, message_body([text("Oslo.")]), stream=False)
    respond(server, message_body([text("Still Oslo.")]), stream=False)
    agent: Agent[None] = Agent(make_model(server))

    first = await agent.run("Capital of Norway?")
    await agent.run("And now?", history=first.messages)

    assert server.bodies[1]["messages"] == [
        {"role": "user", "content": "Capital of Norway?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Oslo."}]},
        {"role": "user", "content": "And now?"},
    ]


def test_the_documented_example_runs_against_the_loopback_server(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    thought = thinking("Two cities: two calls.", "EqQBCgIYAhIM")
    calls = [
        tool_use("toolu_1", "get_weather", {"city": "Paris"}),
        tool_use("toolu_2", "get_weather", {"city": "Oslo"}),
    ]
    respond(server, message_body([thought, *calls]), stream=False)
    respond(server, message_body([text("Both: 18 degrees and sunny.")]), stream=False)
    example = next(
        block for block in page_blocks("models/anthropic.md") if "AnthropicModel(" in block
    )

    exec(
        compile(example, "docs/models/anthropic.md (the example)", "exec"), {"__name__": "__main__"}
    )

    assert capsys.readouterr().out.splitlines() == [
        "get_weather {'city': 'Paris'} -> It is 18 degrees and sunny in Paris.",
        "get_weather {'city': 'Oslo'} -> It is 18 degrees and sunny in Oslo.",
        "Both: 18 degrees and sunny.",
    ]
    first, second = server.bodies
    assert (first["model"], first["thinking"]) == (MODEL, {"type": "adaptive"})
    assert second["messages"][1]["content"][0] == thought
    assert [block["tool_use_id"] for block in second["messages"][2]["content"]] == [
        "toolu_1",
        "toolu_2",
    ]


def delete_file_tool() -> FunctionTool[..., str]:
    return FunctionTool(
        name="delete_file",
        description="Delete a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        handler=lambda path: f"deleted {path}",
        requires_approval=True,
    )


async def test_a_paused_run_resumes_from_json_with_its_thinking_replayed(
    server: LoopbackServer, stream: bool
) -> None:
    thought = thinking("Add, then two deletions that need approval.", "EqQBCgIYAhIM")
    first = [
        thought,
        tool_use("toolu_a", "add_numbers", {"a": 2, "b": 3}),
        tool_use("toolu_d", "delete_file", {"path": "old.log"}),
        tool_use("toolu_e", "delete_file", {"path": "keep.txt"}),
    ]
    respond(server, message_body(first), stream)
    respond(server, message_body([text("Added 5, deleted old.log, kept keep.txt.")]), stream)
    tools = [add_numbers_tool(), delete_file_tool()]

    paused = await Agent(make_model(server, stream), tools).run("Add 2 and 3, then clean up.")
    assert paused.checkpoint is not None
    saved = paused.checkpoint.to_json()
    decisions = {"toolu_d": Approve(), "toolu_e": Reject(message="keep that one")}
    done = await Agent(make_model(server, stream), tools).resume(saved, decisions)

    assert done.answer == "Added 5, deleted old.log, kept keep.txt."
    assistant, results = sent(server, 1, stream)["messages"][1:]
    assert assistant["content"][0] == thought
    assert [block["id"] for block in assistant["content"][1:]] == ["toolu_a", "toolu_d", "toolu_e"]
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "5"},
            {"type": "tool_result", "tool_use_id": "toolu_d", "content": "deleted old.log"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_e",
                "content": "error[rejected]: keep that one",
                "is_error": True,
            },
        ],
    }


# --- stop reasons --------------------------------------------------------------------------


async def test_max_tokens_stop_is_truncated_with_partial_text(
    server: LoopbackServer, stream: bool
) -> None:
    respond(server, message_body([text("The first half")], stop_reason="max_tokens"), stream)

    with pytest.raises(ModelOutputTruncated, match="stop_reason 'max_tokens'") as caught:
        await make_model(server, stream).complete([Message.user("x")], [], ModelSettings())

    assert caught.value.partial_text == "The first half"


async def test_refusal_stop_is_refused_with_the_explanation(
    server: LoopbackServer, stream: bool
) -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "This looks like malware."}
    respond(server, message_body([], stop_reason="refusal", stop_details=details), stream)

    with pytest.raises(ModelRefused, match="This looks like malware") as caught:
        await make_model(server, stream).complete([Message.user("x")], [], ModelSettings())

    assert caught.value.refusal == "This looks like malware."


async def test_a_stop_reason_tooldeck_does_not_handle_is_an_error(server: LoopbackServer) -> None:
    respond(server, message_body([text("Hm")], stop_reason="a_new_reason"), stream=False)

    with pytest.raises(ModelError, match="stop_reason 'a_new_reason', which tooldeck does not"):
        await make_model(server).complete([Message.user("x")], [], ModelSettings())


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_turn_still_paused_after_asking_it_to_go_on_is_an_error(
    server: LoopbackServer, stream: bool
) -> None:
    for _ in range(MAX_CONTINUATIONS + 1):
        respond(server, message_body([text("Searching.")], stop_reason="pause_turn"), stream)

    with pytest.raises(ModelError) as caught:
        await make_model(server, stream).complete([Message.user("x")], [], ModelSettings())

    assert str(caught.value) == (
        "anthropic:claude-sonnet-5: the turn was still paused (stop_reason 'pause_turn') after "
        "5 requests to go on; the provider's server tools did not finish"
    )
    assert len(server.bodies) == MAX_CONTINUATIONS + 1
    assert len(server.bodies[-1]["messages"]) == 2  # the question, the turn so far
    assert len(server.bodies[-1]["messages"][-1]["content"]) == MAX_CONTINUATIONS


# --- failures ------------------------------------------------------------------------------


async def test_unauthorized_names_the_key_variable_and_keeps_the_run(
    server: LoopbackServer,
) -> None:
    server.reply(error_reply(401, "authentication_error", "invalid x-api-key"))
    agent: Agent[None] = Agent(make_model(server))

    with pytest.raises(ModelAuthError) as caught:
        await agent.run("Hi")

    assert str(caught.value) == (
        f"anthropic:{MODEL}: {server.root} answered HTTP 401, the API key was refused: "
        "invalid x-api-key (authentication_error) (set ANTHROPIC_API_KEY or pass api_key=)"
    )
    assert caught.value.status_code == 401
    assert caught.value.result is not None
    assert caught.value.result.messages == (Message.user("Hi"),)


@pytest.mark.parametrize(
    ("status", "type_", "error", "words"),
    [
        (400, "invalid_request_error", ModelBadRequest, "the request was rejected: Nope."),
        (403, "permission_error", ModelAuthError, "access is denied: Nope."),
        (404, "not_found_error", ModelBadRequest, "the request was rejected: Nope."),
        (413, "request_too_large", ModelBadRequest, "the request was rejected: Nope."),
        (500, "api_error", ModelUnavailable, "after 0 retries: Nope."),
    ],
)
async def test_error_statuses_map_to_errors(
    server: LoopbackServer, status: int, type_: str, error: type[Exception], words: str
) -> None:
    server.reply(error_reply(status, type_, "Nope."))

    with pytest.raises(error, match=f"HTTP {status}.*{words}"):
        await make_model(server).complete([Message.user("x")], [], ModelSettings())


@pytest.mark.parametrize(
    ("status", "type_", "error"),
    [
        (429, "rate_limit_error", ModelRateLimited),
        (529, "overloaded_error", ModelUnavailable),
        (503, "api_error", ModelUnavailable),
    ],
)
async def test_retried_statuses_raise_after_the_sdk_retries(
    server: LoopbackServer, status: int, type_: str, error: type[Exception]
) -> None:
    failing = error_reply(status, type_, "Try later.")
    server.reply(failing, failing, failing)

    with pytest.raises(error, match=f"HTTP {status} .*after 2 retries: Try later. \\({type_}\\)"):
        await make_model(server, max_retries=2).complete([Message.user("x")], [], ModelSettings())

    assert len(server.requests) == 3


async def test_an_error_event_in_the_stream_is_mapped_by_its_type(
    server: LoopbackServer,
) -> None:
    server.reply(stream_error("overloaded_error", "Overloaded"))

    with pytest.raises(
        ModelUnavailable, match="the stream reported an error: overloaded_error: Overloaded"
    ):
        await make_model(server, stream=True).complete([Message.user("x")], [], ModelSettings())


async def test_unreachable_server_is_unavailable() -> None:
    with running(Reply()) as gone:
        url = gone.root
    model = AnthropicModel(MODEL, base_url=url, api_key="k", max_retries=0)

    with pytest.raises(ModelUnavailable, match=r"could not connect to http://127\.0\.0\.1"):
        await model.complete([Message.user("x")], [], ModelSettings())


async def test_a_request_past_its_timeout_is_unavailable(server: LoopbackServer) -> None:
    server.reply(Reply(body=message_body([text("late")]), delay=1.0))

    with pytest.raises(ModelUnavailable, match=r"the request to http://127\.0\.0\.1:\d+ timed out"):
        await make_model(server, timeout=0.1).complete([Message.user("x")], [], ModelSettings())


async def test_sdk_refusal_to_send_a_long_unstreamed_request_says_what_to_do(
    server: LoopbackServer,
) -> None:
    model = make_model(server, max_tokens=64_000)

    with pytest.raises(ModelBadRequest, match=r"Streaming is required.*pass stream=True"):
        await model.complete([Message.user("x")], [], ModelSettings())

    assert server.requests == []


async def test_a_response_that_is_not_a_message_is_a_request_failure(
    server: LoopbackServer,
) -> None:
    server.reply(Reply(200, "<html>gateway says hi</html>"))

    with pytest.raises(ProviderError, match=r"the response is not a Message: '<html>gateway"):
        await make_model(server).complete([Message.user("x")], [], ModelSettings())


async def test_a_response_the_sdk_cannot_validate_is_a_request_failure(
    server: LoopbackServer,
) -> None:
    from anthropic import AsyncAnthropic

    client = AsyncAnthropic(
        base_url=server.root, api_key="k", max_retries=0, _strict_response_validation=True
    )
    server.reply(Reply(200, {"not": "a message"}))

    with pytest.raises(ProviderError, match="provider reported an error: Data returned by API"):
        await AnthropicModel(MODEL, client=client).complete(
            [Message.user("x")], [], ModelSettings()
        )
    await client.close()


# --- construction --------------------------------------------------------------------------


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    with pytest.raises(ModelNotConfigured, match="set the ANTHROPIC_API_KEY environment variable"):
        resolve_model(f"anthropic:{MODEL}")


async def test_key_from_the_environment_and_a_base_url_server_without_one(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    respond(server, message_body([text("ok")]), stream=False)
    respond(server, message_body([text("ok")]), stream=False)
    from_env = resolve_model(f"anthropic:{MODEL}", base_url=server.root, max_retries=0)
    await from_env.complete([Message.user("x")], [], ModelSettings())
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    local = AnthropicModel("local-model", base_url=server.root, max_retries=0)
    await local.complete([Message.user("x")], [], ModelSettings())

    assert from_env.name == f"anthropic:{MODEL}"
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer sk-ant-env"
    assert second.headers["authorization"] == "Bearer no-key-needed"


async def test_an_auth_token_from_the_environment_is_used_when_no_key_is_set(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "oauth-token")
    respond(server, message_body([text("ok")]), stream=False)

    await AnthropicModel(MODEL, base_url=server.root, max_retries=0).complete(
        [Message.user("x")], [], ModelSettings()
    )

    assert server.requests[0].headers["authorization"] == "Bearer oauth-token"


async def test_a_client_passed_in_is_used_as_is(server: LoopbackServer) -> None:
    from anthropic import AsyncAnthropic

    client = AsyncAnthropic(
        base_url=server.root, api_key="sk-gateway", default_headers={"x-gateway": "team-a"}
    )
    respond(server, message_body([text("ok")]), stream=False)
    model = AnthropicModel(MODEL, client=client)

    await model.complete([Message.user("x")], [], ModelSettings())
    await model.aclose()

    assert model.client is client
    assert server.requests[0].headers["x-gateway"] == "team-a"
    assert not client.is_closed()
    with pytest.raises(ModelNotConfigured, match="api_key, max_retries would be ignored"):
        AnthropicModel(MODEL, client=client, api_key="other", max_retries=1)
    await client.close()


def test_bad_construction_is_refused_by_name() -> None:
    with pytest.raises(ModelNotConfigured, match="anthropic needs a model name, got ' '"):
        AnthropicModel(" ", api_key="k")
    with pytest.raises(ModelNotConfigured, match="max_tokens must be at least 1, got 0"):
        AnthropicModel(MODEL, api_key="k", max_tokens=0)
    with pytest.raises(ModelNotConfigured, match="names no model; write 'anthropic:MODEL_NAME'"):
        resolve_model("anthropic:")


def test_importing_tooldeck_and_the_adapter_module_does_not_import_anthropic() -> None:
    code = "import sys, tooldeck, tooldeck.models.anthropic\nprint('anthropic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
