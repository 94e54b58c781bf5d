"""Tools that cannot flood a run: ``@tool(max_calls=N)`` per run, ``@tool(max_concurrency=N)``
across every run in the process, ``Limits(max_parallel_calls=N)`` per turn."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, Approve, Limits, ScriptedModel, tool
from tooldeck.errors import ToolDefinitionError
from tooldeck.tools.slots import slots_for


class Gauge:
    """How many calls run at once, and the most there ever were (any thread)."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


def test_calls_past_a_tools_max_calls_are_answered_as_not_run_and_the_run_goes_on() -> None:
    @tool(max_calls=2)
    def search(query: str) -> str:
        """Search."""
        return f"found {query}"

    @tool
    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    model = ScriptedModel(
        [
            calls(call("search", "c1", query="a"), call("search", "c2", query="b")),
            calls(call("search", "c3", query="c"), call("note", "c4", text="x")),
            answer("done"),
        ]
    )
    result = Agent(model, [search, note]).run_sync("Research")

    assert result.answer == "done"
    assert tool_messages(result.messages) == [
        "found a",
        "found b",
        "error[call_limit]: not run: this run reached the limit of 2 calls of 'search' "
        "(max_calls); go on without it",
        "noted",
    ]
    again = ScriptedModel([calls(call("search", "c1", query="d")), answer("ok")])
    assert tool_messages(Agent(again, [search]).run_sync("Again").messages) == ["found d"]


def test_a_tools_call_count_survives_a_pause() -> None:
    @tool(max_calls=1)
    def search(query: str) -> str:
        """Search."""
        return f"found {query}"

    @tool(requires_approval=True)
    def send(text: str) -> str:
        """Send."""
        return "sent"

    model = ScriptedModel(
        [
            calls(call("search", "c1", query="a"), call("send", "c2", text="hi")),
            calls(call("search", "c3", query="b")),
            answer("done"),
        ]
    )
    agent = Agent(model, [search, send])
    paused = agent.run_sync("Go")
    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint.to_json(), {"c2": Approve()})
    assert tool_messages(done.messages)[-1].startswith("error[call_limit]: not run")


async def test_max_concurrency_holds_across_runs_in_one_loop() -> None:
    gauge = Gauge()

    @tool(max_concurrency=2)
    async def query(n: int) -> str:
        """Query the database."""
        gauge.enter()
        await asyncio.sleep(0.02)
        gauge.leave()
        return str(n)

    def agent() -> Agent:
        turn = calls(*(call("query", f"c{n}", n=n) for n in range(3)))
        return Agent(ScriptedModel([turn, answer("ok")]), [query])

    results = await asyncio.gather(*(agent().run(f"run {i}") for i in range(4)))

    assert [r.answer for r in results] == ["ok"] * 4
    assert gauge.most == 2
    assert slots_for(query.origin, "query", 2).in_use == 0


def test_max_concurrency_holds_across_runs_in_threads() -> None:
    gauge = Gauge()

    @tool(max_concurrency=1)
    def write(n: int) -> str:
        """Write a row."""
        gauge.enter()
        time.sleep(0.01)
        gauge.leave()
        return str(n)

    def work() -> None:
        turn = calls(*(call("write", f"c{n}", n=n) for n in range(2)))
        Agent(ScriptedModel([turn, answer("ok")]), [write]).run_sync("Go")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert gauge.most == 1


async def test_a_call_that_times_out_waiting_for_a_slot_gives_nothing_away() -> None:
    @tool(max_concurrency=1, timeout=0.3)
    async def lock_table(n: int) -> str:
        """Lock a table."""
        return f"locked {n}"

    slots = slots_for(lock_table.origin, "lock_table", 1)
    release = asyncio.Event()
    holder = asyncio.ensure_future(slots.run(release.wait()))  # a call of another run
    await asyncio.sleep(0)
    assert slots.in_use == 1
    waiting = Agent(ScriptedModel([calls(call("lock_table", n=1)), answer("ok")]), [lock_table])
    timed_out = await waiting.run("b")
    release.set()
    await holder
    later = Agent(ScriptedModel([calls(call("lock_table", n=2)), answer("ok")]), [lock_table])

    assert tool_messages(timed_out.messages) == [
        "error[tool_timeout]: 'lock_table' did not finish within 0.3 s and was stopped; try "
        "smaller inputs or another approach"
    ]
    assert tool_messages((await later.run("c")).messages) == ["locked 2"]
    assert slots.in_use == 0


async def test_max_parallel_calls_bounds_one_turn() -> None:
    gauge = Gauge()

    @tool
    async def fetch(n: int) -> str:
        """Fetch a page."""
        gauge.enter()
        await asyncio.sleep(0.01)
        gauge.leave()
        return str(n)

    turn = calls(*(call("fetch", f"c{n}", n=n) for n in range(4)))
    agent = Agent(ScriptedModel([turn, answer("ok")]), [fetch], limits=Limits(max_parallel_calls=1))
    result = await agent.run("Fetch")
    assert tool_messages(result.messages) == ["0", "1", "2", "3"]
    assert gauge.most == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_calls": 0}, "tool 'f': max_calls must be a whole number of at least 1, got 0"),
        (
            {"max_concurrency": 1.5},
            "tool 'f': max_concurrency must be a whole number of at least 1, got 1.5",
        ),
    ],
)
def test_bad_call_limits_are_refused_naming_the_tool(
    options: dict[str, object], message: str
) -> None:
    def f() -> str:
        """F."""
        return ""

    with pytest.raises(ToolDefinitionError, match=message):
        tool(**options)(f)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"Limits\.max_parallel_calls must be positive"):
        Limits(max_parallel_calls=0)
