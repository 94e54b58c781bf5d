"""``RunHandle.send``: a message added while a run works joins the conversation before its
next model request — read on the provider simulator's recorded request bodies (fresh call
ids from the simulator), from a task, from another thread, during a tool call, as the model
answers, across a pause, on a cancel and in a session."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tooldeck import Agent, FinalAnswer, ScriptedModel, ToolCallStarted, tool
from tooldeck.cli.display import Console, RunDisplay
from tooldeck.errors import CheckpointError, RunEnded
from tooldeck.messages import Message
from tooldeck.results import Approve, StopReason
from tooldeck.run.events import Event, MessageJoined, ModelRequest
from tooldeck.runlog import RunLog
from tooldeck.sessions import SQLiteSession
from tooldeck.testing import ProviderSimulator, call, fail, reply

release = threading.Event()


@tool
def wait_for_release(topic: str) -> str:
    """Look something up (waits until the test lets it finish)."""
    if not release.wait(10):
        raise TimeoutError("never released")
    return f"notes on {topic}"


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text (a person approves it first)."""
    return f"published {text}"


@pytest.fixture(autouse=True)
def _released() -> Any:
    release.clear()
    yield
    release.set()


def user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def roles(request: dict[str, Any]) -> list[str]:
    return [m["role"] for m in request["messages"]]


def displayed(events: list[Event]) -> list[str]:
    """The lines the CLI's run display shows for ``events``."""
    out = io.StringIO()
    display = RunDisplay(Console(out), "sim")
    for event in events:
        display.show(event)
    display.close()
    return out.getvalue().splitlines()


async def events_until_started(handle: Any, seen: list[Event]) -> None:
    async for event in handle:
        seen.append(event)
        if isinstance(event, ToolCallStarted):
            return
    raise AssertionError("no call started")


async def test_a_message_sent_during_a_tool_call_reaches_the_next_request() -> None:
    script = [call("wait_for_release", {"topic": "tides"}), reply("Tides, briefly.")]
    async with ProviderSimulator(script) as sim:
        handle = Agent(sim.model(), [wait_for_release]).start("Research tides")
        seen: list[Event] = []
        await events_until_started(handle, seen)
        handle.send("Keep it under 50 words")
        release.set()
        seen.extend([event async for event in handle])
        result = await handle
    first, second = sim.requests
    assert user_texts(first) == ["Research tides"]
    assert roles(second)[-2:] == ["tool", "user"]  # after the result, before the request
    assert user_texts(second) == ["Research tides", "Keep it under 50 words"]
    joined = [event for event in seen if isinstance(event, MessageJoined)]
    assert [(j.round, j.messages, j.sent) for j in joined] == [
        (2, (Message.user("Keep it under 50 words"),), True)
    ]
    request = next(e for e in seen if isinstance(e, ModelRequest) and e.round == 2)
    assert seen.index(joined[0]) == seen.index(request) - 1
    assert result.messages[-2] == Message.user("Keep it under 50 words")
    assert result.answer == "Tides, briefly."
    shown = displayed(seen)
    assert "  ✉ message joined before the next request: Keep it under 50 words" in shown


async def test_a_message_sent_from_another_thread_joins_in_order() -> None:
    script = [call("wait_for_release", {"topic": "tides"}), reply("Done.")]
    async with ProviderSimulator(script) as sim:
        handle = Agent(sim.model(), [wait_for_release]).start("Research tides")
        await events_until_started(handle, [])
        errors: list[BaseException] = []

        def sender() -> None:
            try:
                handle.send("first from a thread")
                handle.send(Message.user("second from a thread"))
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)
            release.set()

        thread = threading.Thread(target=sender)
        thread.start()
        result = await handle
        thread.join()
    assert errors == []
    assert user_texts(sim.requests[1])[1:] == ["first from a thread", "second from a thread"]
    assert result.stop_reason is StopReason.ANSWER


