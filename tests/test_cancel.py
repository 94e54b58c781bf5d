"""Cancellation: ``handle = agent.start(prompt)``; ``handle.cancel(reason=...)`` from any task
or thread ends the run with stop reason ``cancelled`` and a valid transcript."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from helpers import MAY_HAVE_RUN, answer, call, calls, tool_messages
from tooldeck import (
    Agent,
    AssistantOutput,
    ScriptedModel,
    ToolCallFinished,
    ToolCallStarted,
    tool,
)
from tooldeck.errors import LimitExceeded
from tooldeck.messages import Message, ToolSpec
from tooldeck.models import Model, ModelSettings
from tooldeck.results import Approve
from tooldeck.run.policy import Limits
from tooldeck.run.session import History, StoredRun
from tooldeck.runlog import RunLog
from tooldeck.sessions import SQLiteSession
from tooldeck.tools.context import RunContext


@tool
async def slow_search(query: str) -> str:
    """Search slowly."""
    await asyncio.sleep(60)
    return "never"


@tool
async def quick_lookup(key: str) -> str:
    """Look up at once."""
    return f"value of {key}"


class Waiting(Model):
    """A model whose request never ends until it is cancelled."""

    name = "waiting"

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.closed = False

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        self.asked.set()
        try:
            await asyncio.sleep(60)
        finally:
            self.closed = True
        return AssistantOutput(content="never")


async def test_cancelling_a_run_answers_every_unfinished_call() -> None:
    model = ScriptedModel(
        [calls(call("quick_lookup", "c1", key="a"), call("slow_search", "c2", query="b"))]
    )
    handle = Agent(model, [quick_lookup, slow_search]).start("Find b")
    seen: set[str] = set()
    after_cancel: list[str] = []
    async for event in handle:
        if isinstance(event, ToolCallStarted):
            seen.add(f"started {event.call.id}")
        elif isinstance(event, ToolCallFinished):
            seen.add(f"finished {event.trace.call.id}")
            if handle.cancelled:
                after_cancel.append(f"{event.trace.call.id}: {event.trace.result.output}")
        if {"started c2", "finished c1"} <= seen and not handle.cancelled:
            handle.cancel(reason="the user pressed stop")

    result = await asyncio.wait_for(handle.result(), timeout=30)
    assert after_cancel == [  # every stream reader sees the unfinished call end
        "c2: error[cancelled]: the run was cancelled (the user pressed stop) before this "
        "call finished" + MAY_HAVE_RUN
    ]

    assert result.stop_reason == "cancelled"
    assert tool_messages(result.messages) == [
        "value of a",
        "error[cancelled]: the run was cancelled (the user pressed stop) before this call finished"
        + MAY_HAVE_RUN,
    ]
    assert [trace.call.id for trace in result.tool_trace] == ["c1", "c2"]
    assert handle.cancelled


async def test_a_run_is_cancelled_from_another_thread_in_its_model_request() -> None:
    model = Waiting()
    handle = Agent(model).start("Hello")
    await asyncio.wait_for(model.asked.wait(), timeout=30)

    canceller = threading.Thread(target=handle.cancel)
    canceller.start()
    result = await asyncio.wait_for(handle, timeout=30)
    canceller.join()

    assert (result.stop_reason, model.closed) == ("cancelled", True)
    assert [m.role for m in result.messages] == ["user"]


async def test_a_sync_tool_sees_ctx_cancelled() -> None:
    noticed = threading.Event()

    @tool
    def crunch(ctx: RunContext[None], rows: int) -> str:
        """Crunch rows, stopping when the run is cancelled."""
        assert ctx.cancelled is not None
        for _ in range(rows):
            if ctx.cancelled.is_set():
                noticed.set()
                return "stopped early"
            time.sleep(0.01)
        return "all done"

    handle = Agent(ScriptedModel([calls(call("crunch", rows=100_000))]), [crunch]).start("Go")
    async for event in handle:
        if isinstance(event, ToolCallStarted):
            handle.cancel()
    result = await asyncio.wait_for(handle.result(), timeout=30)

    assert result.stop_reason == "cancelled"
    assert await asyncio.to_thread(noticed.wait, 30)


async def test_a_cancelled_run_commits_to_its_session_and_the_next_run_goes_on(
    tmp_path: Path,
) -> None:
    session = SQLiteSession(tmp_path / "chat.db", "s1")
    agent = Agent(ScriptedModel([calls(call("slow_search", query="x"))]), [slow_search])
    handle = agent.start("Search x", session=session)
    async for event in handle:
        if isinstance(event, ToolCallStarted):
            handle.cancel(reason="timeout of the web request")
    assert (await handle).stop_reason == "cancelled"
    stored = (await session.load()).messages
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert stored[2].content == (
        "error[cancelled]: the run was cancelled (timeout of the web request) before this "
        "call finished" + MAY_HAVE_RUN
    )

    again = ScriptedModel([answer("Here is what I know.")])
    result = await Agent(again, [slow_search]).run("And now?", session=session)

    sent = again.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2].content.startswith("error[cancelled]: the run was cancelled (timeout")
    assert result.answer == "Here is what I know."
    await session.aclose()


async def test_a_run_cancelled_without_commit_leaves_its_session_as_it_was(
    tmp_path: Path,
) -> None:
    session = SQLiteSession(tmp_path / "chat.db", "s1")
    await Agent(ScriptedModel([answer("Noted: 2 euros.")])).run("Budget 2", session=session)
    before = await session.load()
    agent = Agent(ScriptedModel([calls(call("slow_search", query="x"))]), [slow_search])
    handle = agent.start("Search x", session=session)
    async for event in handle:
        if isinstance(event, ToolCallStarted):
            handle.cancel(reason="the user took it back", commit=False)
            handle.cancel(reason="a second cancel changes nothing")  # commit=True, too late
    result = await asyncio.wait_for(handle.result(), timeout=30)

    assert result.stop_reason == "cancelled"
    assert tool_messages(result.messages) == [
        "error[cancelled]: the run was cancelled (the user took it back) before this call finished"
        + MAY_HAVE_RUN
    ]
    after = await session.load()
    assert (after.messages, after.head) == (before.messages, before.head)
    again = ScriptedModel([answer("Still 2 euros.")])
    await Agent(again).run("My budget?", session=session)
    assert [m.content for m in again.requests[0].messages] == [
        "Budget 2",
        "Noted: 2 euros.",
        "My budget?",
    ]
    await session.aclose()


async def test_a_cancel_once_the_run_answered_leaves_it_answered_and_committed(
    tmp_path: Path,
) -> None:
    committing = asyncio.Event()
    release = asyncio.Event()

    class SlowToCommit(SQLiteSession):
        async def append(self, turn: StoredRun, *, after: int) -> int:
            committing.set()
            await release.wait()
            return await super().append(turn, after=after)

    session = SlowToCommit(tmp_path / "chat.db", "s1")
    handle = Agent(ScriptedModel([answer("Done.")])).start("Go", session=session)
    await asyncio.wait_for(committing.wait(), timeout=30)
    handle.cancel(reason="too late")
    await asyncio.sleep(0)  # the cancel reaches the loop while the session commits
    release.set()
    result = await asyncio.wait_for(handle.result(), timeout=30)

    assert (result.stop_reason, result.answer) == ("answer", "Done.")
    assert [m.content for m in (await session.load()).messages] == ["Go", "Done."]
    await session.aclose()


async def test_a_handle_gives_a_plain_runs_result_and_raises_what_it_raised() -> None:
    assert (await Agent(ScriptedModel([answer("Hi!")])).start("Hello")).answer == "Hi!"
    looping = ScriptedModel([calls(call("quick_lookup", f"c{n}", key="k")) for n in range(3)])
    handle = Agent(looping, [quick_lookup], limits=Limits(max_rounds=1)).start("Loop")
    with pytest.raises(LimitExceeded):
        await handle


@tool(requires_approval=True)
async def slow_delete(path: str) -> str:
    """Delete a file, slowly."""
    await asyncio.sleep(60)
    return f"deleted {path}"


async def test_a_resumed_run_started_with_a_handle_is_cancelled_and_committed(
    tmp_path: Path,
) -> None:
    session = SQLiteSession(tmp_path / "chat.db", "s1")
    agent = Agent(ScriptedModel([calls(call("slow_delete", path="a.txt"))]), [slow_delete])
    paused = await agent.run("Delete a.txt", session=session)
    assert paused.stop_reason == "paused"

    handle = agent.start_resume(session=session, decisions={"c1": Approve()})
    async for event in handle:
        if isinstance(event, ToolCallStarted):
            handle.cancel(reason="the user pressed stop")
    result = await asyncio.wait_for(handle.result(), timeout=30)

    assert result.stop_reason == "cancelled"
    stored = await session.load()
    assert stored.pending is None
    assert [(m.role, m.content) for m in stored.messages] == [
        ("user", "Delete a.txt"),
        ("assistant", ""),
        (
            "tool",
            "error[cancelled]: the run was cancelled (the user pressed stop) before this call "
            "finished" + MAY_HAVE_RUN,
        ),
    ]
    await session.aclose()


async def test_the_run_log_keeps_a_cancelled_runs_unfinished_call(tmp_path: Path) -> None:
    with RunLog(tmp_path / "runs.db") as log:
        model = ScriptedModel([calls(call("slow_search", query="x"))])
        handle = Agent(model, [slow_search], run_log=log).start("Search x")
        async for event in handle:
            if isinstance(event, ToolCallStarted):
                handle.cancel(reason="closing time")
        result = await asyncio.wait_for(handle.result(), timeout=30)
        log.flush()
        logged = log.run(result.run_id)

    assert logged.stop_reason == "cancelled"
    assert [(c.name, c.error_code, c.result) for c in logged.calls] == [
        (
            "slow_search",
            "cancelled",
            "error[cancelled]: the run was cancelled (closing time) before this call finished"
            + MAY_HAVE_RUN,
        )
    ]


async def test_a_call_id_used_again_in_a_later_round_is_still_answered_cancelled() -> None:
    model = ScriptedModel(
        [calls(call("quick_lookup", "c1", key="a")), calls(call("slow_search", "c1", query="b"))]
    )
    handle = Agent(model, [quick_lookup, slow_search]).start("Find")
    async for event in handle:
        if isinstance(event, ToolCallStarted) and event.call.name == "slow_search":
            handle.cancel(reason="stop")
    result = await asyncio.wait_for(handle.result(), timeout=30)

    assert tool_messages(result.messages) == [
        "value of a",
        "error[cancelled]: the run was cancelled (stop) before this call finished" + MAY_HAVE_RUN,
    ]


async def test_a_run_cancelled_while_its_session_loads_ends_cancelled_as_it_starts(
    tmp_path: Path,
) -> None:
    loading = asyncio.Event()
    release = asyncio.Event()

    class SlowToLoad(SQLiteSession):
        async def load(self) -> History:
            loading.set()
            await release.wait()
            return await super().load()

    session = SlowToLoad(tmp_path / "chat.db", "s1")
    model = ScriptedModel([answer("never asked")])
    handle = Agent(model).start("Hello", session=session)
    await asyncio.wait_for(loading.wait(), timeout=30)
    handle.cancel(reason="changed my mind")
    await asyncio.sleep(0)
    release.set()
    result = await asyncio.wait_for(handle.result(), timeout=30)

    assert result.stop_reason == "cancelled"
    assert [m.content for m in result.messages] == ["Hello"]
    assert model.requests == []
    assert [m.content for m in (await session.load()).messages] == ["Hello"]
    await session.aclose()
