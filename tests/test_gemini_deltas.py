"""GeminiModel.stream(): a response's text as ``streamGenerateContent`` chunks bring it, each call whole.

A real HTTP server on 127.0.0.1 sends the Gemini API's server-sent events to the real
google-genai SDK. Gemini sends a function call whole, so each call is one chunk with all
its arguments. The chunks must add up to the turn they end with, that turn must be the one
the same response gives as JSON, and a streamed run must end with the plain run's RunResult.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from _gemini_server import (
    MODEL,
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
from _loopback import LoopbackServer, Reply
from _openai_server import add_numbers_tool
from test_openai_deltas import calls_of, first_text, tasks_left, text_of, threads_left
from test_stream_deltas import call_texts, comparable, is_delta, split_turns
from tooldeck import Agent, AssistantOutput, Event, FinalAnswer, Message, ModelSettings, TextDelta
from tooldeck.errors import ModelError, ModelOutputTruncated, ModelRefused, ModelUnavailable
from tooldeck.models.base import StreamItem, TextChunk, ToolCallChunk
from tooldeck.models.gemini import GeminiModel

PROMPT = "Add 2 and 3, and 10 and 20."
SIGNATURE = "CiQBVKhc7sig"
FIRST = response_body(
    [
        thought_part("Two sums: call the tool twice."),
        text_part("Adding both."),
        call_part("add_numbers", {"a": 2, "b": 3}, id="fc-a", signature=SIGNATURE),
        call_part("add_numbers", {"a": 10, "b": 20}),
    ],
    usage=(40, 30, 25),
)
LAST = response_body([text_part("5 and 30.")], usage=(190, 6, 0))
THOUGHTS_ON = {"thinking_config": {"include_thoughts": True}}


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with gemini_server() as fake:
        yield fake


def make_model(server: LoopbackServer, **options: Any) -> GeminiModel:
    options.setdefault("max_retries", 0)
    return GeminiModel(MODEL, base_url=server.root, api_key="AIza-test", **options)


def streamed(body: dict[str, Any]) -> Reply:
    return stream_reply(response_chunks(body))


async def collect(model: GeminiModel, into: list[StreamItem] | None = None) -> list[StreamItem]:
    """Every item of one ``stream()``; ``into`` keeps those that came before an error."""
    items = [] if into is None else into
    spec = add_numbers_tool().spec
    async for item in model.stream([Message.user(PROMPT)], [spec], ModelSettings()):
        items.append(item)
    return items


async def complete(model: GeminiModel) -> AssistantOutput:
    spec = add_numbers_tool().spec
    return await model.complete([Message.user(PROMPT)], [spec], ModelSettings())


async def test_chunks_add_up_to_the_turn_the_json_response_gives(server: LoopbackServer) -> None:
    server.reply(streamed(FIRST), Reply(body=FIRST))

    *chunks, output = await collect(make_model(server))
    whole = await complete(make_model(server))

    assert output == whole  # thought and signature kept, ids filled in, usage: all the same
    assert [chunk.text for chunk in chunks if isinstance(chunk, TextChunk)] == ["Adding", " both."]
    assert [(c.index, c.call_id, c.name, c.arguments) for c in chunks[2:]] == [
        (0, "fc-a", "add_numbers", '{"a": 2, "b": 3}'),
        (1, "call_1_1", "add_numbers", '{"a": 10, "b": 20}'),
    ]  # one chunk per call, with all its arguments
    assert len(chunks) == 4  # the thought part writes no chunk
    assert server.requests[0].path.endswith(":streamGenerateContent?alt=sse")
    assert server.requests[1].path.endswith(":generateContent")


async def test_a_streamed_run_ends_with_the_plain_runs_result(server: LoopbackServer) -> None:
    server.reply(Reply(body=FIRST), Reply(body=LAST), streamed(FIRST), streamed(LAST))
    model = make_model(server, request_options=THOUGHTS_ON)
    agent: Agent[None] = Agent(model, tools=[add_numbers_tool()])

    plain = await agent.run(PROMPT)
    events = [event async for event in agent.stream(PROMPT, deltas=True)]

    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert comparable(final.result) == comparable(plain)
    assert final.result.answer == "5 and 30."
    assert (final.result.usage.input_tokens, final.result.usage.output_tokens) == (230, 61)
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
        0: ("fc-a", "add_numbers", '{"a": 2, "b": 3}'),
        1: ("call_1_1", "add_numbers", '{"a": 10, "b": 20}'),
    }
    assert {event.round for event in first_turn} == {1}
    assert "".join(e.text for e in second_turn if isinstance(e, TextDelta)) == "5 and 30."
    assert {event.round for event in second_turn} == {2}
    assert server.bodies[3] == server.bodies[1]  # the signed parts went back unchanged
    signed = server.bodies[3]["contents"][1]["parts"][2]
    assert signed["thoughtSignature"] == SIGNATURE


def chunks_until_first_text(body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The response's chunks up to and including its first (half) text chunk."""
    chunks = response_chunks(body)
    first = next(i for i, (_, data) in enumerate(chunks) if "thought" not in part_of(data))
    return chunks[: first + 1]


