"""Runs as OpenTelemetry spans, read back from the SDK's in-memory exporter.

Each test asserts the exact span tree (names, kinds, parents, attributes) a backend would show.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import tooldeck
from _openai_server import (
    FakeOpenAI,
    Reply,
    add_numbers_tool,
    chat_call,
    completion_body,
    completion_chunks,
    error_reply,
)
from helpers import answer, call, calls
from tooldeck import (
    Agent,
    AssistantOutput,
    FinalAnswer,
    ModelError,
    ScriptedModel,
    TextDelta,
    ToolCall,
    tool,
)
from tooldeck.messages import Usage
from tooldeck.models import FallbackModel
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.models.prices import price_of
from tooldeck.observe import Instrumentation, uninstrument
from tooldeck.observe._spans import model_identity
from tooldeck.runlog import RunLog

SCRIPTED = {
    "gen_ai.provider.name": "scripted",
    "gen_ai.system": "scripted",
    "gen_ai.request.model": "scripted",
}


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider, exporter
    tracer_provider.shutdown()


Tree = tuple[str, dict[str, Any], list["Tree"]]


def tree(exporter: InMemorySpanExporter) -> list[Tree]:
    """The finished spans as (name, attributes, children), children in start order."""
    spans = sorted(exporter.get_finished_spans(), key=lambda span: span.start_time or 0)
    ids = {span.context.span_id for span in spans if span.context}

    def build(parent: int | None) -> list[Tree]:
        return [
            (
                span.name,
                dict(span.attributes or {}),
                build(span.context.span_id if span.context else None),
            )
            for span in spans
            if (span.parent.span_id if span.parent and span.parent.span_id in ids else None)
            == parent
        ]

    return build(None)


def span_named(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [span for span in exporter.get_finished_spans() if span.name == name]
    return span


def chat(input_tokens: int, output_tokens: int, finish: str, **attributes: Any) -> Tree:
    return (
        "chat scripted",
        {
            "gen_ai.operation.name": "chat",
            **SCRIPTED,
            "gen_ai.response.finish_reasons": (finish,),
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens,
            **attributes,
        },
        [],
    )


def execute(
    name: str, call_id: str, error: str | None = None, children: list[Tree] | None = None
) -> Tree:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    if error:
        attributes["error.type"] = error
    return (f"execute_tool {name}", attributes, children or [])


def turn(*tool_calls: ToolCall, tokens: tuple[int, int] = (10, 5)) -> AssistantOutput:
    return AssistantOutput(
        tool_calls=tool_calls, usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    )


def said(text: str, tokens: tuple[int, int] = (20, 3)) -> AssistantOutput:
    return AssistantOutput(
        content=text, usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    )


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


async def test_parallel_calls_are_sibling_tool_spans_between_two_chat_spans(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    model = ScriptedModel(
        [
            turn(
                call("add_numbers", "c1", left=1, right=2),
                call("add_numbers", "c2", left=3, right=4),
            ),
            said("3 and 7"),
        ]
    )
    agent = Agent(model, [add_numbers], instrument=Instrumentation(tracer_provider))

    result = await agent.run("Add 1+2 and 3+4")

    assert result.answer == "3 and 7"
    assert tree(exporter) == [
        (
            "invoke_agent",
            {
                "gen_ai.operation.name": "invoke_agent",
                **SCRIPTED,
                "tooldeck.run_id": result.run_id,
                "tooldeck.stop_reason": "answer",
            },
            [
                chat(10, 5, "tool_call"),
                execute("add_numbers", "c1"),
                execute("add_numbers", "c2"),
                chat(20, 3, "stop"),
            ],
        )
    ]
    kinds = {span.name: span.kind for span in exporter.get_finished_spans()}
    assert kinds == {
        "invoke_agent": SpanKind.INTERNAL,
        "chat scripted": SpanKind.CLIENT,
        "execute_tool add_numbers": SpanKind.INTERNAL,
    }
    # Usage lives on the chat spans only: summing every span's tokens counts each once.
    tokens = sum(
        span.attributes.get("gen_ai.usage.input_tokens", 0)
        for span in exporter.get_finished_spans()
        if span.attributes
    )
    assert tokens == result.usage.input_tokens == 30


async def test_a_failing_tool_records_its_exception_and_a_refused_call_its_code(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider

    @tool
    def explode(reason: str) -> str:
        """Fail on purpose."""
        raise RuntimeError(f"boom: {reason}")

    model = ScriptedModel(
        [
            turn(call("explode", "c1", reason="disk full"), call("get_wether", "c2", city="Oslo")),
            said("Sorry."),
        ]
    )
    agent = Agent(model, [explode], instrument=Instrumentation(tracer_provider))

    await agent.run("Try it")

    (root,) = tree(exporter)
    # The refused call is answered while the calls are checked, before any tool runs.
    assert root[2][1:3] == [
        execute("get_wether", "c2", "unknown_tool"),
        execute("explode", "c1", "tool_error"),
    ]
    failed = [
        span for span in exporter.get_finished_spans() if span.name.startswith("execute_tool")
    ]
    assert [(span.status.status_code, span.status.description) for span in failed] == [
        (StatusCode.ERROR, "unknown_tool"),
        (StatusCode.ERROR, "tool_error"),
    ]
    exploded = span_named(exporter, "execute_tool explode")
    assert [
        (event.name, dict(event.attributes or {})["exception.message"]) for event in exploded.events
    ] == [("exception", "boom: disk full")]
    assert (
        span_named(exporter, "execute_tool get_wether").events == ()
    )  # a model mistake, no exception
    assert span_named(exporter, "invoke_agent").status.status_code == StatusCode.UNSET


async def test_a_tools_own_spans_nest_under_its_execute_tool_span(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    app_tracer = tracer_provider.get_tracer("app")
    threads: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up (a sync tool: it runs in a worker thread)."""
        threads.append(threading.current_thread().name)
        with app_tracer.start_as_current_span("db.query"):
            return f"{city}: 18 °C"

    @tool
    async def fetch(city: str) -> str:
        """Fetch a city's page (an async tool)."""
        with app_tracer.start_as_current_span("http.get"):
            await asyncio.sleep(0)
            return f"{city}.html"

    model = ScriptedModel(
        [turn(call("lookup", "c1", city="Oslo"), call("fetch", "c2", city="Oslo")), said("ok")]
    )
    agent = Agent(model, [lookup, fetch], instrument=Instrumentation(tracer_provider))

    await agent.run("Oslo?")

    (root,) = tree(exporter)
    assert root[2][1:3] == [
        execute("lookup", "c1", children=[("db.query", {}, [])]),
        execute("fetch", "c2", children=[("http.get", {}, [])]),
    ]
    assert threads[0].startswith("tooldeck-tool")


