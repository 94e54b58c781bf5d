"""Cancel reaches every tool in flight, at any depth: ``RunHandle.cancel()``, from another
thread or from a task, while an agent tool's inner run is in a sync tool polling
``ctx.cancelled`` (it is told), an async tool (it is cancelled), a process-isolated one
(its process is killed) or an MCP call (the server is told). The run ends ``cancelled``; the model's conversation says so.
Through the provider simulator (fresh call ids, as a hosted provider gives)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _mcp import FIXTURES, SLOW
from helpers import MAY_HAVE_RUN
from tooldeck import Agent, RunContext, ToolCallStarted, tool
from tooldeck.results import StopReason
from tooldeck.run.events import NestedEvent
from tooldeck.testing import ProviderSimulator, call
from tooldeck.tools.mcp import MCPToolset

CANCELLED = (
    "error[cancelled]: the run was cancelled (the user pressed stop) before this call finished"
    + MAY_HAVE_RUN
)


class Crunching:
    """A sync tool that polls ``ctx.cancelled`` every 10 ms, and when it noticed."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.noticed = threading.Event()
        self.flag_given = False

        @tool
        def crunch(ctx: RunContext[None], rows: int) -> str:
            """Crunch rows, stopping when the run is cancelled."""
            self.flag_given = ctx.cancelled is not None
            self.started.set()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if ctx.cancelled is not None and ctx.cancelled.is_set():
                    self.noticed.set()
                    return "stopped early"
                time.sleep(0.01)
            return "all done"

        self.tool = crunch


def cruncher_tool(sim: ProviderSimulator, crunching: Crunching) -> Any:
    inner = Agent(sim.model(), [crunching.tool], name="cruncher")
    return inner.as_tool(name="cruncher", description="Crunches numbers.")


SCRIPT = [call("cruncher", {"input": "crunch 1e9 rows"}), call("crunch", {"rows": 1_000_000})]


def started_inside(event: object, name: str) -> bool:
    return (
        isinstance(event, NestedEvent)
        and isinstance(event.event, ToolCallStarted)
        and event.event.call.name == name
    )


async def cancelled_inside(crunching: Crunching, sim: ProviderSimulator, from_thread: bool) -> Any:
    """Run the outer agent, cancel it once the inner sync tool runs; the result and how long
    the tool took to notice."""
    outer = Agent(sim.model(), [cruncher_tool(sim, crunching)], name="outer")
    handle = outer.start("Crunch the numbers")
    await asyncio.wait_for(asyncio.to_thread(crunching.started.wait, 60), timeout=90)
    cancelled_at = time.monotonic()
    if from_thread:
        canceller = threading.Thread(target=handle.cancel, args=("the user pressed stop",))
        canceller.start()
        canceller.join()
    else:
        await asyncio.create_task(_cancel_soon(handle))
    result = await asyncio.wait_for(handle.result(), timeout=60)
    assert await asyncio.to_thread(crunching.noticed.wait, 30)
    return result, time.monotonic() - cancelled_at


async def _cancel_soon(handle: Any) -> None:
    handle.cancel("the user pressed stop")


async def test_a_cancel_from_another_thread_reaches_a_sync_tool_inside_an_agent_tool() -> None:
    crunching = Crunching()
    async with ProviderSimulator(SCRIPT) as sim:
        result, took = await cancelled_inside(crunching, sim, from_thread=True)

    assert crunching.flag_given
    assert took < 5  # polled every 10 ms: told at once (before: never)
    assert result.stop_reason == StopReason.CANCELLED
    assert result.messages[-1].content == CANCELLED  # what the outer model would read
    assert [trace.call.name for trace in result.tool_trace] == ["cruncher"]
    assert len(sim.requests) == 2  # no model was asked after the cancel


async def test_a_cancel_from_a_task_reaches_a_sync_tool_inside_an_agent_tool() -> None:
    crunching = Crunching()
    async with ProviderSimulator(SCRIPT) as sim:
        result, took = await cancelled_inside(crunching, sim, from_thread=False)

    assert took < 5
    assert result.stop_reason == StopReason.CANCELLED
    assert result.messages[-1].content == CANCELLED


