"""LocalModel streaming: the raw turn read as it grows, and real runs on the default weights.

The reader tests feed a turn's text a few bytes at a time and check that the chunks add up to
what ``parse_turn`` makes of the whole; the ``slow`` tests stream the real model.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from typing import Any

import pytest

from tooldeck import (
    AssistantOutput,
    FinalAnswer,
    Message,
    ModelSettings,
    RunResult,
    TextDelta,
    ToolCallDelta,
)
from tooldeck.cli.demo import demo_agent
from tooldeck.models.base import TextChunk, ToolCallChunk
from tooldeck.models.local import LocalModel
from tooldeck.models.local._prompt import parse_turn
from tooldeck.models.local._stream import TurnReader


def read(text: str, piece_size: int, first: int = 1) -> list[TextChunk | ToolCallChunk]:
    reader = TurnReader(first)
    data = text.encode()
    chunks = []
    for start in range(0, len(data), piece_size):
        chunks.extend(reader.feed(data[start : start + piece_size]))
    return chunks + reader.finish()


def joined(chunks: list[TextChunk | ToolCallChunk]) -> tuple[str, dict[str, tuple[str, str]]]:
    """The text, and call id -> (name, arguments text), checking names never change."""
    text = "".join(chunk.text for chunk in chunks if isinstance(chunk, TextChunk))
    calls: dict[str, tuple[str, str]] = {}
    for chunk in chunks:
        if isinstance(chunk, ToolCallChunk):
            name, arguments = calls.get(chunk.call_id, (chunk.name, ""))
            assert name == chunk.name
            calls[chunk.call_id] = (name, arguments + chunk.arguments)
    return text, calls


TURNS = [
    "answer  17 plus 25 is 42.\n",
    "answer Ça coûte 20 € — vingt euros.",
    'call {"name": "add_numbers", "arguments": {"left": 17, "right": 25}}',
    'call {"name": "draw", "arguments": {"size": {"width": 2, "height": 3}, "colors": ["a}"]}}\n'
    'call {"name": "get_weather", "arguments": {"city": "Zürich"}}\ntool:',
    'call {"name": "add_numbers", "arguments": {"left": 17, "ri',  # cut by the token budget
]


@pytest.mark.parametrize("text", TURNS)
@pytest.mark.parametrize("piece_size", [1, 3, 7])
def test_the_chunks_add_up_to_the_parsed_turn(text: str, piece_size: int) -> None:
    content, calls = parse_turn(text.removesuffix("\ntool:"), 4)

    streamed_text, streamed_calls = joined(read(text, piece_size, first=4))

    assert streamed_text == content
    assert list(streamed_calls) == [call.id for call in calls]
    for call in calls:
        name, arguments = streamed_calls[call.id]
        assert name == call.name
        if call.raw_arguments is None:
            assert json.loads(arguments) == call.arguments
        else:
            assert arguments == call.raw_arguments


def test_a_call_is_named_before_its_arguments_arrive() -> None:
    chunks = read('call {"name": "add_numbers", "arguments": {"left": 1}}', 1)
    assert chunks[0] == ToolCallChunk(0, "call_1", "add_numbers", "")
    assert all(isinstance(chunk, ToolCallChunk) for chunk in chunks)
    assert len(chunks) > 5  # the arguments came a piece at a time


# --- the real model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> LocalModel:
    local = LocalModel()
    local.load()
    return local


def comparable(result: RunResult) -> dict[str, Any]:
    return result.model_dump(exclude={"run_id": True, "tool_trace": {"__all__": {"duration_s"}}})


@pytest.mark.slow
def test_a_streamed_local_run_is_the_plain_run(model: LocalModel) -> None:
    prompt = "What is 17 plus 25?"
    plain = demo_agent(model).run_sync(prompt)

    async def streamed() -> list[Any]:
        return [event async for event in demo_agent(model).stream(prompt, deltas=True)]

    events = asyncio.run(streamed())

    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert comparable(final.result) == comparable(plain)
    first_call = plain.tool_trace[0].call
    call_deltas = [e for e in events if isinstance(e, ToolCallDelta) and e.round == 1]
    assert {(e.call_id, e.name) for e in call_deltas} == {(first_call.id, first_call.name)}
    arguments = "".join(e.arguments_delta for e in call_deltas)
    assert json.loads(arguments) == first_call.arguments
    assert len(call_deltas) > 3  # the arguments came token by token
    last_round = max(e.round for e in events if isinstance(e, TextDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta) and e.round == last_round)
    assert text == plain.answer


@pytest.mark.slow
def test_leaving_a_local_stream_stops_generation_at_once(model: LocalModel) -> None:
    prompt = "What is 17 plus 25?"
    demo_agent(model).run_sync(prompt)
    assert model.last_turn is not None
    whole = model.last_turn.output_tokens  # the answer turn, left to run
    assert whole >= 8

    async def first_words_of_the_answer() -> int:
        async with aclosing(demo_agent(model).stream(prompt, deltas=True)) as events:
            async for event in events:
                if isinstance(event, TextDelta) and event.round == 2:
                    break
        # Closing waited for the decoding thread: the stopped turn's figures are in.
        assert model.last_turn is not None
        return model.last_turn.output_tokens

    stopped = asyncio.run(first_words_of_the_answer())

    assert stopped < whole  # decoding stopped right after the first words


@pytest.mark.slow
def test_a_local_streams_last_item_is_the_turn(model: LocalModel) -> None:
    async def items() -> list[Any]:
        stream = model.stream([Message.user("Say hello.")], [], ModelSettings(max_tokens=12))
        return [item async for item in stream]

    *chunks, output = asyncio.run(items())

    assert isinstance(output, AssistantOutput)
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == output.content


@pytest.mark.slow
def test_a_streamed_auto_turn_is_decided_before_it_is_written(model: LocalModel) -> None:
    from tooldeck.cli.demo import get_weather
    from tooldeck.models.local import CallRule

    async def items() -> list[Any]:
        messages = [Message.user("What's the weather like in Tokyo?")]
        stream = model.stream(messages, [get_weather.spec], ModelSettings(max_tokens=48))
        return [item async for item in stream]

    calibrated = model.call_rule
    try:
        model.call_rule = CallRule(min_fit=-1.0)  # every message fits: the turn calls
        *call_chunks, called = asyncio.run(items())
        model.call_rule = CallRule(min_fit=1.0)  # no message fits: the turn answers
        *text_chunks, answered = asyncio.run(items())
    finally:
        model.call_rule = calibrated

    assert isinstance(called, AssistantOutput)
    assert [call.name for call in called.tool_calls] == ["get_weather"]
    assert call_chunks
    assert all(isinstance(c, ToolCallChunk) for c in call_chunks)
    assert json.loads(
        "".join(c.arguments for c in call_chunks if isinstance(c, ToolCallChunk))
    ) == (called.tool_calls[0].arguments)
    assert isinstance(answered, AssistantOutput)
    assert answered.tool_calls == ()
    assert all(isinstance(c, TextChunk) for c in text_chunks)
    assert "".join(c.text for c in text_chunks if isinstance(c, TextChunk)) == answered.content
    assert answered.content.strip()