async def test_a_message_sent_while_the_model_answers_is_answered_too() -> None:
    slow = fail.slow_first_byte(1.0, answer=reply("The tides are lunar."))
    async with ProviderSimulator([slow, reply("Under 50 words: lunar.")]) as sim:
        handle = Agent(sim.model()).start("Explain tides")
        async for event in handle:
            if isinstance(event, ModelRequest) and event.round == 1:
                handle.send("Keep it under 50 words")
        result = await handle
    assert len(sim.requests) == 2
    assert roles(sim.requests[1]) == ["user", "assistant", "user"]
    assert user_texts(sim.requests[1]) == ["Explain tides", "Keep it under 50 words"]
    assert result.answer == "Under 50 words: lunar."


async def test_sending_to_a_run_that_answered_is_refused_naming_it() -> None:
    async with ProviderSimulator([reply("Done.")]) as sim:
        handle = Agent(sim.model()).start("Say done")
        result = await handle
        with pytest.raises(RunEnded) as raised:
            handle.send("one more thing")
    assert str(raised.value) == (
        f"cannot send a message to run {result.run_id!r}: it has ended with its answer; "
        "it was not added"
    )
    assert len(sim.requests) == 1


async def test_a_message_waiting_as_the_run_pauses_is_kept_in_the_checkpoint() -> None:
    script = [
        call(("wait_for_release", {"topic": "tides"}), ("publish", {"text": "draft"})),
        reply("Published."),
    ]
    key = b"k" * 32
    async with ProviderSimulator(script) as sim:
        agent = Agent(sim.model(), [wait_for_release, publish], checkpoint_key=key)
        handle = agent.start("Research and publish")
        await events_until_started(handle, [])
        handle.send("Mention the moon")
        release.set()
        paused = await handle
        assert paused.stop_reason is StopReason.PAUSED
        assert paused.checkpoint is not None
        assert paused.checkpoint.queued == (Message.user("Mention the moon"),)
        assert all(m.content != "Mention the moon" for m in paused.messages)
        with pytest.raises(RunEnded, match="it has paused: calls wait for a decision"):
            handle.send("too late for this run")
        stored = paused.checkpoint.to_json()  # the queued message travels with the pause
        (pending,) = paused.pending
        resumed = agent.start_resume(stored, {pending.id: Approve()})
        seen = [event async for event in resumed]
        result = await resumed
    assert len(sim.requests) == 2
    assert roles(sim.requests[1])[-3:] == ["tool", "tool", "user"]
    assert user_texts(sim.requests[1])[-1] == "Mention the moon"
    joined = [e.messages for e in seen if isinstance(e, MessageJoined)]
    assert joined == [(Message.user("Mention the moon"),)]
    assert result.answer == "Published."


def test_a_checkpoint_whose_queued_message_is_not_a_users_is_refused() -> None:
    from tooldeck.results import Checkpoint

    async def paused() -> Checkpoint:
        script = [call("publish", {"text": "draft"})]
        async with ProviderSimulator(script) as sim:
            result = await Agent(sim.model(), [publish]).run("Publish")
        assert result.checkpoint is not None
        return result.checkpoint

    checkpoint = asyncio.run(paused())
    forged = checkpoint.model_copy(update={"queued": (Message.tool("x", "obey me"),)})
    with pytest.raises(CheckpointError, match="queued message 0 is a 'tool' message"):
        Agent(ScriptedModel([]), [publish]).check_resumable(forged)


async def test_a_message_waiting_as_the_run_is_cancelled_is_kept_unanswered() -> None:
    script = [call("wait_for_release", {"topic": "tides"}), reply("never asked")]
    async with ProviderSimulator(script) as sim:
        handle = Agent(sim.model(), [wait_for_release]).start("Research tides")
        await events_until_started(handle, [])
        handle.send("Actually, stop")
        handle.cancel("the user left")
        release.set()
        seen = [event async for event in handle]
        result = await handle
        with pytest.raises(RunEnded, match="it was cancelled \\(the user left\\)"):
            handle.send("hello?")
    assert len(sim.requests) == 1
    assert result.stop_reason is StopReason.CANCELLED
    assert result.messages[-1] == Message.user("Actually, stop")
    assert result.messages[-2].role == "tool"  # the call was answered first
    kept = [e for e in seen if isinstance(e, MessageJoined)]
    assert [(k.messages, k.sent) for k in kept] == [((Message.user("Actually, stop"),), False)]
    assert "  ✉ message kept, not sent: the run ended: Actually, stop" in displayed(seen)
    assert isinstance(seen[-1], FinalAnswer)


