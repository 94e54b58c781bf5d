"""A durable run's session: its history read, and its turn committed, as DBOS steps.

A replay reads the history the run started from (not the session as it is by then) and
never commits a turn twice: the commit is a step, and a commit that was written but not yet
recorded as done when the process died is recognised when the step runs again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dbos import DBOS, StepOptions

from tooldeck.errors import SessionConflict, SessionError
from tooldeck.messages import Message
from tooldeck.results import HistorySummary, RunResult
from tooldeck.run._engine.repair import repair
from tooldeck.sessions import Session, StoredRun

SessionSource = Callable[[str], Session]
"""How a worker opens a run's session by its id (e.g. ``lambda id: SQLiteSession(path, id)``)."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a durable run read from its session (recorded: a replay reads it again)."""

    messages: tuple[Message, ...]
    """The history the run starts from (repaired, as ``Agent.run(session=...)`` repairs it)."""
    head: int
    """The session's last entry then: the run's turn goes after it."""
    stored: int
    """How many messages the session held then, as stored (before any repair)."""
    summary: HistorySummary | None = None
    """The session's summary of its earlier turns then (``Summarize``), if it had one."""
    capability_states: dict[str, Any] | None = None
    """The capability states its last committed run ended with then (the run starts its
    capabilities from them: ``Capability.next_run_state``)."""


async def load_history(agent_name: str, session: Session) -> Loaded:
    """The step that reads the session."""
    options: StepOptions = {"name": f"{agent_name}.session.load"}
    loaded: Loaded = await DBOS.run_step_async(options, _load, session)
    return loaded


async def commit_turn(
    agent_name: str, session: Session, result: RunResult[Any], loaded: Loaded
) -> None:
    """The step that stores the run's turn after the entry it loaded (SessionConflict if
    another run stored one first; the error carries the run's result)."""
    options: StepOptions = {"name": f"{agent_name}.session.commit"}
    new = result.messages[len(loaded.messages) :]
    turn = StoredRun(
        result.run_id,
        messages=new,
        summary=result.history_summary,
        capability_states=result.capability_states,
    )
    try:
        await DBOS.run_step_async(options, _commit, session, turn, loaded)
    except SessionError as error:
        error.result = result
        raise


async def _load(session: Session) -> Loaded:
    history = await session.load()
    if history.pending is not None:
        raise SessionConflict(
            f"session {session.session_id!r} has a paused run ({history.pending.run_id!r}) "
            "waiting for decisions: resume it with agent.resume(session=..., decisions=...), "
            "or clear the session, before starting a durable run in it"
        )
    messages = history.messages
    return Loaded(
        repair(messages), history.head, len(messages), history.summary, history.capability_states
    )


async def _commit(session: Session, turn: StoredRun, loaded: Loaded) -> None:
    try:
        await session.append(turn, after=loaded.head)
    except SessionConflict:
        if not await _stored_already(session, turn, loaded):
            raise


async def _stored_already(session: Session, turn: StoredRun, loaded: Loaded) -> bool:
    """Whether the turn after the loaded head is this very turn: an earlier execution of
    this step wrote it, and its process died before DBOS recorded the step as done."""
    history = await session.load()
    first = loaded.stored
    return history.messages[first : first + len(turn.messages)] == turn.messages
