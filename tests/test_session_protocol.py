"""The Session protocol is enough for another store: a small in-memory one, written here as
a user would, gets tooldeck's whole behaviour (history, pauses claimed once, conflicts)."""

from __future__ import annotations

import asyncio

import pytest

from helpers import answer, call, calls
from tooldeck import Agent, Approve, Checkpoint, ScriptedModel, tool
from tooldeck.errors import CheckpointError, SessionConflict
from tooldeck.sessions import History, Session, StoredRun


class MemorySession:
    """Entries in a list; one lock makes each append a compare-and-append."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.entries: list[tuple[str, StoredRun | None]] = []  # (kind, turn)
        self._lock = asyncio.Lock()

    async def load(self) -> History:
        messages = tuple(
            m for kind, turn in self.entries if kind == "turn" and turn for m in turn.messages
        )
        return History(messages, len(self.entries), await self.pending())

    async def append(self, turn: StoredRun, *, after: int) -> int:
        async with self._lock:
            if after != len(self.entries):
                raise SessionConflict(f"session {self.session_id!r} moved past entry {after}")
            self.entries.append(("paused" if turn.checkpoint else "turn", turn))
            return len(self.entries)

    async def pending(self) -> Checkpoint | None:
        if self.entries and self.entries[-1][0] == "paused":
            last = self.entries[-1][1]
            return last.checkpoint if last else None
        return None

    async def consume(self, run_id: str, *, after: int) -> int:
        async with self._lock:
            paused = await self.pending()
            if after != len(self.entries) or paused is None or paused.run_id != run_id:
                raise CheckpointError(f"run {run_id!r} was resumed already")
            self.entries.append(("resumed", None))
            return len(self.entries)

    async def clear(self) -> None:
        self.entries.clear()

    async def aclose(self) -> None:
        pass


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def test_a_store_written_against_the_protocol_gets_the_whole_behaviour() -> None:
    session = MemorySession("chat")
    assert isinstance(session, Session)
    model = ScriptedModel(
        [answer("hi"), calls(call("delete_file", "d1", path="a")), answer("Done.")]
    )
    agent = Agent(model, [delete_file])

    await agent.run("hello", session=session)
    await agent.run("delete a", session=session)
    with pytest.raises(SessionConflict, match="has a paused run"):
        await agent.run("meanwhile", session=session)
    done = await agent.resume(session=session, decisions={"d1": Approve()})
    with pytest.raises(CheckpointError, match="holds no paused run to resume"):
        await agent.resume(session=session, decisions={"d1": Approve()})

    assert (await session.load()).messages == done.messages
    assert [kind for kind, _ in session.entries] == ["turn", "paused", "resumed", "turn"]
