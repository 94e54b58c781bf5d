"""Runs in a session, on SQLite and on a real PostgreSQL (the ``store`` fixture runs each
test on both): history carried between runs, turns committed whole, pauses stored and
resumed exactly once, conflicts refused, stopped runs committing nothing."""

from __future__ import annotations

import pytest

from _stores import Store
from helpers import answer, call, calls
from tooldeck import (
    Agent,
    Approve,
    FinalAnswer,
    Limits,
    Message,
    ModelError,
    Reject,
    ScriptedModel,
    tool,
)
from tooldeck.errors import CheckpointError, LimitExceeded, SessionConflict
from tooldeck.run.events import RunRecovered
from tooldeck.sessions import Session, StoredRun


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def roles(messages: tuple[Message, ...]) -> list[str]:
    return [message.role for message in messages]


async def test_a_run_continues_the_conversation_the_session_holds(store: Store) -> None:
    model = ScriptedModel(
        [calls(call("add_numbers", "c1", left=2, right=3)), answer("5"), answer("You asked 2+3")]
    )
    agent = Agent(model, [add_numbers])
    session = store.session()

    first = await agent.run("What is 2 + 3?", session=session)
    second = await agent.run("What did I ask?", session=session)

    assert second.answer == "You asked 2+3"
    assert [m.content for m in model.requests[2].messages] == [
        "What is 2 + 3?", "", "5", "5", "What did I ask?"
    ]  # fmt: skip
    history = await session.load()
    assert history.messages == second.messages
    assert history.messages[:4] == first.messages
    assert history.head == 2
    assert history.pending is None


async def test_sessions_with_other_ids_do_not_share_history(store: Store) -> None:
    model = ScriptedModel([answer("one"), answer("two")])
    agent = Agent(model)
    await agent.run("to alice", session=store.session("alice"))
    await agent.run("to bob", session=store.session("bob"))

    assert [m.content for m in model.requests[1].messages] == ["to bob"]
    alice = await store.session("alice").load()
    assert [m.content for m in alice.messages] == ["to alice", "one"]


async def test_stream_commits_the_turn_before_its_final_answer(store: Store) -> None:
    session = store.session()
    agent = Agent(ScriptedModel([answer("hi")]))
    stored_at_final_answer = None
    async for event in agent.stream("hello", session=session):
        if isinstance(event, FinalAnswer):
            stored_at_final_answer = (await session.load()).messages
    assert stored_at_final_answer == (Message.user("hello"), event.result.messages[-1])


async def test_a_stream_left_before_its_final_answer_commits_nothing(store: Store) -> None:
    session = store.session()
    agent = Agent(ScriptedModel([calls(call("add_numbers", left=1, right=1)), answer("2")]))
    events = agent.stream("1+1?", session=session)
    async for _event in events:
        break
    await events.aclose()
    assert (await session.load()).head == 0


async def test_a_run_stopped_by_a_limit_is_kept_and_the_next_run_closes_it(store: Store) -> None:
    session = store.session()
    await Agent(ScriptedModel([answer("first")])).run("one", session=session)
    endless = [calls(call("add_numbers", f"c{i}", left=i, right=1)) for i in range(3)]
    agent = Agent(ScriptedModel(endless), [add_numbers], limits=Limits(max_rounds=2))

    with pytest.raises(LimitExceeded) as stopped:
        await agent.run("loop", session=session, run_id="looping")

    assert len(stopped.value.result.tool_trace) == 2  # the partial run is on the error
    assert (
        "session 'chat' keeps this run as it stood: run it again with run_id='looping' to go "
        "on with it, or the session's next run closes it"
    ) in stopped.value.__notes__
    history = await session.load()
    assert [m.content for m in history.messages] == ["one", "first"]  # not committed
    assert history.head == 1

    model = ScriptedModel([answer("next")])
    events = [event async for event in Agent(model, [add_numbers]).stream("two", session=session)]
    recovered = events[0]
    assert isinstance(recovered, RunRecovered)
    assert (recovered.run_id, recovered.how, recovered.rounds) == ("looping", "closed", 2)
    assert recovered.settled == ()  # both rounds had finished: nothing to settle
    shown = [m.content for m in model.requests[0].messages]
    assert shown == ["one", "first", "loop", "", "1", "", "2", "two"]
    assert [m.content for m in (await session.load()).messages] == [*shown, "next"]


