"""AnthropicModel.stream(): a message's text and tool input as the server-sent events bring them.

A real HTTP server on 127.0.0.1 sends the Messages API's events to the real anthropic SDK.
The chunks must add up to the turn they end with, that turn must be the one the same
message gives as JSON, and a streamed run must end with the plain run's RunResult.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from _anthropic_server import (
    MODEL,
    anthropic_server,
    error_reply,
    message_body,
    message_events,
    text,
    thinking,
    tool_use,
)
from _loopback import LoopbackServer, Reply
from _openai_server import add_numbers_tool
from test_openai_deltas import calls_of, first_text, tasks_left, text_of, threads_left
from test_stream_deltas import call_texts, comparable, is_delta, split_turns
from tooldeck import Agent, AssistantOutput, Event, FinalAnswer, Message, ModelSettings, TextDelta
from tooldeck.errors import (
    ModelError,
    ModelOutputTruncated,
    ModelRefused,
    ModelUnavailable,
)
from tooldeck.messages import Usage
from tooldeck.models.anthropic import AnthropicModel
from tooldeck.models.base import StreamItem, TextChunk, ToolCallChunk

PROMPT = "Add 2 and 3, and 10 and 20."
THOUGHT = thinking("Two sums: call the tool twice.", "EqQBCgIYAhIM1gbcDa9GJwZA")
CALLS = [
    tool_use("toolu_a", "add_numbers", {"a": 2, "b": 3}),
    tool_use("toolu_b", "add_numbers", {"a": 10, "b": 20}),
]
FIRST = message_body([THOUGHT, text("Adding both."), *CALLS], usage=(40, 30), cached=100)
LAST = message_body([text("5 and 30.")], usage=(190, 6))
THINKING_ON = {"thinking": {"type": "enabled", "budget_tokens": 2048}}


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with anthropic_server() as fake:
        yield fake


def make_model(server: LoopbackServer, **options: Any) -> AnthropicModel:
    options.setdefault("max_retries", 0)
    return AnthropicModel(MODEL, base_url=server.root, api_key="sk-ant-test", **options)


def streamed(body: dict[str, Any], **options: Any) -> Reply:
    return Reply(events=message_events(body), **options)


async def collect(model: AnthropicModel, into: list[StreamItem] | None = None) -> list[StreamItem]:
    """Every item of one ``stream()``; ``into`` keeps those that came before an error."""
    items = [] if into is None else into
    spec = add_numbers_tool().spec
    async for item in model.stream([Message.user(PROMPT)], [spec], ModelSettings()):
        items.append(item)
    return items


async def complete(model: AnthropicModel) -> AssistantOutput:
    spec = add_numbers_tool().spec
    return await model.complete([Message.user(PROMPT)], [spec], ModelSettings())


def order(chunks: list[StreamItem]) -> list[str]:
    """What the chunks wrote, in order, each run of one kind once: ``text``, ``call 0``, ..."""
    kinds: list[str] = []
    for chunk in chunks:
        kind = f"call {chunk.index}" if isinstance(chunk, ToolCallChunk) else "text"
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return kinds


async def test_chunks_add_up_to_the_turn_the_json_message_gives(server: LoopbackServer) -> None:
    server.reply(streamed(FIRST), Reply(body=FIRST))

    *chunks, output = await collect(make_model(server))
    whole = await complete(make_model(server))

    assert output == whole  # thinking with its signature, calls, usage: all the same
    assert output.provider_items == (THOUGHT,)
    assert output.usage is not None
    assert output.usage.model_copy(update={"cost_usd": None}) == Usage(
        input_tokens=140, output_tokens=30
    )
    assert order(chunks) == ["text", "call 0", "call 1"]
    assert [chunk.text for chunk in chunks if isinstance(chunk, TextChunk)] == ["Adding", " both."]
    assert calls_of(chunks) == {
        0: ("toolu_a", "add_numbers", '{"a": 2, "b": 3}'),
        1: ("toolu_b", "add_numbers", '{"a": 10, "b": 20}'),
    }
    first_call = next(chunk for chunk in chunks if isinstance(chunk, ToolCallChunk))
    assert first_call.arguments == ""  # the block's start names the call before its input
    assert server.bodies[0]["stream"] is True
    assert "stream" not in server.bodies[1]


async def test_a_streamed_run_ends_with_the_plain_runs_result(server: LoopbackServer) -> None:
    server.reply(Reply(body=FIRST), Reply(body=LAST), streamed(FIRST), streamed(LAST))
    model = make_model(server, request_options=THINKING_ON)
    agent: Agent[None] = Agent(model, tools=[add_numbers_tool()])

    plain = await agent.run(PROMPT)
    events = [event async for event in agent.stream(PROMPT, deltas=True)]

    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert comparable(final.result) == comparable(plain)
    assert final.result.answer == "5 and 30."
    assert (final.result.usage.input_tokens, final.result.usage.output_tokens) == (330, 36)
    assert [type(event).__name__ for event in events if not is_delta(event)] == [
        "ModelRequest",
        "ModelResponse",
        "ToolCallStarted",
        "ToolCallStarted",
        "ToolCallFinished",
        "ToolCallFinished",
        "ModelRequest",
        "ModelResponse",
        "FinalAnswer",
    ]
    first_turn, second_turn = split_turns(events)
    assert "".join(e.text for e in first_turn if isinstance(e, TextDelta)) == "Adding both."
    assert call_texts(first_turn) == {
        0: ("toolu_a", "add_numbers", '{"a": 2, "b": 3}'),
        1: ("toolu_b", "add_numbers", '{"a": 10, "b": 20}'),
    }
    assert {event.round for event in first_turn} == {1}
    assert "".join(e.text for e in second_turn if isinstance(e, TextDelta)) == "5 and 30."
    assert {event.round for event in second_turn} == {2}
    plain_second, streamed_second = dict(server.bodies[1]), dict(server.bodies[3])
    assert streamed_second.pop("stream") is True
    assert streamed_second == plain_second  # the thinking block went back unchanged
    assert streamed_second["messages"][1]["content"][0] == THOUGHT


async def test_usage_keeps_the_counts_a_message_delta_leaves_out(server: LoopbackServer) -> None:
    body = message_body([text("Hi")], usage=(25, 9), cached=100)
    events = message_events(body)
    name, delta = events[-2]
    assert name == "message_delta"
    delta["usage"] = {"input_tokens": 25, "output_tokens": 9}  # cumulative, without cache counts
    server.reply(Reply(events=events), Reply(body=body))

    *_, output = await collect(make_model(server))
    whole = await complete(make_model(server))

    assert output.usage == whole.usage
    assert output.usage is not None
    assert output.usage.model_copy(update={"cost_usd": None}) == Usage(
        input_tokens=125, output_tokens=9
    )


async def watch(agent: Agent[None], seen: list[Event]) -> None:
    """Run the prompt with deltas, keeping every event (also those before an error)."""
    async for event in agent.stream(PROMPT, deltas=True):
        seen.append(event)


def events_until_first_text(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The message's events up to and including its first text delta."""
    events = message_events(body)
    first = next(i for i, (_, data) in enumerate(events) if data.get("delta", {}).get("text"))
    return events[: first + 1]


