"""``Model.stream()`` on both OpenAI adapters: the deltas as the SDK receives them, then the turn.

A real HTTP server on 127.0.0.1 sends the events; the chunks the adapter yields must add up to
exactly the turn it ends with, and closing the stream early must close the HTTP response.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from _openai_server import (
    FakeOpenAI,
    Reply,
    call_item,
    chat_call,
    completion_body,
    completion_chunks,
    message_item,
    response_body,
    response_events,
    weather_spec,
)
from tooldeck import AssistantOutput, Message, Model, ModelSettings
from tooldeck.errors import ModelError, ModelStreamMissing
from tooldeck.models.base import StreamItem, TextChunk, ToolCallChunk
from tooldeck.models.openai import OpenAIChatModel, OpenAIResponsesModel

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}


def chat_model(server: FakeOpenAI, stream: bool = False) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, max_retries=0
    )


def responses_model(server: FakeOpenAI, stream: bool = False) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, max_retries=0
    )


async def collect(model: Model) -> list[StreamItem]:
    stream = model.stream([Message.user("Weather?")], [weather_spec()], ModelSettings())
    return [item async for item in stream]


def text_of(items: list[StreamItem]) -> str:
    return "".join(item.text for item in items if isinstance(item, TextChunk))


def calls_of(items: list[StreamItem]) -> dict[int, tuple[str, str, str]]:
    """index -> (call id, name, the joined argument pieces), checking id and name never change."""
    calls: dict[int, tuple[str, str, str]] = {}
    for item in items:
        if isinstance(item, ToolCallChunk):
            call_id, name, text = calls.get(item.index, (item.call_id, item.name, ""))
            assert (item.call_id, item.name) == (call_id, name)
            calls[item.index] = (call_id, name, text + item.arguments)
    return calls


async def test_chat_deltas_add_up_to_the_turn_they_end_with(server: FakeOpenAI) -> None:
    body = completion_body(
        "Checking both cities.",
        [
            chat_call("call_a", "get_weather", '{"city":"Paris"}'),
            chat_call("call_b", "get_weather", '{"city":"Oslo"}'),
        ],
    )
    server.reply(Reply(events=completion_chunks(body)), Reply(body=body))

    items = await collect(chat_model(server))
    whole = await chat_model(server).complete(
        [Message.user("Weather?")], [weather_spec()], ModelSettings()
    )

    *chunks, output = items
    assert output == whole  # the streamed turn is the JSON one
    assert [type(chunk) for chunk in chunks[:2]] == [TextChunk, TextChunk]
    assert text_of(chunks) == "Checking both cities."
    assert calls_of(chunks) == {
        0: ("call_a", "get_weather", '{"city":"Paris"}'),
        1: ("call_b", "get_weather", '{"city":"Oslo"}'),
    }
    assert server.bodies[0]["stream"] is True
    assert server.bodies[0]["stream_options"] == {"include_usage": True}


async def test_responses_deltas_number_calls_by_their_place_among_the_calls(
    server: FakeOpenAI,
) -> None:
    body = response_body(
        [
            REASONING,
            message_item("Checking both cities."),
            call_item("call_a", "get_weather", '{"city":"Paris"}'),
            call_item("call_b", "get_weather", '{"city":"Oslo"}'),
        ]
    )
    server.reply(Reply(events=response_events(body)), Reply(body=body))

    items = await collect(responses_model(server))
    whole = await responses_model(server).complete(
        [Message.user("Weather?")], [weather_spec()], ModelSettings()
    )

    *chunks, output = items
    assert output == whole
    assert text_of(chunks) == "Checking both cities."
    assert calls_of(chunks) == {
        0: ("call_a", "get_weather", '{"city":"Paris"}'),
        1: ("call_b", "get_weather", '{"city":"Oslo"}'),
    }
    # The first chunk of a call names it before any argument text arrives.
    first = next(chunk for chunk in chunks if isinstance(chunk, ToolCallChunk))
    assert (first.index, first.call_id, first.name, first.arguments) == (
        0,
        "call_a",
        "get_weather",
        "",
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_complete_on_a_streaming_adapter_yields_no_chunks_and_the_same_turn(
    server: FakeOpenAI, api: str
) -> None:
    if api == "chat":
        body = completion_body("It is sunny.")
        server.reply(Reply(events=completion_chunks(body)))
        model: Model = chat_model(server, stream=True)
    else:
        body = response_body([message_item("It is sunny.")])
        server.reply(Reply(events=response_events(body)))
        model = responses_model(server, stream=True)

    output = await model.complete([Message.user("Weather?")], [], ModelSettings())

    assert output.content == "It is sunny."
    assert server.bodies[0]["stream"] is True


async def test_a_stream_cut_short_is_a_model_error(server: FakeOpenAI) -> None:
    events = response_events(response_body([message_item("It is sunny.")]))[:-1]
    server.reply(Reply(events=events))

    with pytest.raises(ModelError, match="the stream ended before the response was complete"):
        await collect(responses_model(server))


def held_reply(api: str) -> tuple[Callable[[FakeOpenAI], Model], Reply]:
    """A model and a reply that sends its first text delta, then holds the response open."""
    if api == "chat":
        events = completion_chunks(completion_body("It is sunny in Paris today."))
        return chat_model, Reply(events=events, hold_after=2)
    events = response_events(response_body([message_item("It is sunny in Paris today.")]))
    first_delta = next(i for i, (name, _) in enumerate(events) if name and "text.delta" in name)
    return responses_model, Reply(events=events, hold_after=first_delta + 1)


async def first_text(stream: AsyncIterator[StreamItem]) -> str:
    async for item in stream:
        if isinstance(item, TextChunk):
            return item.text
    raise AssertionError("the stream ended before any text")


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_closing_the_stream_closes_the_http_response(server: FakeOpenAI, api: str) -> None:
    make, reply = held_reply(api)
    server.reply(reply)
    threads = set(threading.enumerate())
    stream = make(server).stream([Message.user("Weather?")], [], ModelSettings())

    assert await first_text(stream) == "It is sunny i"  # the first half of the text
    await stream.aclose()

    assert await tasks_left() == set()
    assert await asyncio.to_thread(server.client_left.wait, 10)
    assert await threads_left(threads) == set()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_cancelling_the_task_closes_the_http_response(server: FakeOpenAI, api: str) -> None:
    make, reply = held_reply(api)
    server.reply(reply)
    got_text = asyncio.Event()

    async def consume() -> AssistantOutput | None:
        async for item in make(server).stream([Message.user("Weather?")], [], ModelSettings()):
            got_text.set()
            if isinstance(item, AssistantOutput):
                return item
        return None

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_text.wait(), 10)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert await tasks_left() == set()
    assert await asyncio.to_thread(server.client_left.wait, 10)


async def tasks_left() -> set[asyncio.Task[Any]]:
    """Tasks other than this one, once the SDK's own suspended iterators were finalized.

    asyncio closes a dropped async generator in a task of its own on the next loop turn.
    """
    for _ in range(3):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    return {task for task in asyncio.all_tasks() if task is not current}


async def threads_left(before: set[threading.Thread]) -> set[threading.Thread]:
    """Threads started since ``before`` still alive, other than the default executor's
    (``asyncio.to_thread`` starts one), once the loopback server's request handlers — which
    end just after the client leaves, on their own schedule — have finished (up to 10 s)."""
    for _ in range(100):
        started = {
            t
            for t in threading.enumerate()
            if t not in before and not t.name.startswith("asyncio_")
        }
        if not any("process_request_thread" in t.name for t in started):
            break
        await asyncio.sleep(0.1)
    return started


async def test_a_json_answer_to_a_streaming_request_is_a_model_error(server: FakeOpenAI) -> None:
    server.reply(Reply(body=completion_body("It is sunny.")))

    with pytest.raises(ModelStreamMissing, match="with a whole body") as refused:
        await collect(chat_model(server))
    assert "(application/json), not a stream; it said: " in str(refused.value)
    assert "read no deltas, or create the model with stream=False" in str(refused.value)


async def test_a_streaming_request_answered_by_an_error_body_says_what_the_server_said(
    server: FakeOpenAI,
) -> None:
    said = "Automatic streaming tool choice is not supported"
    server.reply(Reply(body={"error": {"message": said, "type": "server_error"}}))
    with pytest.raises(ModelStreamMissing) as refused:
        await collect(chat_model(server))
    assert refused.value.server_message == said
    assert f"it said: {said}." in str(refused.value)


async def test_an_empty_stream_is_a_model_error(server: FakeOpenAI) -> None:
    server.reply(Reply(events=[(None, "[DONE]")]))
    with pytest.raises(ModelStreamMissing, match="carried no chunks") as refused:
        await collect(chat_model(server))
    assert refused.value.server_message == ""
