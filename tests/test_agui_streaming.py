"""The AG-UI endpoint over a real socket (uvicorn on 127.0.0.1): pieces arrive while the model
is still writing, an OpenAI-compatible server's streamed text and tool arguments come through
as AG-UI deltas, a thread runs one request at a time, and the app mounts in another app."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import (
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from starlette.applications import Starlette
from starlette.routing import Mount

from _agui import EVENT, approve, new_input, of_type, parse, post
from _asgi_server import serving
from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from helpers import answer, call, calls
from tooldeck import Agent, AssistantOutput, Model, ScriptedModel, ToolCall, tool
from tooldeck.models.base import TextChunk, ToolCallChunk
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.serve.agui import app
from tooldeck.sessions import SQLiteSession


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"sunny in {city}"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


class Gated(Model):
    """Writes part of its turn, then waits for the test to open the gate before the rest."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.writing = threading.Event()

    async def complete(
        self, messages: Any, tools: Any, settings: Any, instructions: str = ""
    ) -> Any:
        call = ToolCall(id="w1", name="get_weather", arguments={"city": "Oslo"})
        return AssistantOutput(content="Let me look.", tool_calls=(call,))

    async def stream(
        self, messages: Any, tools: Any, settings: Any, instructions: str = ""
    ) -> AsyncIterator[Any]:
        if len(messages) > 1:  # the second request: answer
            yield AssistantOutput(content="Sunny.")
            return
        yield TextChunk("Let me ")
        yield ToolCallChunk(0, "", "", '{"ci')  # no id or name yet: kept until they come
        yield ToolCallChunk(0, "w1", "get_weather", "")
        self.writing.set()
        await asyncio.to_thread(self.gate.wait, 30)
        yield TextChunk("look.")
        yield ToolCallChunk(0, "w1", "get_weather", 'ty": "Oslo"}')
        yield await self.complete(messages, tools, settings, instructions)


async def test_pieces_arrive_while_the_model_is_still_writing(tmp_path: Path) -> None:
    model = Gated()
    agent = Agent(model, [get_weather])
    seen: list[Any] = []
    with serving(app(agent, data_dir=tmp_path)) as root:
        async with (
            httpx.AsyncClient(base_url=root, timeout=30) as client,
            client.stream("POST", "/", json=new_input("t1", "Weather in Oslo?")) as response,
        ):
            buffer = ""
            async for chunk in response.aiter_text():
                buffer += chunk
                while "\n\n" in buffer:
                    frame, buffer = buffer.split("\n\n", 1)
                    seen.append(EVENT.validate_json(frame.removeprefix("data: ")))
                if model.writing.is_set() and not model.gate.is_set() and _has_both(seen):
                    model.gate.set()  # the first pieces came while the model was held
    assert model.gate.is_set(), "the first pieces did not arrive before the turn was whole"
    parse("".join(f"data: {e.model_dump_json(by_alias=True)}\n\n" for e in seen))
    assert [e.delta for e in of_type(seen, TextMessageContentEvent)] == [
        "Let me ",
        "look.",
        "Sunny.",
    ]
    assert [e.delta for e in of_type(seen, ToolCallArgsEvent)] == ['{"ci', 'ty": "Oslo"}']
    (result,) = of_type(seen, ToolCallResultEvent)
    assert result.content == "sunny in Oslo"
    assert isinstance(seen[-1], RunFinishedEvent)
    assert seen[-1].result == "Sunny."


def _has_both(events: list[Any]) -> bool:
    return bool(of_type(events, TextMessageContentEvent)) and bool(
        of_type(events, ToolCallArgsEvent)
    )


async def test_an_openai_compatible_server_streams_through_as_ag_ui_events(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    first = completion_body("Checking.", [chat_call("call_a", "get_weather", '{"city":"Paris"}')])
    second = completion_body("It is sunny in Paris.", usage=(30, 9))
    server.reply(Reply(events=completion_chunks(first)), Reply(events=completion_chunks(second)))
    model = OpenAIChatModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=True, max_retries=0
    )
    agent = Agent(model, [get_weather])

    with serving(app(agent, data_dir=tmp_path)) as root:
        async with httpx.AsyncClient(base_url=root, timeout=30) as client:
            events = await post(client, new_input("paris", "Weather in Paris?"))

    assert [e.delta for e in of_type(events, TextMessageContentEvent)] == [
        "Chec",
        "king.",
        "It is sunn",
        "y in Paris.",
    ]
    (start,) = of_type(events, ToolCallStartEvent)
    assert (start.tool_call_id, start.tool_call_name) == ("call_a", "get_weather")
    args = [e.delta for e in of_type(events, ToolCallArgsEvent)]
    assert len(args) == 2
    assert json.loads("".join(args)) == {"city": "Paris"}
    (result,) = of_type(events, ToolCallResultEvent)
    assert result.content == "sunny in Paris"
    done = events[-1]
    assert isinstance(done, RunFinishedEvent)
    assert done.result == "It is sunny in Paris."
    (usage,) = done.usage or []
    assert (usage.model, usage.input_tokens, usage.output_tokens, usage.total_tokens) == (
        "openai-chat:gpt-4.1-mini",
        50,
        16,
        66,
    )