async def test_an_error_event_after_text_ends_the_run_as_an_overloaded_status_does(
    server: LoopbackServer,
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    events = events_until_first_text(message_body([text("It is sunny in Paris.")]))
    server.reply(error_reply(529, "overloaded_error", "Overloaded"))
    server.reply(Reply(events=[*events, ("error", overloaded)]))
    agent: Agent[None] = Agent(make_model(server))

    with pytest.raises(ModelUnavailable) as plain:
        await agent.run(PROMPT)
    seen: list[Event] = []
    with pytest.raises(
        ModelUnavailable, match=r"the stream reported an error: overloaded_error: Overloaded$"
    ) as streamed_error:
        await watch(agent, seen)

    assert [event.text for event in seen if isinstance(event, TextDelta)] == ["It is sunn"]
    assert plain.value.result is not None
    assert streamed_error.value.result is not None
    assert plain.value.result.stop_reason == streamed_error.value.result.stop_reason
    assert streamed_error.value.result.stop_reason == "model_error"


@pytest.mark.parametrize(
    ("stop_reason", "details", "error"),
    [
        ("max_tokens", None, ModelOutputTruncated),
        (
            "refusal",
            {"type": "refusal", "category": "cyber", "explanation": "Not that."},
            ModelRefused,
        ),
        ("a_new_reason", None, ModelError),
    ],
)
async def test_a_stop_reason_raises_what_complete_raises_after_the_text(
    server: LoopbackServer, stop_reason: str, details: dict[str, Any] | None, error: type[Exception]
) -> None:
    body = message_body([text("The first half")], stop_reason=stop_reason, stop_details=details)
    server.reply(streamed(body), Reply(body=body))
    items: list[StreamItem] = []

    with pytest.raises(error) as from_stream:
        await collect(make_model(server), into=items)
    with pytest.raises(error) as from_json:
        await complete(make_model(server))

    assert str(from_stream.value) == str(from_json.value)
    assert text_of(items) == "The first half"


async def test_a_stream_without_message_stop_is_a_model_error(server: LoopbackServer) -> None:
    server.reply(Reply(events=message_events(message_body([text("It is sunny.")]))[:-1]))

    with pytest.raises(ModelError, match=r"the stream ended before the response was complete$"):
        await collect(make_model(server))


async def test_a_delta_for_a_block_never_started_is_a_model_error(server: LoopbackServer) -> None:
    events = message_events(message_body([text("Hi")]))
    stray = {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "text_delta", "text": "?"},
    }
    server.reply(Reply(events=[*events[:2], ("content_block_delta", stray), *events[2:]]))

    with pytest.raises(
        ModelError, match=r"the stream sent a delta for content block 3, which it never started$"
    ):
        await collect(make_model(server))


