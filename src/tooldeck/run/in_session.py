"""Runs in a session: load the history before the loop, commit the turn after its FinalAnswer.

The agent hands these the run to start (a function of the history, or of the stored pause);
the loop is the same one, started from the stored history; nothing here runs a model or a
tool, and nothing here knows the agent.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from tooldeck.errors import CheckpointError, RunStopped, SessionConflict, SessionError
from tooldeck.messages import Message
from tooldeck.results import Checkpoint, RunResult, StopReason
from tooldeck.run.cancel import CancelSignal
from tooldeck.run.events import Event, FinalAnswer
from tooldeck.run.history import HistoryStrategy, give_back
from tooldeck.run.repair import repair
from tooldeck.run.session import Session, StoredRun

Events = AsyncGenerator[Event, None]


async def stream_in_session(
    session: Session,
    strategy: HistoryStrategy | None,
    start: Callable[[tuple[Message, ...]], Events],
    cancel: CancelSignal | None = None,
) -> Events:
    """A run that continues the session's conversation: ``start(history)`` is the run;
    ``cancel``, its signal when it was started with a handle (says whether a cancelled run
    commits)."""
    history = await session.load()
    if history.pending is not None:
        raise SessionConflict(
            f"session {session.session_id!r} has a paused run ({history.pending.run_id!r}) "
            "waiting for decisions: resume it with agent.resume(session=..., decisions=...), "
            "or clear the session, before starting another run"
        )
    messages = repair(history.messages)
    give_back(strategy, history.summary)
    events = start(messages)
    committing = _committing(events, session, len(messages), history.head, cancel)
    async with aclosing(committing) as run:
        async for event in run:
            yield event


async def resume_in_session(
    session: Session,
    strategy: HistoryStrategy | None,
    checkpoint: Checkpoint | str | None,
    start: Callable[[Checkpoint], Events],
    cancel: CancelSignal | None = None,
) -> Events:
    """Claim the session's paused run, go on with it (``start(stored)``), commit the turn.

    The run is made (its checkpoint and decisions checked) before the claim, so a refused
    resume leaves the paused run in the session; once claimed, no other resume can have it.
    """
    history = await session.load()
    stored = _paused_run(session, history.pending, checkpoint)
    messages = repair(history.messages)
    if stored.messages[: len(messages)] != messages:
        raise CheckpointError(
            f"session {session.session_id!r}'s history is not the one paused run "
            f"{stored.run_id!r} started from: refusing to resume it"
        )
    give_back(strategy, history.summary)
    events = start(stored)
    head = await session.consume(stored.run_id, after=history.head)
    async with aclosing(_committing(events, session, len(messages), head, cancel)) as run:
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
    events: AsyncGenerator[Event, None],
    session: Session,
    start: int,
    head: int,
    cancel: CancelSignal | None,
) -> AsyncGenerator[Event, None]:
    """Pass the run's events on; commit its turn before its FinalAnswer is handed over
    (a cancelled run's too, unless its canceller said not to). Closing this stream closes
    the run's at once (its request and calls stop)."""
    try:
        async with aclosing(events):
            async for event in events:
                if isinstance(event, FinalAnswer) and _kept(event.result, cancel):
                    await _commit(session, event.result, start, head)
                yield event
    except RunStopped as stop:
        stop.add_note(f"session {session.session_id!r} is unchanged: a stopped run commits nothing")
        raise


def _kept(result: RunResult[Any], cancel: CancelSignal | None) -> bool:
    """Whether the run's end is committed: always, but for a cancel that said not to."""
    return cancel is None or cancel.commit or result.stop_reason != StopReason.CANCELLED


async def _commit(session: Session, result: RunResult[Any], start: int, head: int) -> None:
    if result.checkpoint is not None:
        turn = StoredRun(result.run_id, checkpoint=result.checkpoint)
    else:
        turn = StoredRun(
            result.run_id, messages=result.messages[start:], summary=result.history_summary
        )
    try:
        await session.append(turn, after=head)
    except SessionError as error:
        error.result = result
        raise
