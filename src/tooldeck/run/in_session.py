"""Runs in a session: load the history before the loop, commit the turn after its FinalAnswer.

These wrap ``Agent.stream()`` and ``Agent.resume_stream()``: the loop is the same one,
started from the stored history; nothing here runs a model or a tool.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from tooldeck.errors import CheckpointError, RunStopped, SessionConflict, SessionError
from tooldeck.results import Checkpoint, RunResult
from tooldeck.run.events import Event, FinalAnswer
from tooldeck.run.history import give_back
from tooldeck.run.observer import SESSION_ID
from tooldeck.run.repair import repair
from tooldeck.run.session import Session, Turn

if TYPE_CHECKING:
    from tooldeck.run.agent import Agent
    from tooldeck.run.checkpoint import Decision


async def stream_in_session(
    agent: Agent[Any, Any],
    session: Session,
    prompt: str,
    deps: Any,
    deltas: bool,
    run_id: str | None = None,
) -> AsyncGenerator[Event, None]:
    """``agent.stream(prompt, session=...)``: the run continues the session's conversation."""
    history = await session.load()
    if history.pending is not None:
        raise SessionConflict(
            f"session {session.session_id!r} has a paused run ({history.pending.run_id!r}) "
            "waiting for decisions: resume it with agent.resume(session=..., decisions=...), "
            "or clear the session, before starting another run"
        )
    messages = repair(history.messages)
    give_back(agent.history, history.summary)
    named = SESSION_ID.set(session.session_id)  # the run log notes the run's session
    try:
        events = agent.stream(prompt, deps=deps, history=messages, deltas=deltas, run_id=run_id)
    finally:
        SESSION_ID.reset(named)
    async with aclosing(_committing(events, session, len(messages), history.head)) as run:
        async for event in run:
            yield event


async def resume_in_session(
    agent: Agent[Any, Any],
    session: Session,
    checkpoint: Checkpoint | str | None,
    decisions: Mapping[str, Decision] | None,
    deps: Any,
    deltas: bool,
) -> AsyncGenerator[Event, None]:
    """``agent.resume(session=...)``: claim the stored paused run, go on, commit the turn.

    The checkpoint and decisions are checked before the claim, so a refused resume leaves
    the paused run in the session; once claimed, no other resume can have it.
    """
    history = await session.load()
    stored = _paused_run(session, history.pending, checkpoint)
    messages = repair(history.messages)
    if stored.messages[: len(messages)] != messages:
        raise CheckpointError(
            f"session {session.session_id!r}'s history is not the one paused run "
            f"{stored.run_id!r} started from: refusing to resume it"
        )
    give_back(agent.history, history.summary)
    named = SESSION_ID.set(session.session_id)
    try:
        events = agent.resume_stream(stored, decisions, deps=deps, deltas=deltas)
    finally:
        SESSION_ID.reset(named)
    head = await session.consume(stored.run_id, after=history.head)
    async with aclosing(_committing(events, session, len(messages), head)) as run:
        async for event in run:
            yield event


def _paused_run(
    session: Session, pending: Checkpoint | None, given: Checkpoint | str | None
) -> Checkpoint:
    """The session's paused run, which must be the checkpoint given, if one is."""
    if isinstance(given, str):
        given = Checkpoint.from_json(given)
    if pending is None:
        which = f"run {given.run_id!r}" if given is not None else "its last pause"
        raise CheckpointError(
            f"session {session.session_id!r} holds no paused run to resume: {which} was "
            "resumed already (a checkpoint is resumed exactly once), or did not pause in "
            "this session, or the session was cleared"
        )
    if given is not None and given != pending:
        raise CheckpointError(
            f"the checkpoint given (run {given.run_id!r}) is not the paused run stored in "
            f"session {session.session_id!r} (run {pending.run_id!r}); pass session= alone "
            "to resume the stored one"
        )
    return pending


async def _committing(
    events: AsyncGenerator[Event, None], session: Session, start: int, head: int
) -> AsyncGenerator[Event, None]:
    """Pass the run's events on; commit its turn before its FinalAnswer is handed over.
    Closing this stream closes the run's at once (its request and calls stop)."""
    try:
        async with aclosing(events):
            async for event in events:
                if isinstance(event, FinalAnswer):
                    await _commit(session, event.result, start, head)
                yield event
    except RunStopped as stop:
        stop.add_note(f"session {session.session_id!r} is unchanged: a stopped run commits nothing")
        raise


async def _commit(session: Session, result: RunResult[Any], start: int, head: int) -> None:
    if result.checkpoint is not None:
        turn = Turn(result.run_id, checkpoint=result.checkpoint)
    else:
        turn = Turn(result.run_id, messages=result.messages[start:], summary=result.history_summary)
    try:
        await session.append(turn, after=head)
    except SessionError as error:
        error.result = result
        raise
