"""At-most-once side effects in one process: the options, the idempotency key, the record a
session keeps, and what the model reads when a call is settled from it (the SIGKILL tests
are in test_side_effects_processes.py and test_durable_side_effects.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _stores import Store, execute
from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, Approve, RunContext, ScriptedModel, ToolResult, tool
from tooldeck.errors import SessionError, ToolDefinitionError
from tooldeck.run.events import FinalAnswer, RunRecovered
from tooldeck.sessions import SQLiteSession

KEY = "order-1:1:0"


def charging_agent(charged: list[str], **options: Any) -> Agent[None, str]:
    @tool(side_effects=True, **options)
    def charge(ctx: RunContext[None], amount: int) -> str:
        """Charge the customer."""
        charged.append(ctx.idempotency_key)
        return f"charged {amount}"

    model = ScriptedModel([calls(call("charge", "c1", amount=5)), answer("done")])
    return Agent(model, tools=[charge])


def test_reconcile_needs_side_effects() -> None:
    with pytest.raises(ToolDefinitionError, match="reconcile= is only used by a tool with"):

        @tool(reconcile=lambda ctx: None)
        def send() -> str:
            """Send."""
            return "sent"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"side_effects": "yes"}, "side_effects must be True or False, got 'yes'"),
        ({"side_effects": True, "reconcile": 3}, "reconcile must be a function"),
    ],
)
def test_bad_side_effect_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message):

        @tool(**options)
        def send() -> str:
            """Send."""
            return "sent"


async def test_the_idempotency_key_is_the_same_after_a_pause(store: Store) -> None:
    keys: list[str] = []

    def ask_first(ctx: RunContext[None], arguments: dict[str, Any]) -> bool:
        keys.append(f"asked {ctx.idempotency_key}")
        return True

    @tool(side_effects=True, requires_approval=ask_first)
    def pay(ctx: RunContext[None]) -> str:
        """Pay."""
        keys.append(ctx.idempotency_key)
        return "paid"

    @tool
    def look(ctx: RunContext[None]) -> str:
        """Look."""
        keys.append(ctx.idempotency_key)
        return "seen"

    turns = [calls(call("look", "c1")), calls(call("pay", "c1")), answer("done")]
    agent = Agent(ScriptedModel(turns), tools=[pay, look])
    paused = await agent.run("pay", session=store.session(), run_id="r")
    assert paused.pending
    assert keys == ["r:1:0", "asked r:2:0"]

    result = await agent.resume(session=store.session(), decisions={"c1": Approve()})

    assert result.output == "done"
    # the paused call's key is the one it had before the pause; the same call id in another
    # round is another call
    assert keys == ["r:1:0", "asked r:2:0", "r:2:0"]
    rows = execute(store, "SELECT call_key, result FROM tooldeck_session_calls")
    assert [(key, ToolResult.model_validate_json(text).output) for key, text in rows] == [
        ("r:2:0", "paid")
    ]


async def test_a_side_effect_agent_tool_that_paused_goes_on_when_resumed(store: Store) -> None:
    done: list[str] = []

    @tool(requires_approval=True)
    def send() -> str:
        """Send."""
        done.append("sent")
        return "sent"

    inner_turns = [calls(call("send", "i1")), answer("inner done")]
    inner = Agent(ScriptedModel(inner_turns), tools=[send])
    helper = inner.as_tool(name="helper", description="Sends.", side_effects=True)
    outer = Agent(
        ScriptedModel([calls(call("helper", "c1", input="go")), answer("done")]), [helper]
    )
    paused = await outer.run("go", session=store.session(), run_id="r")
    assert [p.id for p in paused.pending] == ["c1/i1"]

    result = await outer.resume(session=store.session(), decisions={"c1/i1": Approve()})

    assert result.output == "done"
    assert done == ["sent"]  # the paused call went on (it is not settled as interrupted)
    assert tool_messages(result.messages) == ["inner done"]


async def test_a_run_again_answers_from_the_record(store: Store) -> None:
    charged: list[str] = []
    first = await charging_agent(charged).run("charge", session=store.session(), run_id="order-1")
    await store.session().clear()  # the run again, as after a crash before its commit

    again = await charging_agent(charged).run("charge", session=store.session(), run_id="order-1")

    assert charged == [KEY]
    assert tool_messages(first.messages) == tool_messages(again.messages) == ["charged 5"]


async def test_a_run_submitted_again_after_its_commit_is_recognised(store: Store) -> None:
    charged: list[str] = []
    first = await charging_agent(charged).run("charge", session=store.session(), run_id="order-1")

    agent = charging_agent(charged)
    stream = agent.stream("charge", session=store.session(), run_id="order-1")
    events = [event async for event in stream]

    assert charged == [KEY]
    assert [type(event) for event in events] == [RunRecovered, FinalAnswer]
    recovered, final = events
    assert isinstance(recovered, RunRecovered)
    assert isinstance(final, FinalAnswer)
    assert (recovered.run_id, recovered.how, recovered.rounds) == ("order-1", "stored", 2)
    assert final.result.answer == "done"
    assert final.result.messages == first.messages
    assert final.result.usage.requests == 0  # nothing was asked
    history = await store.session().load()
    assert history.messages == first.messages  # stored once
    assert [run_id for run_id, _ in history.stored_runs] == ["order-1"]


async def test_without_side_effects_nothing_is_recorded(tmp_path: Any) -> None:
    @tool
    def look() -> str:
        """Look."""
        return "seen"

    path = tmp_path / "s.db"
    model = ScriptedModel([calls(call("look")), answer("done")])
    await Agent(model, tools=[look]).run("look", session=SQLiteSession(path, "s"))

    tables = execute(Store("sqlite", str(path)), "SELECT name FROM sqlite_master")
    assert ("tooldeck_session_calls",) not in tables


async def test_without_a_session_a_side_effect_call_just_runs() -> None:
    charged: list[str] = []
    result = await charging_agent(charged).run("charge", run_id="order-1")

    assert charged == [KEY]
    assert tool_messages(result.messages) == ["charged 5"]


def failing_reconcile(ctx: RunContext[None]) -> ToolResult | None:
    raise RuntimeError("the bank is down")


def odd_reconcile(ctx: RunContext[None]) -> Any:
    return "yes"


async def async_reconcile(ctx: RunContext[None]) -> ToolResult | None:
    await asyncio.sleep(0)
    return ToolResult.success(f"found {ctx.idempotency_key}")


@pytest.mark.parametrize(
    ("reconcile", "read"),
    [
        (None, "error[interrupted]: the call may have completed: it started before"),
        (failing_reconcile, "Its reconcile function failed: RuntimeError: the bank is down"),
        (odd_reconcile, "Its reconcile function returned 'yes', not a ToolResult or None"),
        (async_reconcile, f"found {KEY}"),
    ],
)
async def test_a_call_that_never_reported_is_settled_not_run(
    store: Store, reconcile: Any, read: str
) -> None:
    session = store.session()
    assert await session.start_call(KEY, "charge") is None  # as a process that died did
    charged: list[str] = []
    options = {} if reconcile is None else {"reconcile": reconcile}

    result = await charging_agent(charged, **options).run(
        "charge", session=session, run_id="order-1"
    )

    assert charged == []
    assert read in tool_messages(result.messages)[0]
    recorded = await session.start_call(KEY, "charge")  # the settling is recorded too
    assert recorded is not None
    assert recorded.result is not None
    assert read in recorded.result.output


async def test_two_starts_of_one_call_one_runs_it(store: Store) -> None:
    first, second = store.session(), store.session()
    starts = await asyncio.gather(first.start_call(KEY, "charge"), second.start_call(KEY, "charge"))

    assert starts.count(None) == 1
    assert [s.result for s in starts if s is not None] == [None]


async def test_a_broken_record_is_named(store: Store) -> None:
    session = store.session()
    await session.start_call(KEY, "charge")
    execute(store, "UPDATE tooldeck_session_calls SET result = ?", ("{not json",))

    with pytest.raises(SessionError, match=r"recorded result of call 'order-1:1:0' in .*"):
        await charging_agent([]).run("charge", session=session, run_id="order-1")


async def test_a_call_whose_start_cannot_be_recorded_does_not_run(tmp_path: Any) -> None:
    path = tmp_path / "s.db"
    store = Store("sqlite", str(path))
    session = SQLiteSession(path, "s")
    await session.start_call("other", "charge")  # the table exists; now its writes fail
    execute(
        store,
        "CREATE TRIGGER full BEFORE INSERT ON tooldeck_session_calls "
        "BEGIN SELECT RAISE(ABORT, 'the disk is full'); END",
    )
    charged: list[str] = []

    with pytest.raises(SessionError, match="the disk is full"):
        await charging_agent(charged).run("charge", session=session, run_id="order-1")

    assert charged == []  # fail closed: a call that cannot be recorded is not made
    assert (await session.load()).head == 0