async def test_a_thread_runs_one_request_at_a_time(tmp_path: Path) -> None:
    model = Gated()
    agent = Agent(model, [get_weather])
    transport = httpx.ASGITransport(app=app(agent, data_dir=tmp_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        first = asyncio.create_task(post(client, new_input("t1", "Weather in Oslo?")))
        while not model.writing.is_set():
            await asyncio.sleep(0.01)
        busy = await post(client, new_input("t1", "And in Rome?"))
        other_thread = asyncio.create_task(post(client, new_input("t2", "Hello")))
        model.gate.set()
        done = await first
        await other_thread

    (error,) = busy
    assert isinstance(error, RunErrorEvent)
    assert error.code == "thread_busy"
    assert isinstance(done[-1], RunFinishedEvent)
    assert done[-1].result == "Sunny."


async def test_the_app_mounts_in_a_starlette_application(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel([answer("Hi from the mount.")]))
    host = Starlette(routes=[Mount("/agent", app=app(agent, data_dir=tmp_path))])
    transport = httpx.ASGITransport(app=host)
    async with httpx.AsyncClient(transport=transport, base_url="http://host.test") as client:
        events = await post(client, new_input("t1", "Hello"), path="/agent/")

    assert isinstance(events[-1], RunFinishedEvent)
    assert events[-1].result == "Hi from the mount."


async def test_a_call_inside_an_agent_tool_is_an_interrupt_of_the_outer_call(
    tmp_path: Path,
) -> None:
    cleaner = Agent(
        ScriptedModel([calls(call("delete_file", "c1", path="old.log")), answer("Done.")]),
        [delete_file],
    )
    planner = Agent(
        ScriptedModel([calls(call("cleaner", "p1", input="remove old.log")), answer("Clean.")]),
        [cleaner.as_tool(name="cleaner", description="Deletes files.")],
    )
    transport = httpx.ASGITransport(app=app(planner, data_dir=tmp_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        events = await post(client, new_input("t1", "Tidy up."))
        outcome = events[-1].outcome
        (interrupt,) = outcome.interrupts
        resumed = await post(client, new_input("t1", resume=[approve(interrupt.id, approved=True)]))

    assert (interrupt.tool_call_id, interrupt.metadata["tooldeck"]["id"]) == ("p1", "p1/c1")
    assert interrupt.metadata["tooldeck"]["path"] == ["cleaner"]
    assert interrupt.message == 'Approve delete_file({"path": "old.log"}) (inside cleaner)?'
    outer = [r for r in of_type(resumed, ToolCallResultEvent) if r.subagent_run_id is None]
    (result,) = outer  # the cleaner's own call's result is its subagent's
    assert (result.tool_call_id, result.content) == ("p1", "Done.")
    assert isinstance(resumed[-1], RunFinishedEvent)
    assert resumed[-1].result == "Clean."


async def test_a_client_that_goes_away_stops_the_run_and_frees_the_thread(tmp_path: Path) -> None:
    model = Gated()
    agent = Agent(model, [get_weather])
    with serving(app(agent, data_dir=tmp_path)) as root:
        async with httpx.AsyncClient(base_url=root, timeout=30) as client:
            async with client.stream("POST", "/", json=new_input("t1", "Weather?")) as response:
                async for chunk in response.aiter_text():
                    if "TEXT_MESSAGE_CONTENT" in chunk:
                        break  # the page is closed mid-answer
            model.gate.set()
            for _ in range(300):  # until the server has seen the client go (at most 30 s)
                events = await post(client, new_input("t1", "Weather?"))
                if not isinstance(events[-1], RunErrorEvent):
                    break
                assert events[-1].code == "thread_busy"
                await asyncio.sleep(0.1)

    assert isinstance(events[-1], RunFinishedEvent)
    assert events[-1].result == "Sunny."
    history = await SQLiteSession(tmp_path / "sessions.db", "t1").load()
    assert [m.content for m in history.messages if m.role == "user"] == ["Weather?"]