async def test_a_streamed_run_has_the_same_spans_as_a_plain_one(
    provider: tuple[TracerProvider, InMemorySpanExporter], server: FakeOpenAI
) -> None:
    tracer_provider, exporter = provider
    first = completion_body(
        None, [chat_call("call_1", "add_numbers", '{"a":2,"b":3}')], usage=(30, 8)
    )
    last = completion_body("5", usage=(45, 1))
    server.reply(*(Reply(events=completion_chunks(body)) for body in (first, last)))
    server.reply(Reply(body=first), Reply(body=last))
    model = OpenAIChatModel("gpt-4.1-mini", base_url=server.url, api_key="sk-test", max_retries=0)
    agent = Agent(model, [add_numbers_tool()], instrument=Instrumentation(tracer_provider))

    events = [event async for event in agent.stream("2+3?", deltas=True)]
    streamed = tree(exporter)
    exporter.clear()
    plain = await agent.run("2+3?")

    assert [event.text for event in events if isinstance(event, TextDelta)] == ["5"]
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    # The same tree as the plain run's, but for the run's own id.
    plain_tree = tree(exporter)
    assert streamed[0][1].pop("tooldeck.run_id") == final.result.run_id
    assert plain_tree[0][1].pop("tooldeck.run_id") == plain.run_id
    assert streamed == plain_tree
    openai = {
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4.1-mini",
    }

    def cost(tokens: tuple[int, int]) -> float | None:
        return price_of(
            "openai:gpt-4.1-mini", Usage(input_tokens=tokens[0], output_tokens=tokens[1])
        )

    def chat_span(tokens: tuple[int, int], finish: str) -> Tree:
        usage = {
            "gen_ai.usage.input_tokens": tokens[0],
            "gen_ai.usage.output_tokens": tokens[1],
            "tooldeck.usage.cost_usd": cost(tokens),
        }
        return (
            "chat gpt-4.1-mini",
            {
                "gen_ai.operation.name": "chat",
                **openai,
                "gen_ai.response.finish_reasons": (finish,),
                **usage,
            },
            [],
        )

    assert streamed == [
        (
            "invoke_agent",
            {
                "gen_ai.operation.name": "invoke_agent",
                **openai,
                "tooldeck.stop_reason": "answer",
                "tooldeck.usage.cost_usd": final.result.usage.cost_usd,
            },
            [
                chat_span((30, 8), "tool_call"),
                execute("add_numbers", "call_1"),
                chat_span((45, 1), "stop"),
            ],
        )
    ]