async def test_a_sync_tool_two_agent_tools_deep_is_told_too() -> None:
    crunching = Crunching()
    script = [call("planner", {"input": "get it crunched"}), *SCRIPT]
    async with ProviderSimulator(script) as sim:
        planner = Agent(sim.model(), [cruncher_tool(sim, crunching)], name="planner")
        top = Agent(sim.model(), [planner.as_tool(name="planner", description="Plans.")])
        handle = top.start("Plan and crunch")
        await asyncio.wait_for(asyncio.to_thread(crunching.started.wait, 60), timeout=90)
        threading.Thread(target=handle.cancel, args=("the user pressed stop",)).start()
        result = await asyncio.wait_for(handle.result(), timeout=60)

    assert await asyncio.to_thread(crunching.noticed.wait, 30)
    assert result.stop_reason == StopReason.CANCELLED
    assert result.messages[-1].content == CANCELLED


async def test_an_async_tool_inside_an_agent_tool_is_cancelled() -> None:
    events: list[str] = []

    @tool
    async def crawl(site: str) -> str:
        """Crawl a whole site."""
        events.append("started")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return "done"

    script = [call("crawler", {"input": "crawl example.org"}), call("crawl", {"site": "x"})]
    async with ProviderSimulator(script) as sim:
        crawler = Agent(sim.model(), [crawl], name="crawler")
        outer = Agent(sim.model(), [crawler.as_tool(name="crawler", description="Crawls.")])
        handle = outer.start("Crawl example.org")
        async for event in handle:
            if started_inside(event, "crawl"):
                handle.cancel("the user pressed stop")
        result = await asyncio.wait_for(handle.result(), timeout=60)

    assert events == ["started", "cancelled"]
    assert result.stop_reason == StopReason.CANCELLED
    assert result.messages[-1].content == CANCELLED


async def test_a_process_tool_inside_an_agent_tool_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "report.txt"
    running = tmp_path / "running"

    @tool(isolation="process")
    def build_report(name: str) -> str:
        """Build a report, slowly."""
        running.touch()
        time.sleep(3)
        marker.write_text(name)
        return "built"

    script = [call("reporter", {"input": "build it"}), call("build_report", {"name": "q3"})]
    async with ProviderSimulator(script) as sim:
        reporter = Agent(sim.model(), [build_report], name="reporter")
        outer = Agent(sim.model(), [reporter.as_tool(name="reporter", description="Reports.")])
        handle = outer.start("Build the Q3 report")
        async for event in handle:
            if started_inside(event, "build_report"):
                for _ in range(600):  # the child process is running the tool
                    if running.exists():
                        break
                    await asyncio.sleep(0.05)
                handle.cancel("the user pressed stop")
        result = await asyncio.wait_for(handle.result(), timeout=60)

    assert result.stop_reason == StopReason.CANCELLED
    assert result.messages[-1].content == CANCELLED
    await asyncio.sleep(4)  # longer than the tool would have needed
    assert not marker.exists()


async def test_an_mcp_call_inside_an_agent_tool_is_cancelled_at_the_server(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    server = str(FIXTURES / "waiting_server.py")
    env = {"WAITING_LOG": str(log)}
    toolset = MCPToolset.stdio(sys.executable, [server], env=env, connect_timeout=SLOW)
    script = [call("waiter", {"input": "wait ten minutes"}), call("wait", {"seconds": 600})]
    async with ProviderSimulator(script) as sim:
        waiter = Agent(sim.model(), [toolset], name="waiter")
        outer = Agent(sim.model(), [waiter.as_tool(name="waiter", description="Waits.")])
        try:
            handle = outer.start("Wait for me")
            async for event in handle:
                if started_inside(event, "wait"):
                    await _until(lambda: _lines(log) == ["started 600"])
                    handle.cancel("the user pressed stop")
            result = await asyncio.wait_for(handle.result(), SLOW)
            # the server hears of it (notifications/cancelled), the connection stays usable
            await _until(lambda: _lines(log) == ["started 600", "cancelled"])
            assert await toolset.call("wait", {"seconds": 0}) == '{"result": "waited"}'
        finally:
            await waiter.aclose()

    assert result.stop_reason == StopReason.CANCELLED
    assert result.messages[-1].content == CANCELLED


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def _until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + SLOW
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the server never said so"
        await asyncio.sleep(0.05)