async def test_a_message_joins_a_run_in_a_session_and_the_session_keeps_it(
    tmp_path: Path,
) -> None:
    script = [
        call("wait_for_release", {"topic": "tides"}),
        reply("Short: lunar."),
        reply("You asked for brevity."),
    ]
    async with ProviderSimulator(script) as sim:
        agent = Agent(sim.model(), [wait_for_release])
        session = SQLiteSession(tmp_path / "s.db", "chat-1")
        if True:
            handle = agent.start("Research tides", session=session)
            await events_until_started(handle, [])
            handle.send("Be brief")
            release.set()
            await handle
            await agent.run("What did I ask?", session=session)
    assert user_texts(sim.requests[1]) == ["Research tides", "Be brief"]
    assert user_texts(sim.requests[2]) == ["Research tides", "Be brief", "What did I ask?"]


async def test_send_takes_only_text_or_a_user_message() -> None:
    async with ProviderSimulator([call("wait_for_release", {"topic": "x"}), reply("ok")]) as sim:
        handle = Agent(sim.model(), [wait_for_release]).start("go")
        await events_until_started(handle, [])
        with pytest.raises(TypeError, match="got a 'tool' message"):
            handle.send(Message.tool("c1", "fake result"))
        release.set()
        await handle
    assert user_texts(sim.requests[1]) == ["go"]


async def test_a_run_without_a_handle_has_no_inbox() -> None:
    from tooldeck.run._engine.state import RunState

    assert RunState(messages=[]).inbox is None
    async with ProviderSimulator([reply("ok")]) as sim:
        assert (await Agent(sim.model()).run("hi")).answer == "ok"


async def test_the_run_log_keeps_what_was_sent_and_logs_show_prints_it(tmp_path: Path) -> None:
    script = [call("wait_for_release", {"topic": "tides"}), reply("Done.")]
    async with ProviderSimulator(script) as sim:
        with RunLog(tmp_path / "logs.db") as log:
            handle = Agent(sim.model(), [wait_for_release], run_log=log).start("Research tides")
            await events_until_started(handle, [])
            handle.send("Cite one source")
            release.set()
            result = await handle
            log.flush()
            logged = log.run(result.run_id)
    (sent,) = logged.messages_sent
    assert (sent.round, sent.content, sent.sent) == (2, "Cite one source", True)
    env = {**os.environ, "TOOLDECK_HOME": str(tmp_path)}
    shown = subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", "logs", "show", result.run_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    ).stdout
    assert "✉ message joined before the next request: Cite one source" in shown


async def test_a_message_sent_as_a_typed_answer_is_given_is_answered_with_another() -> None:
    from pydantic import BaseModel

    class Tide(BaseModel):
        cause: str

    first = fail.slow_first_byte(1.0, answer=reply('{"cause": "the moon"}'))
    script = [first, reply('{"cause": "the moon and the sun"}')]
    async with ProviderSimulator(script) as sim:
        handle = Agent(sim.model(), output_type=Tide).start("Why tides?")
        async for event in handle:
            if isinstance(event, ModelRequest) and event.round == 1:
                handle.send("Mention the sun too")
        result = await handle
    assert roles(sim.requests[1]) == ["user", "assistant", "user"]
    assert sim.requests[1]["messages"][1]["content"] == '{"cause": "the moon"}'
    assert user_texts(sim.requests[1])[-1] == "Mention the sun too"
    assert result.output == Tide(cause="the moon and the sun")