async def test_contents_are_recorded_only_when_asked(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider

    def script() -> ScriptedModel:
        return ScriptedModel([turn(call("add_numbers", "c1", left=2, right=3)), said("5")])

    await Agent(
        script(),
        [add_numbers],
        instructions="Be brief.",
        instrument=Instrumentation(tracer_provider),
    ).run("2+3?")
    plain = {key for span in exporter.get_finished_spans() for key in (span.attributes or {})}
    exporter.clear()
    capture = Instrumentation(tracer_provider, capture_content=True)
    await Agent(script(), [add_numbers], instructions="Be brief.", instrument=capture).run("2+3?")

    assert not {
        key
        for key in plain
        if key.startswith(
            (
                "gen_ai.input",
                "gen_ai.output",
                "gen_ai.system_",
                "gen_ai.tool.call.a",
                "gen_ai.tool.call.r",
            )
        )
    }
    root = span_named(exporter, "invoke_agent").attributes or {}
    assert json.loads(str(root["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "2+3?"}]}
    ]
    assert json.loads(str(root["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert json.loads(str(root["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "5"}], "finish_reason": "stop"}
    ]
    first, second = [
        span.attributes or {}
        for span in exporter.get_finished_spans()
        if span.name == "chat scripted"
    ]
    assert json.loads(str(first["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "add_numbers",
                    "arguments": {"left": 2, "right": 3},
                }
            ],
            "finish_reason": "tool_call",
        }
    ]
    assert json.loads(str(second["gen_ai.input.messages"]))[1:] == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "add_numbers",
                    "arguments": {"left": 2, "right": 3},
                }
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "5"}]},
    ]
    tool_span = span_named(exporter, "execute_tool add_numbers").attributes or {}
    assert (tool_span["gen_ai.tool.call.arguments"], tool_span["gen_ai.tool.call.result"]) == (
        '{"left": 2, "right": 3}',
        "5",
    )


