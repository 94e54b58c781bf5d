"""One task owns each MCP connection: opening and closing from different tasks, cancelling a
run mid-call and closing while calls are in flight leave no warning (warnings are errors
here), no task behind and no server process; MCP calls pause for approval like any tool.

A test counts only the processes it started: ``others`` are the children alive before it
(another test's leftovers are that test's failure, not this one's)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _mcp import FIXTURES, RAW_SERVER, SLOW, children, stray_tasks, wait_until_no_children
from helpers import MAY_HAVE_RUN, answer, call, calls, tool_messages
from tooldeck import Agent, Approve, Reject, ScriptedModel
from tooldeck.run.events import ToolCallStarted
from tooldeck.tools.mcp import MCPToolset

pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """asyncio logs a task destroyed while pending, or an exception nobody retrieved."""
    caplog.set_level(logging.WARNING)
    yield
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert problems == []


@pytest.fixture
def others() -> frozenset[int]:
    """The children of the test process alive before the test (none of its own)."""
    return frozenset(children())


def raw(**options: Any) -> MCPToolset:
    return MCPToolset.stdio(RAW_SERVER[0], RAW_SERVER[1:], connect_timeout=SLOW, **options)


async def assert_all_closed(others: frozenset[int]) -> None:
    assert await wait_until_no_children(besides=others) == []
    await asyncio.sleep(0)
    assert stray_tasks() == []


async def test_opened_in_one_task_and_closed_in_another(others: frozenset[int]) -> None:
    toolset = raw()
    opened = asyncio.create_task(toolset.entries())
    assert [entry.name for entry in await opened][:2] == ["echo", "count"]
    assert len(children(others)) == 1
    await asyncio.create_task(toolset.aclose())
    await assert_all_closed(others)


async def test_cancelling_a_run_mid_call_leaves_the_connection_usable(
    others: frozenset[int],
) -> None:
    toolset = raw()
    model = ScriptedModel([calls(call("silent", "c1")), answer("never")])
    agent = Agent(model, [toolset])
    started = asyncio.Event()

    async def run() -> None:
        async for event in agent.stream("Wait forever."):
            if isinstance(event, ToolCallStarted):
                started.set()

    running = asyncio.create_task(run())
    await asyncio.wait_for(started.wait(), SLOW)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert await toolset.call("echo", {"text": "still connected"}) == "still connected"
    await agent.aclose()
    await assert_all_closed(others)


async def test_closing_while_calls_are_in_flight_answers_them_and_ends_cleanly(
    others: frozenset[int],
) -> None:
    toolset = raw()
    model = ScriptedModel(
        [calls(call("silent", "c1"), call("silent", "c2", extra=1)), answer("went on")]
    )
    agent = Agent(model, [toolset])
    started: list[str] = []

    async def run() -> list[str]:
        async for event in agent.stream("Wait."):
            if isinstance(event, ToolCallStarted):
                started.append(event.call.id)
        return tool_messages(model.requests[-1].messages)

    running = asyncio.create_task(run())
    while len(started) < 2:
        await asyncio.sleep(0.02)
    await asyncio.create_task(toolset.aclose())
    messages = await asyncio.wait_for(running, SLOW)
    assert [text.split(":")[0] for text in messages] == ["error[tool_error]"] * 2
    assert all("connection closed" in text for text in messages)
    await assert_all_closed(others)


async def test_the_agent_closes_its_toolsets(others: frozenset[int]) -> None:
    async with Agent(ScriptedModel([calls(call("count", "c1")), answer("ok")]), [raw()]) as agent:
        await agent.run("Count.")
        assert len(children(others)) == 1
    await assert_all_closed(others)


def test_each_event_loop_gets_its_own_connection(others: frozenset[int]) -> None:
    toolset = raw()

    async def echo(text: str) -> str:
        return await toolset.call("echo", {"text": text})

    assert asyncio.run(echo("one")) == "one"  # asyncio.run closes the loop: the server ends
    assert asyncio.run(echo("two")) == "two"
    assert asyncio.run(wait_until_no_children(besides=others)) == []


@pytest.fixture
def leftover() -> Iterator[None]:
    """A process another test left running (as a pty test that failed once did)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield
    process.kill()
    process.wait()


async def test_a_process_another_test_left_is_not_counted(
    leftover: None, others: frozenset[int]
) -> None:
    toolset = raw()
    assert [entry.name for entry in await toolset.entries()][:1] == ["echo"]
    assert len(children(others)) == 1
    await toolset.aclose()
    await assert_all_closed(others)


async def test_an_mcp_call_pauses_for_approval_and_runs_when_resumed() -> None:
    model = ScriptedModel(
        [calls(call("echo", "c1", text="approved"), call("count", "c2")), answer("done")]
    )
    first = raw(requires_approval=lambda ctx, arguments: "text" in arguments)
    async with Agent(model, [first]) as agent:
        paused = await agent.run("Echo it.")
    assert paused.stop_reason == "paused"
    assert [pending.call.id for pending in paused.pending] == ["c1"]
    assert tool_messages(paused.messages) == []  # count ran; its message waits for the turn
    checkpoint = paused.checkpoint
    assert checkpoint is not None
    later = Agent(model, [raw(requires_approval=True)])  # a new process, a new connection
    async with later:
        resumed = await later.resume(checkpoint.to_json(), {"c1": Approve(by="ops")})
    assert resumed.stop_reason == "answer"
    assert tool_messages(resumed.messages) == ["approved", "0"]


async def test_a_rejected_mcp_call_never_reaches_the_server(others: frozenset[int]) -> None:
    model = ScriptedModel([calls(call("echo", "c1", text="no")), answer("fine")])
    toolset = raw(requires_approval=True)
    async with Agent(model, [toolset]) as agent:
        paused = await agent.run("Echo.")
        assert paused.checkpoint is not None
        rejected = await agent.resume(paused.checkpoint, {"c1": Reject("not today")})
        assert tool_messages(rejected.messages) == ["error[rejected]: not today"]
        assert await toolset.call("count", {}) == "0"  # the server got no call before
    await assert_all_closed(others)


async def test_cancelling_a_run_cancels_its_mcp_call_at_the_server(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    server = str(FIXTURES / "waiting_server.py")
    env = {"WAITING_LOG": str(log)}
    toolset = MCPToolset.stdio(sys.executable, [server], env=env, connect_timeout=SLOW)
    agent = Agent(ScriptedModel([calls(call("wait", seconds=600))]), [toolset])
    try:
        handle = agent.start("Wait.")
        async for event in handle:
            if isinstance(event, ToolCallStarted):
                await _until(lambda: _lines(log) == ["started 600"])
                handle.cancel(reason="the user pressed stop")
        result = await asyncio.wait_for(handle.result(), SLOW)
        # the server hears of it while the connection stays open (notifications/cancelled)
        await _until(lambda: _lines(log) == ["started 600", "cancelled"])
        assert await toolset.call("wait", {"seconds": 0}) == '{"result": "waited"}'
    finally:
        await agent.aclose()

    assert result.stop_reason == "cancelled"
    assert tool_messages(result.messages) == [
        "error[cancelled]: the run was cancelled (the user pressed stop) before this call finished"
        + MAY_HAVE_RUN
    ]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def _until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + SLOW
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the server never said so"
        await asyncio.sleep(0.05)
