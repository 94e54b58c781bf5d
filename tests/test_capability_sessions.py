"""A capability's state carried into a session's next run (``Capability.next_run_state``).

A counting capability says, in each tool result, how many calls the conversation has made.
Each run of a session starts it from the count the last committed run ended with: in one
process (SQLite and PostgreSQL), across real processes, after a pause resumed, at the CLI
(``tooldeck run --session``), in a web conversation and in durable runs. The model is the provider simulator
(fresh call ids, over loopback); a stored state someone broke is the session's SessionError.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunFinishedEvent

from _agui import of_type
from _stores import Store, execute
from test_capabilities import add, refund
from test_cli_doors import MODEL, chat, on, tooldeck
from test_cli_web import started, url_of
from test_session_protocol import MemorySession
from tooldeck import Agent, Approve, RunResult, ToolResult
from tooldeck.errors import RunStopped, SessionError
from tooldeck.messages import ToolCall
from tooldeck.run.capabilities import Capability
from tooldeck.run.events import RunRecovered
from tooldeck.sessions import History
from tooldeck.testing import ProviderSimulator, call, fail, reply
from tooldeck.tools.context import RunContext

COUNTING = textwrap.dedent(
    '''
    from tooldeck import ToolResult, tool
    from tooldeck.run.capabilities import Capability


    @tool
    def add(left: int, right: int) -> int:
        """Add two numbers."""
        return left + right


    class Counting(Capability):
        """Counts the conversation's tool calls, and says the count in each result."""

        def initial_state(self):
            return {"calls": 0}

        async def after_tool_call(self, call, result, ctx):
            state = self.state(ctx)
            state["calls"] += 1
            return ToolResult.success(f"{result.output} (call {state['calls']} so far)")


    __all__ = ["add"]
    capabilities = [Counting()]
    '''
)


class Counting(Capability):
    """Counts the conversation's tool calls, and says the count in each result."""

    def initial_state(self) -> dict[str, Any]:
        return {"calls": 0}

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
    ) -> ToolResult:
        state = self.state(ctx)
        state["calls"] += 1
        return ToolResult.success(f"{result.output} (call {state['calls']} so far)")


class PerRun(Counting):
    """The same count, started again by every run of the session."""

    def next_run_state(self, state: dict[str, Any]) -> dict[str, Any] | None:
        return None


def adding(runs: int) -> list[Any]:
    """The simulator's script: in each run, one call of ``add`` and an answer."""
    return [
        step for n in range(runs) for step in (call("add", {"left": n, "right": 1}), reply("ok"))
    ]


def read(sim: ProviderSimulator) -> list[str]:
    """What the model read of each call, in order: the last tool message of each request
    that answered one."""
    seen: list[str] = []
    for request in sim.requests:
        messages = request["messages"]
        if messages[-1]["role"] == "tool":
            seen.append(messages[-1]["content"])
    return seen


async def in_session(agent: Agent[Any, Any], store: Store, prompt: str) -> RunResult[Any]:
    session = store.session("chat")
    try:
        return await agent.run(prompt, session=session)
    finally:
        await session.aclose()


async def counted(sim: ProviderSimulator, store: Store, prompt: str) -> RunResult[Any]:
    """``prompt`` in the session, by a new agent with the counting capability."""
    return await in_session(Agent(sim.model(), [add], capabilities=[Counting()]), store, prompt)


async def test_each_run_of_a_session_counts_on_from_the_last(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    sim = provider(adding(3))
    results = []
    for n in range(3):  # a new agent and a new session object for each, as per request
        agent = Agent(sim.model(), [add], capabilities=[Counting()])
        results.append(await in_session(agent, store, f"add {n} and 1"))

    assert read(sim) == ["1 (call 1 so far)", "2 (call 2 so far)", "3 (call 3 so far)"]
    assert [r.capability_states for r in results] == [{"Counting": {"calls": n}} for n in (1, 2, 3)]


async def test_next_run_state_none_starts_each_run_from_initial_state(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    sim = provider(adding(2))
    for n in range(2):
        await in_session(Agent(sim.model(), [add], capabilities=[PerRun()]), store, f"{n}+1")

    assert read(sim) == ["1 (call 1 so far)", "2 (call 1 so far)"]


async def test_a_capability_not_in_the_last_run_starts_from_initial_state(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    sim = provider(adding(3))
    await counted(sim, store, "0+1")
    await in_session(Agent(sim.model(), [add]), store, "1+1")  # keeps no state: none kept
    await counted(sim, store, "2+1")

    assert read(sim) == ["1 (call 1 so far)", "2", "3 (call 1 so far)"]


async def test_a_paused_run_resumed_carries_the_state_it_ended_with(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    script = [
        call("add", {"left": 1, "right": 1}),
        call("refund", {"order": "A1"}),
        reply("Refunded."),
        call("add", {"left": 2, "right": 2}),
        reply("4"),
    ]
    sim = provider(script)

    def agent() -> Agent[Any, Any]:
        return Agent(sim.model(), [add, refund], capabilities=[Counting()])

    paused = await in_session(agent(), store, "add, then refund A1")
    (pending,) = paused.pending
    session = store.session("chat")
    resumed = await agent().resume(session=session, decisions={pending.id: Approve()})
    await session.aclose()
    assert resumed.capability_states == {"Counting": {"calls": 2}}
    await in_session(agent(), store, "2+2")

    assert read(sim) == ["2 (call 1 so far)", "refunded A1 (call 2 so far)", "4 (call 3 so far)"]


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from counting import Counting, add
    from tooldeck import Agent
    from tooldeck.sessions import PostgresSession, SQLiteSession

    kind, where, model = sys.argv[1:4]


    async def main():
        opened = SQLiteSession if kind == "sqlite" else PostgresSession
        async with opened(where, "chat") as session:
            agent = Agent(model, [add], capabilities=[Counting()])
            result = await agent.run("add", session=session)
        print(result.capability_states)


    asyncio.run(main())
    """
)


def test_the_count_carries_across_processes(
    store: Store, tmp_path: Path, provider: Callable[..., ProviderSimulator]
) -> None:
    (tmp_path / "counting.py").write_text(COUNTING, encoding="utf-8")
    (tmp_path / "child.py").write_text(CHILD, encoding="utf-8")
    sim = provider(adding(2), model="shop-model")
    env = {**os.environ, **sim.env}
    printed = []
    for _ in range(2):  # each run in a process of its own, started after the last ended
        command = [sys.executable, "child.py", *store.args(), MODEL]
        done = subprocess.check_output(command, cwd=tmp_path, env=env, text=True, timeout=120)
        printed.append(done.strip())

    assert printed == ["{'Counting': {'calls': 1}}", "{'Counting': {'calls': 2}}"]
    assert read(sim) == ["1 (call 1 so far)", "2 (call 2 so far)"]


def test_tooldeck_run_session_carries_a_modules_capability_state(
    tmp_path: Path, provider: Callable[..., ProviderSimulator]
) -> None:
    (tmp_path / "counting.py").write_text(COUNTING, encoding="utf-8")
    sim = provider(adding(3), model="shop-model")
    for prompt, session in (("add", "numbers"), ("add again", "numbers"), ("add", "other")):
        args = ("run", prompt, "-t", "counting.py", "--session", session, *on(sim))
        done = tooldeck(tmp_path, sim, *args)
        assert done.returncode == 0, done.stderr

    # the session "numbers" counts on; "other" is a conversation of its own
    assert read(sim) == ["1 (call 1 so far)", "2 (call 2 so far)", "3 (call 1 so far)"]


def test_a_web_conversation_carries_a_modules_capability_state(
    tmp_path: Path,
    provider: Callable[..., ProviderSimulator],
    sim_env: Callable[[ProviderSimulator], None],
) -> None:
    (tmp_path / "counting.py").write_text(COUNTING, encoding="utf-8")
    sim = provider(adding(2), model="shop-model")
    sim_env(sim)
    arguments = ["--tools", str(tmp_path / "counting.py"), *on(sim), "--port", "0"]
    with started(arguments, tmp_path / "home") as (_, printed):
        _, port, token = url_of(printed)
        for prompt in ("add", "add again"):  # two prompts of one conversation (thread t1)
            events = chat(f"http://127.0.0.1:{port}", token, prompt)
            assert of_type(events, RunFinishedEvent), events

    assert read(sim) == ["1 (call 1 so far)", "2 (call 2 so far)"]


@pytest.mark.usefixtures("launched_dbos")
async def test_durable_runs_of_a_session_count_on_from_the_last(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    from tooldeck.durable import DurableAgent

    sim = provider(adding(2))
    name = f"counting-{uuid.uuid4().hex[:8]}"
    agent = Agent(sim.model(), [add], capabilities=[Counting()])
    durable = DurableAgent(agent, name=name, sessions=store.session)
    first = await durable.run("0+1", session="chat")
    second = await durable.run("1+1", session="chat")

    assert read(sim) == ["1 (call 1 so far)", "2 (call 2 so far)"]
    assert (first.capability_states, second.capability_states) == (
        {"Counting": {"calls": 1}},
        {"Counting": {"calls": 2}},
    )


class KeepingStates(MemorySession):
    """test_session_protocol's in-memory store, keeping each stored run's states."""

    async def load(self) -> History:
        history = await super().load()
        runs = [run for kind, run in self.entries if kind == "turn" and run is not None]
        return replace(history, capability_states=runs[-1].capability_states if runs else None)


async def test_a_store_written_against_the_protocol_carries_the_states_it_keeps(
    provider: Callable[..., ProviderSimulator],
) -> None:
    sim = provider(adding(4))
    keeping, forgetting = KeepingStates("chat"), MemorySession("chat")
    for session in (keeping, keeping, forgetting, forgetting):
        await Agent(sim.model(), [add], capabilities=[Counting()]).run("add", session=session)

    assert read(sim) == [
        "1 (call 1 so far)",
        "2 (call 2 so far)",
        "3 (call 1 so far)",  # a store that keeps no states: each run from initial_state
        "4 (call 1 so far)",
    ]


async def test_a_run_closed_as_it_stood_carries_the_state_its_journal_recorded(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    script = [
        *adding(1),
        call("add", {"left": 1, "right": 1}),
        fail.status(400, message="refused"),  # the run stops after its call: it keeps its journal
        *adding(1),
    ]
    sim = provider(script)

    def agent() -> Agent[Any, Any]:
        return Agent(sim.model(), [add], capabilities=[Counting()])

    await in_session(agent(), store, "0+1")
    with pytest.raises(RunStopped):
        await in_session(agent(), store, "1+1")
    session = store.session("chat")
    events = [event async for event in agent().stream("0+1 again", session=session)]
    await session.aclose()

    assert [event.how for event in events if isinstance(event, RunRecovered)] == ["closed"]
    assert read(sim) == ["1 (call 1 so far)", "2 (call 2 so far)", "1 (call 3 so far)"]


async def test_a_broken_stored_state_is_the_sessions_error_naming_it(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    sim = provider(adding(1))
    await counted(sim, store, "0+1")
    execute(store, "UPDATE tooldeck_session_states SET body = ?", ('{"Counting": [1, 2]}',))

    session = store.session("chat")
    with pytest.raises(SessionError) as raised:
        await session.load()
    message = str(raised.value)
    assert message.startswith("the capability states kept with entry 1 of session 'chat' in ")
    assert "Counting: Input should be an object (each capability's state is a JSON" in message

    execute(store, "UPDATE tooldeck_session_states SET body = ?", ("not json",))
    with pytest.raises(SessionError, match="capability states kept with entry 1 of session"):
        await Agent(sim.model(), [add], capabilities=[Counting()]).run("1+1", session=session)


async def test_a_session_written_without_states_reads_as_none_kept(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    sim = provider(adding(2))
    await counted(sim, store, "0+1")
    execute(store, "DELETE FROM tooldeck_session_states")  # as an older tooldeck left it

    session = store.session("chat")
    assert (await session.load()).capability_states is None
    await counted(sim, store, "1+1")
    assert read(sim) == ["1 (call 1 so far)", "2 (call 1 so far)"]


async def test_a_database_of_an_older_tooldeck_gains_the_table_and_carries_from_then_on(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    sim = provider(adding(3))
    await in_session(Agent(sim.model(), [add]), store, "0+1")  # every session closed after
    execute(store, "DROP TABLE tooldeck_session_states")  # as a tooldeck before it left it

    for n in (1, 2):
        await counted(sim, store, f"{n}+1")
    assert read(sim) == ["1", "2 (call 1 so far)", "3 (call 2 so far)"]


async def test_a_cleared_session_starts_its_capabilities_again(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    sim, session = provider(adding(2)), store.session("chat")
    await counted(sim, store, "0+1")
    await session.clear()
    assert execute(store, "SELECT count(*) FROM tooldeck_session_states") == [(0,)]

    await counted(sim, store, "1+1")
    assert read(sim) == ["1 (call 1 so far)", "2 (call 1 so far)"]


async def test_a_state_that_is_not_json_is_refused_naming_the_capability(
    store: Store, provider: Callable[..., ProviderSimulator]
) -> None:
    class Remembering(Counting):
        async def on_answer(self, result: RunResult[Any], ctx: Any) -> RunResult[Any]:
            self.state(ctx)["seen"] = object()  # no JSON for it
            return result

    sim = provider(adding(1))
    agent = Agent(sim.model(), [add], capabilities=[Remembering()])
    with pytest.raises(TypeError) as raised:
        await in_session(agent, store, "0+1")

    assert str(raised.value).startswith(
        "the state of capability 'Remembering' cannot be stored as JSON"
    )
    session = store.session("chat")
    assert (await session.load()).messages == ()  # nothing stored
