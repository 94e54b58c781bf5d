"""``agent.stream(prompt, deltas=True)``: the model's text and calls as it writes them.

Both OpenAI APIs run over a real HTTP server on 127.0.0.1 through the real SDK; a streamed
run and a plain one of the same exchange must produce the same RunResult.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import pytest

from _openai_server import (
    FakeOpenAI,
    Reply,
    add_numbers_tool,
    call_item,
    chat_call,
    completion_body,
    completion_chunks,
    message_item,
    response_body,
    response_events,
)
from helpers import answer, call, calls
from tooldeck import (
    Agent,
    Event,
    FinalAnswer,
    Limits,
    ModelRequest,
    ModelResponse,
    RunResult,
    ScriptedModel,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    tool,
)
from tooldeck.errors import LimitExceeded
from tooldeck.models.base import Model
from tooldeck.models.openai import OpenAIChatModel, OpenAIResponsesModel

PROMPT = "Add 2 and 3, and 10 and 20."
CALLS = [("call_a", '{"a":2,"b":3}'), ("call_b", '{"a":10,"b":20}')]


def chat_turns(streamed: bool) -> list[Reply]:
    first = completion_body(
        "Adding both.", [chat_call(cid, "add_numbers", args) for cid, args in CALLS]
    )
    last = completion_body("5 and 30.")
    return [
        Reply(events=completion_chunks(body)) if streamed else Reply(body=body)
        for body in (first, last)
    ]


def responses_turns(streamed: bool) -> list[Reply]:
    first = response_body(
        [message_item("Adding both.")] + [call_item(cid, "add_numbers", a) for cid, a in CALLS]
    )
    last = response_body([message_item("5 and 30.")], id="resp_2")
    return [
        Reply(events=response_events(body)) if streamed else Reply(body=body)
        for body in (first, last)
    ]


def make_model(api: str, server: FakeOpenAI) -> Model:
    options: dict[str, Any] = {"base_url": server.url, "api_key": "sk-test", "max_retries": 0}
    if api == "chat":
        return OpenAIChatModel("gpt-4.1-mini", **options)
    return OpenAIResponsesModel("gpt-4.1-mini", **options)


def replies(api: str, streamed: bool) -> list[Reply]:
    return chat_turns(streamed) if api == "chat" else responses_turns(streamed)


def comparable(result: RunResult) -> dict[str, Any]:
    """The result without what differs between two runs of the same exchange (its id, durations)."""
    return result.model_dump(exclude={"run_id": True, "tool_trace": {"__all__": {"duration_s"}}})


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_deltas_come_before_each_turn_and_the_result_is_the_plain_runs(
    server: FakeOpenAI, api: str
) -> None:
    server.reply(*replies(api, streamed=False), *replies(api, streamed=True))
    agent: Agent[None] = Agent(make_model(api, server), tools=[add_numbers_tool()])

    plain = await agent.run(PROMPT)
    events = [event async for event in agent.stream(PROMPT, deltas=True)]

    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert comparable(final.result) == comparable(plain)
    assert final.result.answer == "5 and 30."  # text before the calls did not end the run
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
        0: ("call_a", "add_numbers", '{"a":2,"b":3}'),
        1: ("call_b", "add_numbers", '{"a":10,"b":20}'),
    }
    assert {e.round for e in first_turn} == {1}
    assert "".join(e.text for e in second_turn if isinstance(e, TextDelta)) == "5 and 30."
    assert {e.round for e in second_turn} == {2}
    assert [body.get("stream", False) for body in server.bodies] == [False, False, True, True]


def is_delta(event: Event) -> bool:
    return isinstance(event, TextDelta | ToolCallDelta)


def split_turns(events: list[Event]) -> list[list[TextDelta | ToolCallDelta]]:
    """The deltas between each ModelRequest and its ModelResponse, turn by turn."""
    turns: list[list[TextDelta | ToolCallDelta]] = []
    for event in events:
        if isinstance(event, ModelRequest):
            turns.append([])
        elif isinstance(event, TextDelta | ToolCallDelta):
            turns[-1].append(event)
        else:
            assert isinstance(
                event, ModelResponse | ToolCallStarted | ToolCallFinished | FinalAnswer
            )
    return turns


def call_texts(deltas: list[TextDelta | ToolCallDelta]) -> dict[int, tuple[str, str, str]]:
    texts: dict[int, tuple[str, str, str]] = {}
    for delta in deltas:
        if isinstance(delta, ToolCallDelta):
            _, _, text = texts.get(delta.index, ("", "", ""))
            texts[delta.index] = (delta.call_id, delta.name, text + delta.arguments_delta)
    return texts


async def test_a_model_that_cannot_stream_yields_no_deltas_and_the_same_steps() -> None:
    def script() -> ScriptedModel:
        return ScriptedModel([calls(call("add_numbers", "c1", a=1, b=2)), answer("3")])

    plain = [e async for e in Agent(script(), [add_numbers_tool()]).stream("1+2")]
    streamed = [e async for e in Agent(script(), [add_numbers_tool()]).stream("1+2", deltas=True)]

    assert [type(e) for e in streamed] == [type(e) for e in plain]
    final_plain, final_streamed = plain[-1], streamed[-1]
    assert isinstance(final_plain, FinalAnswer)
    assert isinstance(final_streamed, FinalAnswer)
    assert comparable(final_streamed.result) == comparable(final_plain.result)


def held(api: str) -> Reply:
    """A reply that sends the first half of its text, then holds the response open."""
    if api == "chat":
        return Reply(events=completion_chunks(completion_body("It is sunny today.")), hold_after=2)
    events = response_events(response_body([message_item("It is sunny today.")]))
    first_delta = next(i for i, (name, _) in enumerate(events) if name and "text.delta" in name)
    return Reply(events=events, hold_after=first_delta + 1)


async def tasks_left() -> set[asyncio.Task[Any]]:
    """Other tasks, once asyncio has finalized the SDK's dropped iterators (next loop turn)."""
    for _ in range(3):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    return {task for task in asyncio.all_tasks() if task is not current}


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_leaving_the_stream_closes_the_models_response(server: FakeOpenAI, api: str) -> None:
    server.reply(held(api))
    agent: Agent[None] = Agent(make_model(api, server))

    async with aclosing(agent.stream("Weather?", deltas=True)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                assert event.text == "It is sun"  # the first half
                break

    assert await tasks_left() == set()
    assert await asyncio.to_thread(server.client_left.wait, 10)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_cancelling_a_streaming_run_closes_the_models_response(
    server: FakeOpenAI, api: str
) -> None:
    server.reply(held(api))
    agent: Agent[None] = Agent(make_model(api, server))
    writing = asyncio.Event()

    async def watch() -> None:
        async for event in agent.stream("Weather?", deltas=True):
            if isinstance(event, TextDelta):
                writing.set()

    task = asyncio.create_task(watch())
    await asyncio.wait_for(writing.wait(), 10)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert await tasks_left() == set()
    assert await asyncio.to_thread(server.client_left.wait, 10)


async def test_max_duration_bounds_a_stream_that_stalls(server: FakeOpenAI) -> None:
    server.reply(held("chat"))
    agent: Agent[None] = Agent(make_model("chat", server), limits=Limits(max_duration_s=0.5))
    seen: list[Event] = []

    async def watch() -> None:
        async for event in agent.stream("Weather?", deltas=True):
            seen.append(event)

    with pytest.raises(LimitExceeded, match=r"longer than max_duration_s=0\.5") as stopped:
        await watch()

    assert [type(e).__name__ for e in seen] == ["ModelRequest", "TextDelta"]
    assert stopped.value.result is not None
    assert stopped.value.result.stop_reason == "max_duration_s"
    assert await asyncio.to_thread(server.client_left.wait, 10)


async def test_the_last_answer_at_a_limit_streams_too(server: FakeOpenAI) -> None:
    server.reply(*chat_turns(streamed=True))
    agent: Agent[None] = Agent(
        make_model("chat", server),
        tools=[add_numbers_tool()],
        limits=Limits(max_rounds=1),
        on_limit="final_answer",
    )

    events = [event async for event in agent.stream(PROMPT, deltas=True)]

    _, last_turn = split_turns(events)
    assert "".join(e.text for e in last_turn if isinstance(e, TextDelta)) == "5 and 30."
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert (final.result.answer, final.result.stop_reason) == ("5 and 30.", "max_rounds")
    assert "tools" not in server.bodies[1]  # the last request offers no tools


async def test_leaving_the_stream_while_a_tool_runs_cancels_it() -> None:
    cancelled: list[str] = []

    @tool
    async def slow_lookup(key: str) -> str:
        """Look a key up, slowly."""
        try:
            await asyncio.sleep(0 if key == "fast" else 30)
        except asyncio.CancelledError:
            cancelled.append(key)
            raise
        return key

    turn = calls(call("slow_lookup", "c1", key="fast"), call("slow_lookup", "c2", key="slow"))
    agent = Agent(ScriptedModel([turn, answer("done")]), [slow_lookup])

    async with aclosing(agent.stream("Look both up", deltas=True)) as events:
        async for event in events:
            if isinstance(event, ToolCallFinished):  # the fast call is done, the slow one runs
                break

    assert await tasks_left() == set()
    assert cancelled == ["slow"]