def part_of(chunk: dict[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = chunk["candidates"][0]["content"]["parts"][0]
    return part


async def watch(agent: Agent[None], seen: list[Event]) -> None:
    """Run the prompt with deltas, keeping every event (also those before an error)."""
    async for event in agent.stream(PROMPT, deltas=True):
        seen.append(event)


async def test_an_error_after_text_ends_the_run_as_an_unavailable_status_does(
    server: LoopbackServer,
) -> None:
    unavailable = {"error": {"code": 503, "message": "Overloaded.", "status": "UNAVAILABLE"}}
    chunks = chunks_until_first_text(response_body([text_part("It is sunny in Paris.")]))
    server.reply(error_reply(503, "UNAVAILABLE", "Overloaded."))
    server.reply(stream_reply([*chunks, (None, unavailable)]))
    agent: Agent[None] = Agent(make_model(server))

    with pytest.raises(ModelUnavailable) as plain:
        await agent.run(PROMPT)
    seen: list[Event] = []
    with pytest.raises(
        ModelUnavailable, match=r"the stream reported an error: 503 Overloaded\. \(UNAVAILABLE\)$"
    ) as streamed_error:
        await watch(agent, seen)

    assert [event.text for event in seen if isinstance(event, TextDelta)] == ["It is sunn"]
    assert plain.value.result is not None
    assert streamed_error.value.result is not None
    assert plain.value.result.stop_reason == streamed_error.value.result.stop_reason
    assert streamed_error.value.result.stop_reason == "model_error"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            response_body([text_part("The first half")], finish_reason="MAX_TOKENS"),
            ModelOutputTruncated,
        ),
        (response_body([text_part("The first half")], finish_reason="SAFETY"), ModelRefused),
        (response_body([text_part("The first half")], finish_reason="OTHER"), ModelError),
        (blocked_body("PROHIBITED_CONTENT", "Prompt was blocked."), ModelRefused),
    ],
    ids=["max-tokens", "safety", "other", "blocked-prompt"],
)
async def test_a_finish_or_block_raises_what_complete_raises(
    server: LoopbackServer, body: dict[str, Any], error: type[Exception]
) -> None:
    events = response_chunks(body) if "candidates" in body else [(None, body)]
    server.reply(stream_reply(events), Reply(body=body))
    items: list[StreamItem] = []

    with pytest.raises(error) as from_stream:
        await collect(make_model(server), into=items)
    with pytest.raises(error) as from_json:
        await complete(make_model(server))

    assert str(from_stream.value) == str(from_json.value)
    assert text_of(items) == ("" if "promptFeedback" in body else "The first half")


async def test_a_malformed_call_is_announced_before_the_turn(server: LoopbackServer) -> None:
    """The call Gemini could not parse (of the one function allowed) still comes as a chunk.

    The Gemini API does not say what the model wrote, so its arguments are empty text.
    """
    server.reply(streamed(response_body([], finish_reason="MALFORMED_FUNCTION_CALL")))

    *chunks, output = await collect(make_model(server))

    assert [type(chunk) for chunk in chunks] == [ToolCallChunk]
    assert calls_of(chunks) == {0: ("call_1_0", "add_numbers", "")}
    assert output.tool_calls[0].raw_arguments == ""


async def test_a_stream_without_a_finish_reason_is_a_model_error(server: LoopbackServer) -> None:
    server.reply(stream_reply(response_chunks(response_body([text_part("It is sunny.")]))[:-1]))

    with pytest.raises(ModelError, match=r"the stream ended before the response was complete$"):
        await collect(make_model(server))


def held(body: dict[str, Any]) -> Reply:
    """The response's chunks up to its first text, then the response held open."""
    return stream_reply(response_chunks(body), hold_after=len(chunks_until_first_text(body)))


async def no_tasks_left() -> bool:
    """True once the SDK's nested chunk generators, closed in tasks of their own, are done."""
    for _ in range(20):
        if await tasks_left() == set():
            return True
    return False


async def test_closing_the_stream_closes_the_http_response(server: LoopbackServer) -> None:
    server.reply(held(response_body([text_part("It is sunny in Paris today.")])))
    threads = set(threading.enumerate())
    stream = make_model(server).stream([Message.user(PROMPT)], [], ModelSettings())

    assert await first_text(stream) == "It is sunny i"
    await stream.aclose()

    assert await no_tasks_left()
    assert await asyncio.to_thread(server.client_left.wait, 10)
    assert await threads_left(threads) == set()


async def test_cancelling_a_streaming_run_closes_the_http_response(server: LoopbackServer) -> None:
    server.reply(held(response_body([text_part("It is sunny in Paris today.")])))
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
    assert await no_tasks_left()
    assert await asyncio.to_thread(server.client_left.wait, 10)


async def test_a_stream_that_stalls_past_the_timeout_is_unavailable(
    server: LoopbackServer,
) -> None:
    server.reply(held(response_body([text_part("It is sunny in Paris today.")])))
    items: list[StreamItem] = []

    with pytest.raises(ModelUnavailable, match=r"the request to http://127\.0\.0\.1:\d+ timed out"):
        await collect(make_model(server, timeout=0.5), into=items)

    assert text_of(items) == "It is sunny i"
    assert len(server.requests) == 1  # the SDK did not start the answer again
