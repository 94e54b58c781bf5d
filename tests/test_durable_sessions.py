"""Durable runs in a session (SQLite and PostgreSQL): the history read once as a step, the
turn committed as a step when the run ends, a replay that neither rereads nor commits twice,
and every refusal's message."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from _stores import Store
from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, Approve, Message, ScriptedModel, tool
from tooldeck.durable import DurableAgent
from tooldeck.errors import SessionConflict, SessionError
from tooldeck.sessions import SQLiteSession, StoredRun
from tooldeck.tools.registry import ToolsLike

pytestmark = pytest.mark.usefixtures("launched_dbos")


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money (a person approves it first)."""
    return f"moved {amount}"


def durable(store: Store, model: ScriptedModel, tools: ToolsLike = ()) -> DurableAgent[Any, Any]:
    name = f"sessions-{uuid.uuid4().hex[:8]}"
    return DurableAgent(Agent(model, tools), name=name, sessions=store.session)


async def steps(run_id: str) -> list[str]:
    return [step["function_name"] for step in await DBOS.list_workflow_steps_async(run_id)]


async def test_durable_runs_continue_a_session_and_commit_each_turn(store: Store) -> None:
    model = ScriptedModel(
        [calls(call("add_numbers", "c1", left=2, right=3)), answer("5"), answer("Still 5.")]
    )
    agent = durable(store, model, [add_numbers])
    first = await agent.run("What is 2 + 3?", session="chat")
    second = await agent.run("And again?", session="chat")

    assert (first.answer, second.answer) == ("5", "Still 5.")
    assert model.requests[2].messages[:4] == first.messages  # the second run saw the first
    history = await store.session("chat").load()
    assert history.messages == second.messages
    assert [m.content for m in history.messages if m.role == "user"] == [
        "What is 2 + 3?",
        "And again?",
    ]
    name = agent.name
    assert await steps(second.run_id) == [
        f"{name}.session.load",
        f"{name}.model",
        f"{name}.session.commit",
    ]


async def test_a_paused_durable_run_commits_its_turn_when_it_ends(store: Store) -> None:
    model = ScriptedModel([calls(call("transfer", "t1", amount=5)), answer("Paid.")])
    agent = durable(store, model, [transfer])
    paused = await agent.run("Pay 5.", session="bills")
    assert paused.stop_reason == "paused"
    assert (await store.session("bills").load()).head == 0  # the workflow holds the pause

    done = await agent.resume(paused.run_id, {"t1": Approve(by="ana")})
    assert done.answer == "Paid."
    history = await store.session("bills").load()
    assert history.messages == done.messages
    assert tool_messages(history.messages) == ["moved 5"]


async def test_a_replay_starts_from_the_history_it_read_and_commits_once(store: Store) -> None:
    model = ScriptedModel([answer("one"), answer("two"), answer("two")])
    agent = durable(store, model)
    await agent.run("First.", session="chat")
    second = await agent.run("Second.", session="chat")
    other = store.session("chat")
    await other.append(StoredRun("elsewhere", (Message.user("x"), Message.user("y"))), after=2)

    # Executed again from its model request, as a recovery would: the recorded history is
    # read back (not the session's third turn), and the turn it finds already committed
    # (as if the process had died right after writing it) is not written again.
    recorded = await DBOS.list_workflow_steps_async(second.run_id)
    model_step = next(s["function_id"] for s in recorded if s["function_name"].endswith(".model"))
    replayed = await (await DBOS.fork_workflow_async(second.run_id, model_step)).get_result()

    assert replayed.messages == second.messages
    assert model.requests[2].messages == model.requests[1].messages
    history = await store.session("chat").load()
    assert history.head == 3
    assert [m.content for m in history.messages] == ["First.", "one", "Second.", "two", "x", "y"]