async def test_a_model_failure_ends_both_spans_with_its_error(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider

    def fail(_: object) -> AssistantOutput:
        raise ConnectionError("the network is down")

    agent = Agent(ScriptedModel([fail]), instrument=Instrumentation(tracer_provider))

    with pytest.raises(ModelError):
        await agent.run("Hi")

    chat_span = span_named(exporter, "chat scripted")
    root = span_named(exporter, "invoke_agent")
    assert (chat_span.attributes or {})["error.type"] == "ConnectionError"
    assert chat_span.status.status_code == StatusCode.ERROR
    assert (root.attributes or {})["error.type"] == "model_error"
    assert (root.attributes or {})["tooldeck.stop_reason"] == "model_error"
    assert root.status.status_code == StatusCode.ERROR
    assert (
        root.status.description
        == "ModelError: the model call failed: ConnectionError: the network is down"
    )


async def test_leaving_a_run_early_ends_its_span_without_an_error(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    model = ScriptedModel([turn(call("add_numbers", "c1", left=1, right=1)), said("2")])
    agent = Agent(model, [add_numbers], instrument=Instrumentation(tracer_provider))

    events = agent.stream("1+1?")
    async for event in events:
        if type(event).__name__ == "ToolCallFinished":
            break
    await events.aclose()

    (root,) = tree(exporter)
    assert [child[0] for child in root[2]] == ["chat scripted", "execute_tool add_numbers"]
    assert "tooldeck.stop_reason" not in root[1]
    assert span_named(exporter, "invoke_agent").status.status_code == StatusCode.UNSET


def test_instrument_traces_every_agent_but_those_that_opt_out(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    tooldeck.instrument(tracer_provider)
    try:
        Agent(ScriptedModel([answer("hi")])).run_sync("Hi")
        Agent(ScriptedModel([answer("hi")]), instrument=False).run_sync("Hi")
    finally:
        uninstrument()
    Agent(ScriptedModel([answer("hi")])).run_sync("Hi")

    assert [span.name for span in exporter.get_finished_spans()] == [
        "chat scripted",
        "invoke_agent",
    ]


def test_instrument_true_is_refused_with_the_way_to_say_it() -> None:
    with pytest.raises(
        ValueError,
        match=r"instrument=True is not a setting: pass tooldeck\.observe\.Instrumentation\(\)",
    ):
        Agent(ScriptedModel([]), instrument=True)


def test_without_an_sdk_a_run_goes_unobserved_and_unchanged() -> None:
    # The global provider is the API's no-op one in this process: nothing would be recorded,
    # so the run is not observed at all (no wrapper, no spans, nothing paid per step).
    instrumentation = Instrumentation(capture_content=True)
    model = ScriptedModel([calls(call("add_numbers", "c1", left=1, right=2)), answer("3")])
    assert instrumentation.start_run(model, [], "", "run-1") is None
    agent = Agent(model, [add_numbers], instrument=instrumentation)
    assert agent.run_sync("1+2?").answer == "3"


@pytest.mark.parametrize(
    ("name", "identity"),
    [
        ("openai:gpt-4.1-mini", ("openai", "gpt-4.1-mini")),
        ("openai-chat:qwen3", ("openai", "qwen3")),
        ("azure:my-deployment", ("azure.ai.openai", "my-deployment")),
        ("anthropic:claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
        ("gemini:gemini-2.5-flash", ("gcp.gemini", "gemini-2.5-flash")),
        ("local:gemma-3-270m-q4_k_m.gguf", ("llama_cpp", "gemma-3-270m-q4_k_m.gguf")),
        ("scripted", ("scripted", "scripted")),
    ],
)
def test_a_models_name_gives_the_provider_and_model_the_spans_carry(
    name: str, identity: tuple[str, str]
) -> None:
    model = ScriptedModel([])
    model.name = name
    assert model_identity(model) == identity


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_a_fallback_round_names_the_model_that_answered(
    provider: tuple[TracerProvider, InMemorySpanExporter],
    server: FakeOpenAI,
    tmp_path: Path,
    streamed: bool,
) -> None:
    tracer_provider, exporter = provider
    answer_body = completion_body("Hello from the backup.", usage=(12, 5))
    answered = Reply(events=completion_chunks(answer_body)) if streamed else Reply(body=answer_body)
    server.reply(error_reply(500, "the primary is down", "server_error"), answered)

    def hosted(name: str) -> OpenAIChatModel:
        return OpenAIChatModel(
            name, base_url=server.url, api_key="sk-test", stream=streamed, max_retries=0
        )

    model = FallbackModel(hosted("gpt-primary"), hosted("gpt-backup"))
    with RunLog(tmp_path / "logs.db") as log:
        agent = Agent(model, run_log=log, instrument=Instrumentation(tracer_provider))
        result = await agent.run("Hi")
        (turn,) = log.run(result.run_id).turns

    assert [body["model"] for body in server.bodies] == ["gpt-primary", "gpt-backup"]
    (chat_span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    attributes = dict(chat_span.attributes or {})
    assert chat_span.name == "chat openai-chat:gpt-primary,openai-chat:gpt-backup"
    assert attributes["gen_ai.request.model"] == "openai-chat:gpt-primary,openai-chat:gpt-backup"
    assert attributes["gen_ai.response.model"] == "gpt-backup"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["tooldeck.response.model"] == turn.model == "openai-chat:gpt-backup"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        12,
        5,
    )
    assert chat_span.status.status_code == StatusCode.UNSET