async def test_a_run_the_model_failed_commits_nothing(store: Store) -> None:
    session = store.session()
    with pytest.raises(ModelError):
        await Agent(ScriptedModel([])).run("hello", session=session)
    assert (await session.load()).head == 0


async def test_a_final_answer_at_a_limit_is_committed(store: Store) -> None:
    session = store.session()
    model = ScriptedModel(
        [calls(call("add_numbers", left=1, right=1)), answer("I ran out of turns")]
    )
    agent = Agent(model, [add_numbers], limits=Limits(max_rounds=1), on_limit="final_answer")
    result = await agent.run("add", session=session)
    assert result.stop_reason == "max_rounds"
    assert (await session.load()).messages == result.messages


async def test_a_paused_run_stores_its_checkpoint_not_half_a_turn(store: Store) -> None:
    session = store.session()
    agent = Agent(ScriptedModel([calls(call("delete_file", "d1", path="a.txt"))]), [delete_file])

    paused = await agent.run("delete a.txt", session=session)

    assert paused.stop_reason == "paused"
    history = await session.load()
    assert history.messages == ()
    assert history.pending == paused.checkpoint
    assert await session.pending() == paused.checkpoint


async def test_a_session_with_a_paused_run_refuses_a_new_run(store: Store) -> None:
    session = store.session()
    agent = Agent(ScriptedModel([calls(call("delete_file", "d1", path="a"))]), [delete_file])
    paused = await agent.run("delete a", session=session)

    with pytest.raises(SessionConflict) as refused:
        await agent.run("something else", session=session)

    assert str(refused.value) == (
        f"session 'chat' has a paused run ({paused.run_id!r}) waiting for decisions: resume it "
        "with agent.resume(session=..., decisions=...), or clear the session, before starting "
        "another run"
    )


async def test_resume_from_the_session_commits_the_whole_turn(store: Store) -> None:
    session = store.session()
    model = ScriptedModel(
        [answer("hello"), calls(call("delete_file", "d1", path="a.txt")), answer("Deleted.")]
    )
    agent = Agent(model, [delete_file])
    await agent.run("hi", session=session)
    await agent.run("delete a.txt", session=session)

    done = await agent.resume(session=session, decisions={"d1": Approve(by="ops")})

    assert done.answer == "Deleted."
    history = await session.load()
    assert history.messages == done.messages
    assert roles(history.messages) == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert history.messages[4].content == "deleted a.txt"
    assert history.pending is None


async def test_a_pause_is_resumed_exactly_once(store: Store) -> None:
    session = store.session()
    model = ScriptedModel([calls(call("delete_file", "d1", path="a")), answer("Done.")])
    agent = Agent(model, [delete_file])
    paused = await agent.run("delete a", session=session)
    await agent.resume(paused.checkpoint, {"d1": Approve()}, session=session)

    with pytest.raises(CheckpointError) as again:
        await agent.resume(paused.checkpoint, {"d1": Approve()}, session=session)

    assert str(again.value) == (
        f"session 'chat' holds no paused run to resume: run {paused.run_id!r} was resumed "
        "already (a checkpoint is resumed exactly once), or did not pause in this session, or "
        "the session was cleared"
    )
    assert len(model.requests) == 2


