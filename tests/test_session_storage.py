"""How sessions are stored, on SQLite and PostgreSQL: the schema and its versions, the
migration from schema 0, messages as the contract's JSON, and the history repaired on load
so a provider never refuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _stores import Store, execute
from helpers import answer, call, calls
from tooldeck import Agent, AssistantOutput, Limits, Message, ScriptedModel, ToolCall, tool
from tooldeck.errors import SessionError
from tooldeck.run._engine.repair import repair
from tooldeck.sessions import StoredRun

INTERRUPTED = (
    "error[interrupted]: the result of this call was lost: the run stopped before it was "
    "answered and stored. Call the tool again if you still need its result."
)
V0_LAYOUT = (
    "CREATE TABLE tooldeck_session_messages (session_id TEXT NOT NULL, position INTEGER NOT NULL, "
    "run_id TEXT NOT NULL, message TEXT NOT NULL, PRIMARY KEY (session_id, position))"
)


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


def asks(*call_ids: str) -> Message:
    return Message.assistant(
        AssistantOutput(tool_calls=tuple(ToolCall(id=i, name="add_numbers") for i in call_ids))
    )


def test_a_well_formed_history_is_left_as_it_is() -> None:
    history = (Message.user("hi"), asks("a", "b"), Message.tool("b", "2"), Message.tool("a", "1"))
    assert repair(history) == history


def test_a_call_without_a_result_gets_an_interrupted_observation() -> None:
    history = (Message.user("hi"), asks("a", "b"), Message.tool("a", "1"), Message.user("next"))
    assert repair(history) == (
        Message.user("hi"), asks("a", "b"), Message.tool("a", "1"),
        Message.tool("b", INTERRUPTED), Message.user("next"),
    )  # fmt: skip


def test_a_history_ending_with_unanswered_calls_is_closed() -> None:
    assert repair((Message.user("hi"), asks("a"))) == (
        Message.user("hi"), asks("a"), Message.tool("a", INTERRUPTED)
    )  # fmt: skip


def test_orphan_and_duplicate_results_are_dropped() -> None:
    history = (
        Message.tool("x", "orphan before any call"),
        asks("a"), Message.tool("a", "1"), Message.tool("a", "1 again"),
        Message.user("u"), Message.tool("a", "late, after the user spoke"),
    )  # fmt: skip
    assert repair(history) == (asks("a"), Message.tool("a", "1"), Message.user("u"))


async def test_a_stored_turn_with_an_unanswered_call_is_repaired_before_the_model_reads_it(
    store: Store,
) -> None:
    session = store.session()
    # on_limit="final_answer": the last answer's calls are never run, so the turn ends open
    closing = AssistantOutput(
        content="out of turns", tool_calls=(ToolCall(id="z", name="add_numbers"),)
    )
    first = ScriptedModel([calls(call("add_numbers", "c1", left=1, right=1)), closing])
    agent = Agent(first, [add_numbers], limits=Limits(max_rounds=1), on_limit="final_answer")
    await agent.run("add", session=session)
    second = ScriptedModel([answer("ok")])

    await Agent(second, [add_numbers]).run("again", session=session)

    sent = second.requests[0].messages
    assert [(m.role, m.tool_call_id, m.content) for m in sent[-3:]] == [
        ("assistant", None, "out of turns"), ("tool", "z", INTERRUPTED), ("user", None, "again")
    ]  # fmt: skip
    stored = await session.load()
    assert [m.content for m in stored.messages].count(INTERRUPTED) == 0  # stored as it was


async def test_messages_are_stored_as_the_contracts_json(store: Store) -> None:
    session = store.session()
    result = await Agent(ScriptedModel([answer("hi")])).run("hello", session=session)
    (row,) = execute(store, "SELECT run_id, kind, schema_version, body FROM tooldeck_session_log")
    assert row[:3] == (result.run_id, "turn", 2)
    assert json.loads(row[3]) == [
        m.model_dump(mode="json", exclude_defaults=True) for m in result.messages
    ]
    assert json.loads(row[3])[0] == {"role": "user", "content": "hello"}


async def test_a_database_of_schema_0_is_migrated_when_opened(store: Store) -> None:
    said = [Message.user("hi"), Message.assistant(AssistantOutput(content="hello"))]
    rows = [
        ("alice", 1, "run-1", said[0]), ("alice", 2, "run-1", said[1]),
        ("alice", 3, "run-2", Message.user("bye")), ("bob", 1, "run-3", said[0]),
    ]  # fmt: skip
    execute(store, V0_LAYOUT)
    for session_id, position, run_id, message in rows:
        execute(
            store,
            "INSERT INTO tooldeck_session_messages VALUES (?, ?, ?, ?)",
            (session_id, position, run_id, message.model_dump_json()),
        )

    alice = await store.session("alice").load()

    assert alice.messages == (*said, Message.user("bye"))
    assert alice.head == 2
    migrated = execute(
        store, "SELECT session_id, seq, run_id, kind, schema_version FROM tooldeck_session_log "
        "ORDER BY session_id, seq",
    )  # fmt: skip
    assert migrated == [
        ("alice", 1, "run-1", "turn", 2), ("alice", 2, "run-2", "turn", 2),
        ("bob", 1, "run-3", "turn", 2),
    ]  # fmt: skip
    assert execute(store, "SELECT version FROM tooldeck_session_schema") == [(2,)]
    with pytest.raises(Exception, match="tooldeck_session_messages"):
        execute(store, "SELECT * FROM tooldeck_session_messages")


async def test_a_schema_0_row_that_does_not_parse_stops_the_migration(store: Store) -> None:
    execute(store, V0_LAYOUT)
    execute(store, "INSERT INTO tooldeck_session_messages VALUES ('s', 7, 'r', '{\"role\": 5}')")

    with pytest.raises(SessionError) as refused:
        await store.session("s").load()

    assert "from schema 0: the message at position 7 of session 's' cannot be read (role:" in str(
        refused.value
    )
    assert str(refused.value).endswith("; nothing was changed")
    assert execute(store, "SELECT count(*) FROM tooldeck_session_messages") == [(1,)]


async def test_a_database_from_a_newer_tooldeck_is_refused(store: Store) -> None:
    setup = store.session("setup")
    await setup.load()  # creates schema 2
    await setup.aclose()  # the schema is checked when a connection opens
    execute(store, "UPDATE tooldeck_session_schema SET version = 3")

    with pytest.raises(SessionError) as refused:
        await store.session("later").load()

    assert "holds sessions in schema version 3, newer than this tooldeck reads (2): it was " in (
        str(refused.value)
    )
    assert str(refused.value).endswith("Upgrade tooldeck to read it, or use another database.")


async def test_an_entry_written_by_a_newer_tooldeck_is_refused(store: Store) -> None:
    session = store.session()
    await session.append(StoredRun("r1", (Message.user("hi"),)), after=0)
    execute(store, "UPDATE tooldeck_session_log SET schema_version = 3")

    with pytest.raises(SessionError, match="schema version 3, newer than this tooldeck reads"):
        await session.load()


async def test_a_session_object_loads_what_others_wrote_and_cleared_since(store: Store) -> None:
    reader, writer = store.session(), store.session()
    await writer.append(StoredRun("r1", (Message.user("one"),)), after=0)
    assert [m.content for m in (await reader.load()).messages] == ["one"]
    await writer.append(StoredRun("r2", (Message.user("two"),)), after=1)
    assert [m.content for m in (await reader.load()).messages] == ["one", "two"]
    await writer.clear()
    assert (await reader.load()).messages == ()


async def test_a_log_rewritten_by_hand_is_read_again_in_full(store: Store) -> None:
    session = store.session()
    await session.append(StoredRun("r1", (Message.user("before"),)), after=0)
    await session.load()
    execute(store, "DELETE FROM tooldeck_session_log")
    execute(
        store,
        "INSERT INTO tooldeck_session_log VALUES ('chat', 1, 'r9', 'turn', ?, 1, 0)",
        (json.dumps([{"role": "user", "content": "edited"}]),),
    )
    execute(
        store,
        "INSERT INTO tooldeck_session_log VALUES ('chat', 2, 'r9', 'turn', ?, 1, 0)",
        (json.dumps([{"role": "user", "content": "added"}]),),
    )
    assert [m.content for m in (await session.load()).messages] == ["edited", "added"]


async def test_a_database_of_schema_1_gains_the_summary_table_when_opened(store: Store) -> None:
    setup = store.session("old")
    await setup.append(StoredRun("r1", (Message.user("kept"),)), after=0)
    await setup.aclose()
    execute(store, "DROP TABLE tooldeck_session_summary")  # as tooldeck's schema 1 was
    execute(store, "UPDATE tooldeck_session_log SET schema_version = 1")
    execute(store, "UPDATE tooldeck_session_schema SET version = 1")

    opened = await store.session("old").load()

    assert [m.content for m in opened.messages] == ["kept"]
    assert execute(store, "SELECT version FROM tooldeck_session_schema") == [(2,)]
    assert execute(store, "SELECT count(*) FROM tooldeck_session_summary") == [(0,)]


def _summarising_agent(summaries: list[str], questions: int) -> Agent[None]:
    """An agent that keeps one earlier turn and summarises the rest with ``summaries``."""
    from tooldeck.run.history import KeepLastExchanges, Summarize

    answers = [answer(f"answer {n}") for n in range(1, questions + 1)]
    summariser = ScriptedModel([answer(text) for text in summaries])
    return Agent(
        ScriptedModel(answers), history_strategy=Summarize(KeepLastExchanges(1), model=summariser)
    )


async def test_a_history_summary_is_stored_with_its_turn_and_not_asked_again(
    store: Store,
) -> None:
    first = _summarising_agent(["summary of 1"], 3)
    for n in (1, 2, 3):
        result = await first.run(f"question {n}", session=store.session())
    assert result.history_summary is not None
    assert result.history_summary.text == "summary of 1"

    # Another agent, as in a new process: a fresh Summarize with no memory of its own.
    later = _summarising_agent(["summary of 1 and 2"], 1)
    session = store.session()
    assert (await session.load()).summary == result.history_summary
    again = await later.run("question 4", session=session)

    summariser = later.history_strategy.model  # type: ignore[union-attr]
    (asked,) = summariser.requests  # only the new turn is summarised, on top of the stored
    assert "The summary so far:\nsummary of 1\n\nThe conversation:\nuser: question 2" in (
        asked.messages[0].content
    )
    sent = later.model.requests[0].messages  # type: ignore[attr-defined]
    assert sent[0].content.endswith("\nsummary of 1 and 2")
    assert (await store.session().load()).summary == again.history_summary


async def test_clearing_a_session_forgets_its_summary(store: Store) -> None:
    agent = _summarising_agent(["summary of 1"], 3)
    for n in (1, 2, 3):
        await agent.run(f"question {n}", session=store.session())
    session = store.session()
    assert (await session.load()).summary is not None
    await session.clear()
    assert (await store.session().load()).summary is None
    assert execute(store, "SELECT count(*) FROM tooldeck_session_summary") == [(0,)]


async def test_a_stored_summary_that_does_not_parse_is_a_session_error(store: Store) -> None:
    agent = _summarising_agent(["summary of 1"], 3)
    for n in (1, 2, 3):
        await agent.run(f"question {n}", session=store.session())
    execute(store, "UPDATE tooldeck_session_summary SET body = '{\"text\": 5}'")

    with pytest.raises(SessionError) as refused:
        await store.session().load()

    assert str(refused.value).startswith("the history summary stored in ")
    assert "cannot be read: text: Input should be a valid string" in str(refused.value)


class _Decodes:
    """Counts the turns each load decodes (wrapping the session log's decoder)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from tooldeck.sessions import _log

        self.counts: list[int] = []
        real = _log.decode_runs

        def counting(rows: Any, place: Any) -> Any:
            decoded = real(rows, place)
            self.counts.append(len(decoded))
            return decoded

        monkeypatch.setattr(_log, "decode_runs", counting)


async def _three_turns(store: Store, session_id: str) -> None:
    writer = store.session(session_id)
    for seq, text in enumerate(("one", "two", "three")):
        await writer.append(StoredRun(f"run-{text}", (Message.user(text),)), after=seq)
    await writer.aclose()


async def test_a_new_session_object_decodes_only_what_was_added_since(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    decodes = _Decodes(monkeypatch)
    await _three_turns(store, "chat")
    first = store.session("chat")
    assert [m.content for m in (await first.load()).messages] == ["one", "two", "three"]
    assert decodes.counts == []  # written by this process: nothing to decode

    other = store.session("chat")  # a request handler's own object, say
    await other.append(StoredRun("run-four", (Message.user("four"),)), after=3)
    execute(
        store,
        "INSERT INTO tooldeck_session_log VALUES ('chat', 5, 'run-five', 'turn', ?, 2, 0)",
        (json.dumps([{"role": "user", "content": "five"}]),),
    )  # another process's turn
    fresh = store.session("chat")
    assert [m.content for m in (await fresh.load()).messages][-2:] == ["four", "five"]
    assert decodes.counts == [1]  # only the other process's turn


async def test_the_process_keeps_the_latest_conversations_up_to_its_limit(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooldeck.sessions import stored_run_cache

    monkeypatch.setattr(stored_run_cache, "max_messages", 4)
    decodes = _Decodes(monkeypatch)
    await _three_turns(store, "a")
    await _three_turns(store, "b")  # 6 messages in all: "a" is let go
    assert decodes.counts == []

    assert len((await store.session("b").load()).messages) == 3
    assert decodes.counts == []
    assert len((await store.session("a").load()).messages) == 3
    assert decodes.counts == [3]  # decoded again, in full
    assert stored_run_cache.messages <= 4

    monkeypatch.setattr(stored_run_cache, "max_messages", 0)  # nothing kept between objects
    await store.session("b").load()
    assert len((await store.session("b").load()).messages) == 3
    assert decodes.counts == [3, 3, 3]


def _load_in_child(path: str, done: Any) -> None:
    import asyncio

    from tooldeck.sessions import SQLiteSession

    async def load() -> int:
        session = SQLiteSession(path, "forked")
        return len((await session.load()).messages)

    done.put(asyncio.run(load()))


def test_a_forked_child_loads_even_if_a_thread_held_the_cache_at_the_fork(
    tmp_path: Any,
) -> None:
    import asyncio
    import multiprocessing

    from tooldeck.sessions import SQLiteSession, stored_run_cache

    path = str(tmp_path / "forked.db")

    async def write() -> SQLiteSession:
        session = SQLiteSession(path, "forked")
        await session.append(StoredRun("r1", (Message.user("before the fork"),)), after=0)
        return session

    session = asyncio.run(write())
    cache = session._stored
    context = multiprocessing.get_context("fork")
    done = context.Queue()
    with cache.lock, stored_run_cache._lock:  # as a loading thread would hold them at the fork
        child = context.Process(target=_load_in_child, args=(path, done))
        child.start()
    child.join(timeout=30)
    if child.is_alive():
        child.kill()
        pytest.fail("the child hung on a lock held by a thread that is not in it")
    assert child.exitcode == 0
    assert done.get(timeout=5) == 1


async def test_clearing_the_process_cache_makes_the_next_load_decode_everything(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooldeck.sessions import stored_run_cache

    decodes = _Decodes(monkeypatch)
    await _three_turns(store, "chat")
    assert stored_run_cache.messages >= 3
    stored_run_cache.clear()
    assert stored_run_cache.messages == 0
    assert [m.content for m in (await store.session("chat").load()).messages] == [
        "one",
        "two",
        "three",
    ]
    assert decodes.counts == [3]