def held(body: dict[str, Any]) -> Reply:
    """The message's events up to its first text delta, then the response held open."""
    return Reply(events=message_events(body), hold_after=len(events_until_first_text(body)))


async def test_closing_the_stream_closes_the_http_response(server: LoopbackServer) -> None:
    server.reply(held(message_body([text("It is sunny in Paris today.")])))
    threads = set(threading.enumerate())
    stream = make_model(server).stream([Message.user(PROMPT)], [], ModelSettings())

    assert await first_text(stream) == "It is sunny i"
    await stream.aclose()

    assert await tasks_left() == set()
    assert await asyncio.to_thread(server.client_left.wait, 10)
    assert await threads_left(threads) == set()


async def test_cancelling_a_streaming_run_closes_the_http_response(server: LoopbackServer) -> None:
    server.reply(held(message_body([text("It is sunny in Paris today.")])))
    got_text = asyncio.Event()

    async def consume() -> None:
        async for event in Agent(make_model(server)).stream(PROMPT, deltas=True):
            if isinstance(event, TextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_text.wait(), 10)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert await tasks_left() == set()
    assert await asyncio.to_thread(server.client_left.wait, 10)


async def test_a_stream_that_stalls_past_the_timeout_is_unavailable(
    server: LoopbackServer,
) -> None:
    server.reply(held(message_body([text("It is sunny in Paris today.")])))
    items: list[StreamItem] = []

    with pytest.raises(ModelUnavailable, match=r"the request to http://127\.0\.0\.1:\d+ timed out"):
        await collect(make_model(server, timeout=0.5), into=items)

    assert text_of(items) == "It is sunny i"