async def test_a_refused_resume_leaves_the_pause_in_the_session(store: Store) -> None:
    session = store.session()
    model = ScriptedModel([calls(call("delete_file", "d1", path="a")), answer("Kept.")])
    agent = Agent(model, [delete_file])
    await agent.run("delete a", session=session)

    with pytest.raises(CheckpointError, match="no pending call with id 'nope'"):
        await agent.resume(session=session, decisions={"nope": Approve()})

    assert await session.pending() is not None
    done = await agent.resume(session=session, decisions={"d1": Reject("keep it")})
    assert done.messages[-2].content == "error[rejected]: keep it"


async def test_resume_refuses_a_checkpoint_that_is_not_the_sessions(store: Store) -> None:
    agent = Agent(ScriptedModel([calls(call("delete_file", "d1", path="a"))] * 2), [delete_file])
    await agent.run("delete a", session=store.session("one"))
    elsewhere = await agent.run("delete a")  # paused, but not in this session

    with pytest.raises(CheckpointError) as refused:
        await agent.resume(elsewhere.checkpoint, {"d1": Approve()}, session=store.session("one"))

    assert "is not the paused run stored in session 'one'" in str(refused.value)


async def test_a_run_after_another_committed_gets_a_conflict_with_its_result(
    store: Store,
) -> None:
    first, second = store.session(), store.session()
    started = await first.load()
    await Agent(ScriptedModel([answer("first")])).run("one", session=second)

    late = StoredRun("late-run", messages=(Message.user("two"),))
    with pytest.raises(SessionConflict) as conflict:
        await first.append(late, after=started.head)

    assert str(conflict.value).startswith(
        "session 'chat' changed while this run ran: the run started after entry 0, but another "
        "run or resume stored entry 1 first."
    )
    assert [m.content for m in (await first.load()).messages] == ["one", "first"]


async def test_clear_forgets_the_history_and_a_pending_pause(store: Store) -> None:
    session = store.session()
    model = ScriptedModel([answer("a"), calls(call("delete_file", "d1", path="x")), answer("b")])
    agent = Agent(model, [delete_file])
    await agent.run("one", session=session)
    before_clear = await session.load()
    await agent.run("delete x", session=session)

    await session.clear()

    cleared = await session.load()
    assert cleared.messages == ()
    assert cleared.pending is None
    assert cleared.head == before_clear.head + 2  # numbering goes on: no entry number reused
    with pytest.raises(SessionConflict):
        await session.append(StoredRun("stale", (Message.user("x"),)), after=before_clear.head)
    assert (await agent.run("fresh start", session=session)).answer == "b"


async def test_history_and_session_together_are_refused(store: Store) -> None:
    agent = Agent(ScriptedModel([answer("x")]))
    with pytest.raises(ValueError, match="pass history= or session=, not both"):
        agent.stream("hi", history=[Message.user("earlier")], session=store.session())


def test_resume_without_a_checkpoint_or_a_session_says_what_it_needs() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(TypeError, match="needs the paused run's checkpoint, or session= holding"):
        agent.resume_stream(decisions={})


async def test_both_stores_implement_the_session_protocol(store: Store) -> None:
    assert isinstance(store.session(), Session)


async def test_a_resume_that_pauses_again_stores_the_new_pause(store: Store) -> None:
    session = store.session()
    both = calls(call("delete_file", "d1", path="a"), call("delete_file", "d2", path="b"))
    agent = Agent(ScriptedModel([both, answer("Both handled.")]), [delete_file])
    await agent.run("delete a and b", session=session)

    again = await agent.resume(session=session, decisions={"d1": Approve()})

    assert again.stop_reason == "paused"
    assert [p.call.id for p in again.pending] == ["d2"]
    assert await session.pending() == again.checkpoint
    done = await agent.resume(session=session, decisions={"d2": Reject("not b")})
    history = await session.load()
    assert history.messages == done.messages
    assert [m.content for m in history.messages if m.role == "tool"] == [
        "deleted a", "error[rejected]: not b"
    ]  # fmt: skip
