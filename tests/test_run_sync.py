"""``run_sync()`` works inside a running event loop (Jupyter, async web handlers): the run goes
on tooldeck's background loop while the caller waits."""

from __future__ import annotations

import asyncio
import threading

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, ScriptedModel, tool
from tooldeck.errors import ScriptExhausted


def where_agent() -> tuple[Agent, list[tuple[int, str]]]:
    """An agent whose async tool records the loop and thread it ran on."""
    seen: list[tuple[int, str]] = []

    @tool
    async def where() -> str:
        """Say where this runs."""
        seen.append((id(asyncio.get_running_loop()), threading.current_thread().name))
        return "here"

    model = ScriptedModel([calls(call("where")), answer("done")] * 2)
    return Agent(model, [where]), seen


async def test_run_sync_inside_a_running_loop_runs_to_completion_on_another_loop() -> None:
    agent, seen = where_agent()
    caller = id(asyncio.get_running_loop())
    first = agent.run_sync("where?")
    second = agent.run_sync("where again?")
    assert (first.answer, tool_messages(first.messages)) == ("done", ["here"])
    assert second.answer == "done"
    (first_loop, thread), (second_loop, _) = seen
    assert first_loop != caller
    assert thread == "tooldeck-run-sync"
    assert second_loop == first_loop  # one loop, so loop-bound clients survive between runs


def test_run_sync_without_a_running_loop_runs_on_this_thread() -> None:
    agent, seen = where_agent()
    assert agent.run_sync("where?").answer == "done"
    assert seen[0][1] == threading.current_thread().name


async def test_run_sync_inside_run_sync_says_to_await_instead() -> None:
    inner, _ = where_agent()

    @tool
    async def ask_inner() -> str:
        """Ask the inner agent."""
        return inner.run_sync("where?").answer

    model = ScriptedModel([calls(call("ask_inner")), answer("done")])
    outer = Agent(model, [ask_inner], include_error_details=True)
    result = outer.run_sync("go")
    assert tool_messages(result.messages) == [
        "error[tool_error]: RuntimeError: run_sync() was called from code already running "
        "inside run_sync() (an async tool?): it would wait for itself; use "
        "`await agent.run(...)` there"
    ]


async def test_a_run_that_stops_raises_in_the_caller_with_its_result() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ScriptExhausted, match="ScriptedModel has 0 scripted outputs") as stop:
        agent.run_sync("hi")
    assert stop.value.result is not None
    assert stop.value.result.messages[0].content == "hi"
