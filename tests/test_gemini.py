"""GeminiModel against a real HTTP server on 127.0.0.1, through the real google-genai SDK.

Every test asserts the JSON body the SDK sent to ``generateContent`` and what the run
produced; the ``stream`` parameter runs the same exchange as ``streamGenerateContent``
server-sent events.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from _gemini_server import (
    GENERATE,
    MODEL,
    STREAM,
    blocked_body,
    call_part,
    error_reply,
    gemini_server,
    response_body,
    response_chunks,
    stream_reply,
    text_part,
    thought_part,
)
from _loopback import LoopbackServer, Reply, running
from _openai_server import ADD_SCHEMA, add_numbers_tool, weather_spec
from test_docs import page_blocks
from tooldeck import Agent, FunctionTool, Message, ModelSettings, Reject, ToolSpec
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
from tooldeck.models.gemini import GeminiModel
from tooldeck.models.gemini._request import Declarations
from tooldeck.models.gemini._response import to_output, turn_from_response
from tooldeck.models.resolve import resolve_model

ADD_DECLARATION = {
    "name": "add_numbers",
    "description": "Add two integers.",
    "parameters": {
        "type": "OBJECT",
        "properties": {"a": {"type": "INTEGER"}, "b": {"type": "INTEGER"}},
        "required": ["a", "b"],
    },
}
WEATHER = weather_spec()


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with gemini_server() as fake:
        yield fake


def make_model(server: LoopbackServer, stream: bool = False, **options: Any) -> GeminiModel:
    options.setdefault("max_retries", 0)
    return GeminiModel(MODEL, base_url=server.root, api_key="AIza-test", stream=stream, **options)


def respond(server: LoopbackServer, body: dict[str, Any], stream: bool) -> None:
    server.reply(stream_reply(response_chunks(body)) if stream else Reply(body=body))


def sent(server: LoopbackServer, index: int, stream: bool) -> dict[str, Any]:
    """Request ``index``, after checking it went to the method the mode calls for."""
    assert server.requests[index].path == (STREAM if stream else GENERATE)
    return dict(server.bodies[index])


def divide_tool() -> FunctionTool[..., float]:
    def divide(a: int, b: int) -> float:
        return a / b

    return FunctionTool(
        name="divide", description="Divide a by b.", parameters=ADD_SCHEMA, handler=divide
    )


async def test_plain_answer_sends_the_system_instruction_and_counts_thoughts(
    server: LoopbackServer, stream: bool
) -> None:
    respond(server, response_body([text_part("Hello there!")], usage=(21, 4, 30)), stream)
    agent: Agent[None] = Agent(make_model(server, stream), instructions="Be brief.")

    result = await agent.run("Hi")

    assert result.answer == "Hello there!"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (21, 34)
    assert result.messages[-1].provider_items == ()
    assert sent(server, 0, stream) == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
        "generationConfig": {},
    }
    assert server.requests[0].headers["x-goog-api-key"] == "AIza-test"


async def test_parallel_calls_and_a_failing_tool_answer_in_one_user_content(
    server: LoopbackServer, stream: bool
) -> None:
    first = [
        text_part("Computing both."),
        call_part("add_numbers", {"a": 1, "b": 2}),
        call_part("divide", {"a": 1, "b": 0}),
    ]
    respond(server, response_body(first), stream)
    respond(server, response_body([text_part("3, and 1 / 0 failed.")]), stream)
    agent: Agent[None] = Agent(
        make_model(server, stream), tools=[add_numbers_tool(), divide_tool()]
    )

    result = await agent.run("Add 1 and 2, divide 1 by 0")

    assert result.answer == "3, and 1 / 0 failed."
    assert [trace.call.id for trace in result.tool_trace] == ["call_1_0", "call_1_1"]
    failure = result.tool_trace[1].result
    assert failure.error_code == "tool_error"
    assert sent(server, 0, stream)["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert sent(server, 1, stream)["contents"] == [
        {"role": "user", "parts": [{"text": "Add 1 and 2, divide 1 by 0"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Computing both."},
                {
                    "functionCall": {
                        "id": "call_1_0",
                        "name": "add_numbers",
                        "args": {"a": 1, "b": 2},
                    }
                },
                {"functionCall": {"id": "call_1_1", "name": "divide", "args": {"a": 1, "b": 0}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_1_0",
                        "name": "add_numbers",
                        "response": {"output": "3"},
                    }
                },
                {
                    "functionResponse": {
                        "id": "call_1_1",
                        "name": "divide",
                        "response": {"error": failure.output},
                    }
                },
            ],
        },
    ]


async def test_forced_tool_choice_allows_only_that_function_on_the_first_turn(
    server: LoopbackServer,
) -> None:
    respond(server, response_body([call_part("add_numbers", {"a": 2, "b": 3}, id="fc-7")]), False)
    respond(server, response_body([text_part("5")]), False)
    settings = ModelSettings(tool_choice="add_numbers", parallel_tool_calls=False)
    agent: Agent[None] = Agent(make_model(server), tools=[add_numbers_tool()], settings=settings)

    result = await agent.run("2 + 3?")

    assert result.answer == "5"
    assert result.tool_trace[0].call.id == "fc-7"
    first, second = server.bodies
    assert first["tools"] == [{"functionDeclarations": [ADD_DECLARATION]}]
    assert first["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["add_numbers"]}
    }
    assert second["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert second["contents"][2]["parts"] == [
        {"functionResponse": {"id": "fc-7", "name": "add_numbers", "response": {"output": "5"}}}
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        ("none", {"mode": "NONE"}),
        ("get_weather", {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
async def test_tool_choice_is_mapped(server: LoopbackServer, choice: str, wire: object) -> None:
    respond(server, response_body([text_part("ok")]), stream=False)

    await make_model(server).complete(
        [Message.user("Weather?")], [WEATHER], ModelSettings(tool_choice=choice)
    )

    assert server.bodies[0]["toolConfig"] == {"functionCallingConfig": wire}


RICH_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city."},
        "days": {"type": ["integer", "null"], "exclusiveMinimum": 0, "default": None},
        "unit": {"$ref": "#/$defs/Unit", "default": "celsius"},
        "when": {"type": "string", "format": "date-time"},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
    },
    "required": ["city", "days", "unit", "when", "email", "tags"],
    "additionalProperties": False,
    "$defs": {"Unit": {"enum": ["celsius", "fahrenheit"], "type": "string"}},
}


async def test_schemas_are_converted_to_the_openapi_subset_on_the_wire(
    server: LoopbackServer,
) -> None:
    respond(server, response_body([text_part("ok")]), stream=False)
    rich = ToolSpec(name="forecast", description="Forecast.", parameters=RICH_SCHEMA)
    empty = ToolSpec(name="ping", parameters={"type": "object", "properties": {}})
    settings = ModelSettings(temperature=0.3, max_tokens=50)

    await make_model(server).complete([Message.user("x")], [rich, empty], settings)

    body = server.bodies[0]
    # The SDK writes declarations with its field names (min_items); the API reads both spellings.
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "forecast",
                    "description": "Forecast.",
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {
                            "city": {"type": "STRING", "description": "The city."},
                            "days": {
                                "type": "INTEGER",
                                "nullable": True,
                                "description": 'JSON Schema constraints: {"exclusiveMinimum": 0}',
                            },
                            "unit": {
                                "type": "STRING",
                                "enum": ["celsius", "fahrenheit"],
                                "default": "celsius",
                            },
                            "when": {"type": "STRING", "format": "date-time"},
                            "email": {
                                "type": "STRING",
                                "description": 'JSON Schema constraints: {"format": "email"}',
                            },
                            "tags": {
                                "type": "ARRAY",
                                "items": {"type": "STRING"},
                                "min_items": 1,
                                "description": 'JSON Schema constraints: {"uniqueItems": true}',
                            },
                        },
                        "required": ["city", "days", "unit", "when", "email", "tags"],
                    },
                },
                {"name": "ping"},
            ]
        }
    ]
    assert body["generationConfig"] == {"temperature": 0.3, "maxOutputTokens": 50}


def test_declarations_are_converted_once_per_tool_spec() -> None:
    declarations = Declarations(capacity=2)
    first = ToolSpec(name="forecast", parameters=RICH_SCHEMA)
    same_name = ToolSpec(name="forecast", parameters={"type": "object", "properties": {}})

    made = declarations(first)

    assert declarations(first) is made
    assert declarations(same_name) == {"name": "forecast"}
    declarations(WEATHER)  # a third spec: the oldest entry makes room
    assert declarations(first) is not made
    assert declarations(first) == made


async def test_json_schema_mode_sends_the_schema_unchanged(server: LoopbackServer) -> None:
    respond(server, response_body([text_part("ok")]), stream=False)
    rich = ToolSpec(name="forecast", parameters=RICH_SCHEMA)
    model = make_model(server, tool_schema="json_schema", api_version="v1beta")

    await model.complete([Message.user("x")], [rich], ModelSettings())

    assert server.requests[0].path == f"/v1beta/models/{MODEL}:generateContent"
    assert server.bodies[0]["tools"] == [
        {"functionDeclarations": [{"name": "forecast", "parameters_json_schema": RICH_SCHEMA}]}
    ]


async def test_thought_parts_and_signatures_go_back_exactly_as_they_came(
    server: LoopbackServer, stream: bool
) -> None:
    turn = [
        thought_part("The user wants a sum; call the tool."),
        call_part("add_numbers", {"a": 1, "b": 1}, signature="CiQBVKhc7sig"),
        call_part("add_numbers", {"a": 2, "b": 2}),
    ]
    respond(server, response_body(turn, usage=(40, 10, 25)), stream)
    respond(server, response_body([text_part("2 and 4")]), stream)
    thoughts_on = {"thinking_config": {"include_thoughts": True}}
    agent: Agent[None] = Agent(
        make_model(server, stream, request_options=thoughts_on), tools=[add_numbers_tool()]
    )

    result = await agent.run("1+1 and 2+2?")

    kept = [
        {"text": "The user wants a sum; call the tool.", "thought": True},
        {
            "functionCall": {"id": "call_1_0", "name": "add_numbers", "args": {"a": 1, "b": 1}},
            "thoughtSignature": "CiQBVKhc7sig",
        },
        {"functionCall": {"id": "call_1_1", "name": "add_numbers", "args": {"a": 2, "b": 2}}},
    ]
    assert result.answer == "2 and 4"
    assert result.messages[1].content == ""
    assert result.messages[1].provider_items == ({"type": "gemini_parts", "parts": kept},)
    first, second = (sent(server, index, stream) for index in (0, 1))
    assert first["generationConfig"] == {"thinkingConfig": {"include_thoughts": True}}
    assert second["contents"][1] == {"role": "model", "parts": kept}
    assert [part["functionResponse"]["id"] for part in second["contents"][2]["parts"]] == [
        "call_1_0",
        "call_1_1",
    ]


async def test_a_streamed_answer_keeps_its_signature_part_apart(server: LoopbackServer) -> None:
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [text_part("Hel")]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [text_part("lo")]}}]},
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [text_part("", signature="Q2xvc2luZw==")],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2},
        },
    ]
    server.reply(stream_reply([(None, chunk) for chunk in chunks]))
    respond(server, response_body([text_part("Bye")]), stream=True)
    agent: Agent[None] = Agent(make_model(server, stream=True))

    first = await agent.run("Hi")
    await agent.run("Bye", history=first.messages)

    assert first.answer == "Hello"
    assert server.bodies[1]["contents"][1] == {
        "role": "model",
        "parts": [{"text": "Hello"}, {"text": "", "thoughtSignature": "Q2xvc2luZw=="}],
    }


async def test_a_malformed_call_of_the_one_allowed_function_is_invalid_json(
    server: LoopbackServer, stream: bool
) -> None:
    respond(server, response_body([], finish_reason="MALFORMED_FUNCTION_CALL"), stream)
    respond(server, response_body([text_part("Sorry.")]), stream)
    agent: Agent[None] = Agent(make_model(server, stream), tools=[add_numbers_tool()])

    result = await agent.run("Add")

    trace = result.tool_trace[0]
    assert (trace.call.name, trace.call.raw_arguments) == ("add_numbers", "")
    assert trace.result.error_code == "invalid_json"
    call, answer = sent(server, 1, stream)["contents"][1:]
    assert call["parts"] == [
        {"functionCall": {"id": "call_1_0", "name": "add_numbers", "args": {}}}
    ]
    assert answer["parts"][0]["functionResponse"]["response"]["error"].startswith(
        "error[invalid_json]: "
    )
    assert result.answer == "Sorry."


async def test_a_malformed_call_among_several_functions_is_an_error(
    server: LoopbackServer,
) -> None:
    respond(server, response_body([], finish_reason="MALFORMED_FUNCTION_CALL"), False)
    respond(server, response_body([], finish_reason="MALFORMED_FUNCTION_CALL"), False)
    add = add_numbers_tool().spec
    forced = ModelSettings(tool_choice="add_numbers")
    model = make_model(server)

    with pytest.raises(ModelError, match=r"malformed function call .*with 2 functions allowed"):
        await model.complete([Message.user("x")], [WEATHER, add], ModelSettings())
    output = await model.complete([Message.user("x")], [WEATHER, add], forced)

    assert output.tool_calls[0].name == "add_numbers"


async def test_a_result_for_a_call_no_message_made_is_refused_by_id(
    server: LoopbackServer,
) -> None:
    orphan = [Message.user("x"), Message.tool("call_9", "42")]

    with pytest.raises(ValueError, match="answers call 'call_9', which no earlier assistant"):
        await make_model(server).complete(orphan, [], ModelSettings())

    assert server.requests == []


def test_the_documented_example_runs_against_the_loopback_server(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-readme")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.root)
    turn = [
        thought_part("A conversion with the given rate."),
        call_part("convert", {"amount": 120, "rate": 1.08}, signature="CiQBVKhc"),
    ]
    respond(server, response_body(turn), stream=False)
    respond(server, response_body([text_part("120 EUR is 129.6 USD.")]), stream=False)
    example = next(block for block in page_blocks("models/gemini.md") if "GeminiModel(" in block)

    exec(compile(example, "docs/models/gemini.md (the example)", "exec"), {"__name__": "__main__"})

    assert capsys.readouterr().out == "{'amount': 120, 'rate': 1.08} -> 120 EUR is 129.6 USD.\n"
    first, second = server.bodies
    assert first["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["convert"]}
    }
    assert second["contents"][1]["parts"][1]["thoughtSignature"] == "CiQBVKhc"
    assert second["contents"][2]["parts"][0]["functionResponse"]["response"] == {"output": "129.6"}


async def test_a_paused_run_resumes_from_json_with_its_signed_parts_replayed(
    server: LoopbackServer, stream: bool
) -> None:
    delete_file = FunctionTool(
        name="delete_file",
        description="Delete a file.",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
        handler=lambda path: f"deleted {path}",
        requires_approval=True,
    )
    first = [
        call_part("add_numbers", {"a": 2, "b": 3}, signature="CiQBVKhc"),
        call_part("delete_file", {"path": "old.log"}),
    ]
    respond(server, response_body(first), stream)
    respond(server, response_body([text_part("Added 5; old.log stays.")]), stream)
    tools = [add_numbers_tool(), delete_file]

    paused = await Agent(make_model(server, stream), tools).run("Add 2 and 3, then clean up.")
    assert paused.checkpoint is not None
    saved = paused.checkpoint.to_json()
    decisions = {"call_1_1": Reject(message="keep it")}
    done = await Agent(make_model(server, stream), tools).resume(saved, decisions)

    assert done.answer == "Added 5; old.log stays."
    model_turn, results = sent(server, 1, stream)["contents"][1:]
    assert model_turn["parts"][0] == {
        "functionCall": {"id": "call_1_0", "name": "add_numbers", "args": {"a": 2, "b": 3}},
        "thoughtSignature": "CiQBVKhc",
    }
    assert [part["functionResponse"] for part in results["parts"]] == [
        {"id": "call_1_0", "name": "add_numbers", "response": {"output": "5"}},
        {
            "id": "call_1_1",
            "name": "delete_file",
            "response": {"error": "error[rejected]: keep it"},
        },
    ]


# --- finish reasons ------------------------------------------------------------------------


async def test_max_tokens_finish_is_truncated_with_partial_text(
    server: LoopbackServer, stream: bool
) -> None:
    respond(
        server, response_body([text_part("The first half")], finish_reason="MAX_TOKENS"), stream
    )

    with pytest.raises(ModelOutputTruncated, match="finishReason 'MAX_TOKENS'") as caught:
        await make_model(server, stream).complete([Message.user("x")], [], ModelSettings())

    assert caught.value.partial_text == "The first half"


async def test_safety_finish_and_blocked_prompt_are_refused(server: LoopbackServer) -> None:
    respond(server, response_body([], finish_reason="SAFETY"), stream=False)
    respond(server, blocked_body("PROHIBITED_CONTENT", "Prompt was blocked."), stream=False)
    model = make_model(server)

    with pytest.raises(ModelRefused, match="stopped the response \\(finishReason 'SAFETY'\\)"):
        await model.complete([Message.user("x")], [], ModelSettings())
    with pytest.raises(
        ModelRefused, match="blockReason 'PROHIBITED_CONTENT'\\): Prompt was"
    ) as caught:
        await model.complete([Message.user("x")], [], ModelSettings())

    assert caught.value.refusal == "Prompt was blocked."


async def test_another_finish_reason_is_an_error_that_names_it(server: LoopbackServer) -> None:
    respond(server, response_body([], finish_reason="UNEXPECTED_TOOL_CALL"), False)

    with pytest.raises(ModelError, match="stopped with finishReason 'UNEXPECTED_TOOL_CALL'"):
        await make_model(server).complete([Message.user("x")], [], ModelSettings())


def test_vertex_ai_finish_messages_are_quoted() -> None:
    """Vertex AI explains a stop in ``finishMessage`` (the Gemini API sends none)."""
    from google.genai import types

    response = types.GenerateContentResponse.model_validate(
        {"candidates": [{"finishReason": "SAFETY", "finishMessage": "Blocked by policy."}]}
    )
    turn = turn_from_response(response, "call_1_")

    with pytest.raises(
        ModelRefused, match=r"finishReason 'SAFETY'\): Blocked by policy."
    ) as caught:
        to_output("gemini:m", turn, [])

    assert caught.value.refusal == "Blocked by policy."


# --- failures ------------------------------------------------------------------------------


async def test_an_invalid_key_is_an_auth_error_naming_the_variables(
    server: LoopbackServer,
) -> None:
    server.reply(
        error_reply(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            "API_KEY_INVALID",
        )
    )
    agent: Agent[None] = Agent(make_model(server))

    with pytest.raises(ModelAuthError) as caught:
        await agent.run("Hi")

    assert str(caught.value) == (
        f"gemini:{MODEL}: {server.root} answered HTTP 400, the API key was refused: API key "
        "not valid. Please pass a valid API key. (INVALID_ARGUMENT) (set GEMINI_API_KEY (or "
        "GOOGLE_API_KEY) or pass api_key=)"
    )
    assert caught.value.result is not None
    assert caught.value.result.messages == (Message.user("Hi"),)


@pytest.mark.parametrize(
    ("code", "status", "error", "words"),
    [
        (
            400,
            "INVALID_ARGUMENT",
            ModelBadRequest,
            "the request was rejected: Nope. \\(INVALID_ARGUMENT\\)",
        ),
        (403, "PERMISSION_DENIED", ModelAuthError, "access is denied: Nope."),
        (404, "NOT_FOUND", ModelBadRequest, "the request was rejected: Nope."),
        (429, "RESOURCE_EXHAUSTED", ModelRateLimited, "after 0 retries: Nope."),
        (503, "UNAVAILABLE", ModelUnavailable, "after 0 retries: Nope."),
    ],
)
async def test_error_statuses_map_to_errors(
    server: LoopbackServer, code: int, status: str, error: type[Exception], words: str
) -> None:
    server.reply(error_reply(code, status, "Nope."))

    with pytest.raises(error, match=f"HTTP {code}.*{words}"):
        await make_model(server).complete([Message.user("x")], [], ModelSettings())


async def test_max_retries_become_the_sdks_retry_attempts(server: LoopbackServer) -> None:
    overloaded = error_reply(503, "UNAVAILABLE", "The model is overloaded.")
    server.reply(overloaded, overloaded)

    with pytest.raises(ModelUnavailable, match=r"after 1 retries: The model is overloaded\."):
        await make_model(server, max_retries=1).complete([Message.user("x")], [], ModelSettings())

    assert len(server.requests) == 2


async def test_a_client_passed_in_is_used_as_is_with_its_own_retries(
    server: LoopbackServer,
) -> None:
    from google import genai
    from google.genai import types

    retry = types.HttpRetryOptions(attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)
    options = types.HttpOptions(
        base_url=server.root, headers={"x-gateway": "team-a"}, retry_options=retry
    )
    client = genai.Client(api_key="AIza-gateway", http_options=options)
    limited = error_reply(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted.")
    server.reply(limited, limited, limited)
    model = GeminiModel(MODEL, client=client)

    with pytest.raises(ModelRateLimited, match="after the client's retries: Resource has been"):
        await model.complete([Message.user("x")], [], ModelSettings())
    await model.aclose()

    assert model.client is client
    assert len(server.requests) == 3
    assert server.requests[0].headers["x-gateway"] == "team-a"
    with pytest.raises(ModelNotConfigured, match="api_key, timeout would be ignored"):
        GeminiModel(MODEL, client=client, api_key="other", timeout=5)
    await client.aio.aclose()


async def test_an_error_inside_the_stream_is_mapped_by_its_code(server: LoopbackServer) -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    chunk = response_chunks(response_body([text_part("Hi")]))[0]
    server.reply(stream_reply([chunk, (None, error)]))

    with pytest.raises(
        ModelUnavailable,
        match=r"the stream reported an error: 503 The model is overloaded\. \(UNAVAILABLE\)$",
    ) as raised:
        await make_model(server, stream=True).complete([Message.user("x")], [], ModelSettings())
    assert raised.value.status_code == 503
    assert len(server.requests) == 1  # an error after the stream began is not retried


async def test_unreachable_server_is_unavailable() -> None:
    with running(Reply()) as gone:
        url = gone.root
    model = GeminiModel(MODEL, base_url=url, api_key="k", max_retries=0)

    with pytest.raises(ModelUnavailable, match=r"could not connect to http://127\.0\.0\.1"):
        await model.complete([Message.user("x")], [], ModelSettings())


async def test_a_request_past_its_timeout_is_unavailable(server: LoopbackServer) -> None:
    server.reply(Reply(body=response_body([text_part("late")]), delay=1.0))

    with pytest.raises(ModelUnavailable, match=r"the request to http://127\.0\.0\.1:\d+ timed out"):
        await make_model(server, timeout=0.1).complete([Message.user("x")], [], ModelSettings())


async def test_a_response_without_candidates_is_an_error(server: LoopbackServer) -> None:
    respond(server, {"candidates": [], "modelVersion": MODEL}, stream=False)

    with pytest.raises(ModelError, match="the response has no candidate and no block reason"):
        await make_model(server).complete([Message.user("x")], [], ModelSettings())


async def test_a_response_of_another_format_is_a_request_failure(server: LoopbackServer) -> None:
    respond(server, response_body([call_part("add_numbers", [1, 2])]), stream=False)

    with pytest.raises(ProviderError, match=r"does not have the API's format: .*args"):
        await make_model(server).complete([Message.user("x")], [], ModelSettings())


# --- construction --------------------------------------------------------------------------


def test_missing_key_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)

    with pytest.raises(ModelNotConfigured, match=r"set the GEMINI_API_KEY \(or GOOGLE_API_KEY\)"):
        resolve_model(f"gemini:{MODEL}")


async def test_the_key_comes_from_the_environment(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-env")
    respond(server, response_body([text_part("ok")]), stream=False)
    model = resolve_model(f"gemini:{MODEL}", base_url=server.root, max_retries=0)

    await model.complete([Message.user("x")], [], ModelSettings())
    await model.aclose()

    assert model.name == f"gemini:{MODEL}"
    assert server.requests[0].headers["x-goog-api-key"] == "AIza-env"


def test_bad_construction_is_refused_by_name() -> None:
    with pytest.raises(ModelNotConfigured, match="gemini needs a model name, got ''"):
        GeminiModel("", api_key="k")
    with pytest.raises(ModelNotConfigured, match="tool_schema must be 'openapi' or 'json_schema'"):
        GeminiModel(MODEL, api_key="k", tool_schema="yaml")


def test_importing_tooldeck_and_the_adapter_module_does_not_import_google_genai() -> None:
    code = "import sys, tooldeck, tooldeck.models.gemini\nprint('google.genai' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