async def test_a_run_that_finds_the_session_changed_raises_session_conflict(store: Store) -> None:
    model = ScriptedModel([calls(call("transfer", "t1", amount=5)), answer("Paid.")])
    agent = durable(store, model, [transfer])
    paused = await agent.run("Pay 5.", session="bills")
    plain = Agent(ScriptedModel([answer("meanwhile")]))
    await plain.run("Anything new?", session=store.session("bills"))

    with pytest.raises(SessionConflict) as conflict:
        await agent.resume(paused.run_id, {"t1": Approve()})
    assert str(conflict.value).startswith(
        "session 'bills' changed while this run ran: the run started after entry 0, but "
        "another run or resume stored entry 1 first."
    )
    history = await store.session("bills").load()
    assert [m.content for m in history.messages] == ["Anything new?", "meanwhile"]


async def test_a_session_with_a_paused_plain_run_refuses_a_durable_run(store: Store) -> None:
    session = store.session("waiting")
    plain = Agent(ScriptedModel([calls(call("transfer", "t1", amount=5))]), [transfer])
    paused = await plain.run("Pay 5.", session=session)
    agent = durable(store, ScriptedModel([answer("never")]))
    with pytest.raises(SessionConflict) as refused:
        await agent.run("Hello?", session="waiting")
    assert str(refused.value).startswith(
        f"session 'waiting' has a paused run ({paused.run_id!r}) waiting for decisions"
    )


async def test_a_session_is_named_by_id_and_opened_where_the_run_executes(store: Store) -> None:
    agent = durable(store, ScriptedModel([answer("never")]))
    with pytest.raises(
        TypeError, match=r"takes its session by id .* got SQLiteSession|got Postgres"
    ):
        await agent.run("Hi.", session=store.session("chat"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"pass history= or session=, not both"):
        await agent.run("Hi.", session="chat", history=[Message.user("earlier")])

    without = DurableAgent(
        Agent(ScriptedModel([answer("never")])), name=f"nos-{uuid.uuid4().hex[:8]}"
    )
    with pytest.raises(LookupError) as lookup:
        await without.run("Hi.", session="chat")
    assert str(lookup.value).startswith(
        f"the run keeps session 'chat', but DurableAgent {without.name!r} opens no sessions in "
        "this process"
    )


async def test_a_durable_run_stores_its_history_summary_and_the_next_agent_extends_it(
    store: Store,
) -> None:
    from tooldeck.run.history import KeepLastExchanges, Summarize

    def agent_with(summaries: list[str], questions: int) -> DurableAgent[Any, Any]:
        model = ScriptedModel([answer(f"answer {n}") for n in range(questions)])
        summariser = ScriptedModel([answer(text) for text in summaries])
        strategy = Summarize(KeepLastExchanges(1), model=summariser)
        name = f"summaries-{uuid.uuid4().hex[:8]}"
        return DurableAgent(
            Agent(model, history_strategy=strategy), name=name, sessions=store.session
        )

    first = agent_with(["summary of 1"], 3)
    for n in (1, 2, 3):
        result = await first.run(f"question {n}", session="chat")
    assert (await store.session("chat").load()).summary == result.history_summary

    later = agent_with(["summary of 1 and 2"], 1)
    again = await later.run("question 4", session="chat")
    (asked,) = later.agent.history_strategy.model.requests  # type: ignore[union-attr]
    assert "The summary so far:\nsummary of 1\n\n" in asked.messages[0].content
    assert (await store.session("chat").load()).summary == again.history_summary


async def test_a_session_that_cannot_be_opened_fails_the_run_saying_which(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "sessions.db"
    missing.mkdir()  # a folder where the file should be: SQLite cannot open it
    model = ScriptedModel([answer("never")])
    agent = DurableAgent(
        Agent(model),
        name=f"unopened-{uuid.uuid4().hex[:8]}",
        sessions=lambda session_id: SQLiteSession(missing, session_id),
    )
    with pytest.raises(SessionError) as failed:
        await agent.run("Hello?", session="chat")
    assert str(failed.value) == (
        f"SQLite database {str(missing)!r}: OperationalError: unable to open database file"
    )
    assert model.requests == []  # the model is not asked without the conversation
