"""Runs in a session: the history loaded before the loop, the run journaled as it goes
(``tooldeck.run._engine.journal``), its end committed before its FinalAnswer is handed over.

A run meets what the session's journal holds first. A run that finished there, asked for
again by its id, is not run again: its stored result is returned. An unfinished run (its
process was killed, or it stopped with an error) is continued when it is the run asked for
(the same run id, the same resume, or its own prompt sent again without a run id: a retry),
and otherwise closed as it stood, into the conversation, before the new run starts; a run
still in progress in another process is left alone (SessionConflict). Each of these says so
first (``RunRecovered``). A run that stops without finishing leaves its journal, for a retry
with its id or for the next run to close.

The agent hands these the runs to start (``SessionRuns``); nothing here runs a model or a
tool, and nothing here knows the agent.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing, suppress
from dataclasses import replace
from typing import Any, Protocol

from tooldeck.errors import CheckpointError, RunStopped, SessionConflict, SessionError
from tooldeck.messages import Message
from tooldeck.results import Checkpoint, Decision, RunResult, StopReason
from tooldeck.run._engine.journal import (
    Journaled,
    JournalWriter,
    Opening,
    decisions_body,
    done,
    read_unfinished,
    running,
    this_process,
)
from tooldeck.run._engine.recovery import Closed, stored_result
from tooldeck.run._engine.repair import repair
from tooldeck.run._engine.state import new_run_id
from tooldeck.run.cancel import CancelSignal
from tooldeck.run.events import Event, FinalAnswer, RunRecovered
from tooldeck.run.history import HistoryStrategy, give_back
from tooldeck.run.session import History, RunJournal, Session, StoredRun, journal_of

Events = AsyncGenerator[Event, None]


class SessionRuns(Protocol):
    """What a run in a session needs of the agent: the runs it may start, and the closing
    of an unfinished run (which needs the agent's tools)."""

    def from_prompt(
        self, history: tuple[Message, ...], run_id: str, journal: JournalWriter | None
    ) -> Events:
        """The run of the prompt, after ``history``."""
        ...

    def from_pause(
        self, paused: Checkpoint, decisions: Mapping[str, Decision], journal: JournalWriter | None
    ) -> Events:
        """The paused run going on with ``decisions``."""
        ...

    def going_on(
        self, run: Journaled, history: tuple[Message, ...], journal: JournalWriter
    ) -> Events:
        """The unfinished run going on from its journal."""
        ...

    async def close(self, run: Journaled, history: tuple[Message, ...]) -> Closed:
        """The unfinished run closed as it stood."""
        ...

    def carrying(self, states: Mapping[str, Any] | None) -> None:
        """The runs started from now on start their capabilities from ``states`` (what the
        session's last committed run ended with: ``Capability.next_run_state``)."""
        ...


async def stream_in_session(
    session: Session,
    strategy: HistoryStrategy | None,
    prompt: str,
    run_id: str | None,
    runs: SessionRuns,
    cancel: CancelSignal | None = None,
) -> Events:
    """A run that continues the session's conversation (``run_id``: the id the caller gave).

    ``cancel``, its signal when it was started with a handle (says whether a cancelled run
    commits)."""
    history = await session.load()
    journal = journal_of(session)
    if run_id is not None and (known := _known_run(session, history, run_id, prompt)):
        for event in known:
            yield event
        return
    if history.pending is not None:
        raise _waiting(session, history.pending)
    messages = repair(history.messages)
    give_back(strategy, history.summary)
    runs.carrying(history.capability_states)
    if journal is None:  # a store of the application's that keeps no journal
        events = runs.from_prompt(messages, run_id or new_run_id(), None)
        committing = _committing(events, session, len(messages), history.head, cancel)
        async with aclosing(committing) as run:
            async for event in run:
                yield event
        return
    prompted = (Message.user(prompt),)
    unfinished = _unfinished(session, history)
    if unfinished is not None and run_id is None and _retried(unfinished, prompted):
        run_id = unfinished.run_id  # the same prompt again, as after a crash: a retry
    run_id = run_id or new_run_id()
    writer = JournalWriter(journal, run_id)
    after = history.head
    if unfinished is not None and unfinished.run_id == run_id:
        _same_prompt(session, unfinished, prompted)
        opening = await _reopen(journal, unfinished, writer)
        yield RunRecovered(run_id, "continued", unfinished.rounds)
        events = runs.going_on(unfinished, messages, writer)
    else:
        closing = None
        if unfinished is not None:
            closed = await runs.close(unfinished, messages)
            closing, after = _as_closed(closed.stored, history), after + 1
            messages = (*messages, *closed.stored.messages)
            runs.carrying(closing.capability_states)
        opening = Opening(writer=this_process(), after=after, prompt=prompted)
        body = opening.model_dump_json()
        await journal.open_run(run_id, body, closing=closing, after=history.head)
        if unfinished is not None:
            yield closed.recovered
        events = runs.from_prompt(messages, run_id, writer)
    journaled = _journaled_run(events, session, journal, opening, run_id, len(messages), cancel)
    async with aclosing(journaled) as run:
        async for event in run:
            yield event


async def resume_in_session(
    session: Session,
    strategy: HistoryStrategy | None,
    checkpoint: Checkpoint | str | None,
    decisions: Mapping[str, Decision],
    runs: SessionRuns,
    cancel: CancelSignal | None = None,
) -> Events:
    """Claim the session's paused run, go on with it, commit its end — or, when that resume
    was claimed and never finished (its process killed), continue it from its journal.

    The run is made (its checkpoint and decisions checked) before the claim, so a refused
    resume leaves the paused run in the session; once claimed, no other resume can have it.
    """
    history = await session.load()
    journal = journal_of(session)
    given = Checkpoint.from_json(checkpoint) if isinstance(checkpoint, str) else checkpoint
    unfinished = read_unfinished(history.unfinished, history.head) if journal else None
    if unfinished is not None and unfinished.in_progress:
        if _same_resume(unfinished, given):  # the pause was claimed: a resume runs now
            raise _claimed(session, unfinished)
        raise _in_progress(session, unfinished)
    messages = repair(history.messages)
    give_back(strategy, history.summary)
    runs.carrying(history.capability_states)
    if journal is not None and unfinished is not None and _same_resume(unfinished, given):
        _same_decisions(session, unfinished, decisions)
        writer = JournalWriter(journal, unfinished.run_id)
        opening = await _reopen(journal, unfinished, writer)
        yield RunRecovered(unfinished.run_id, "continued", unfinished.rounds)
        events = runs.going_on(unfinished, messages, writer)
        run_id = unfinished.run_id
    else:
        stored = _paused_run(session, history.pending, given)
        if stored.messages[: len(messages)] != messages:
            raise CheckpointError(
                f"session {session.session_id!r}'s history is not the one paused run "
                f"{stored.run_id!r} started from: refusing to resume it"
            )
        run_id = stored.run_id
        if journal is None:
            events = runs.from_pause(stored, decisions, None)
            head = await session.consume(run_id, after=history.head)
            committing = _committing(events, session, len(messages), head, cancel)
            async with aclosing(committing) as run:
                async for event in run:
                    yield event
            return
        writer = JournalWriter(journal, run_id)
        events = runs.from_pause(stored, decisions, writer)
        opening = Opening(
            writer=this_process(),
            after=history.head + 1,
            paused=stored,
            decisions=decisions_body(decisions),
        )
        await journal.claim_run(run_id, opening.model_dump_json(), after=history.head)
    journaled = _journaled_run(events, session, journal, opening, run_id, len(messages), cancel)
    async with aclosing(journaled) as run:
        async for event in run:
            yield event


def _as_closed(stored: StoredRun, history: History) -> StoredRun:
    """An unfinished run closed as it stood, as the session keeps it: with the capability
    states its journal last recorded, or, when it recorded none (it stopped before its first
    step, or keeps none), those the session kept before it, which it leaves as they were."""
    if stored.capability_states is not None or history.capability_states is None:
        return stored
    return replace(stored, capability_states=history.capability_states)


def _same_resume(unfinished: Journaled, given: Checkpoint | None) -> bool:
    """Whether the unfinished run is a resume of the pause asked for (or of the session's)."""
    return unfinished.paused is not None and (given is None or given.run_id == unfinished.run_id)


def _same_decisions(
    session: Session, unfinished: Journaled, decisions: Mapping[str, Decision]
) -> None:
    """A claimed resume goes on with the decisions it was resumed with: they bind its calls."""
    if decisions and decisions_body(decisions) != unfinished.opening.decisions:
        raise CheckpointError(
            f"the paused run {unfinished.run_id!r} of session {session.session_id!r} was "
            "resumed already, with other decisions, and stopped before it finished: it goes "
            "on from the decisions it was resumed with. Resume it with those (or with none)"
        )


async def _reopen(journal: RunJournal, unfinished: Journaled, writer: JournalWriter) -> Opening:
    """The unfinished run taken up by this process: its opening says so, its steps go on."""
    opening = unfinished.opening.model_copy(update={"writer": this_process(), "stopped": False})
    await journal.write_step(unfinished.run_id, 0, opening.model_dump_json())
    writer.step = len(unfinished.steps)
    return opening


def _known_run(
    session: Session, history: History, run_id: str, prompt: str
) -> tuple[Event, ...] | None:
    """A run submitted again after it committed (finished, or paused): its stored end,
    without asking or running anything. The same id with another prompt is refused."""
    pending = history.pending
    if pending is not None and pending.run_id == run_id:
        asked = [m.content for m in pending.messages if m.role == "user"]
        _known_prompt(session, run_id, asked[-1] if asked else "", prompt)
        paused = _paused_result(pending)
        return (RunRecovered(run_id, "stored", pending.counters.rounds), FinalAnswer(paused))
    stored = stored_result(history.messages, history.stored_runs, run_id)
    if stored is None:
        return None
    result, rounds, asked_then = stored
    _known_prompt(session, run_id, asked_then, prompt)
    return (RunRecovered(run_id, "stored", rounds), FinalAnswer(result))


def _known_prompt(session: Session, run_id: str, stored: str | None, given: str) -> None:
    if stored != given:
        raise SessionConflict(
            f"run id {run_id!r} names a run session {session.session_id!r} stored already, "
            f"of another prompt ({_clip(stored or '')!r}): a run id names one run. Give this "
            "prompt another run id (or none: tooldeck makes one)"
        )


def _clip(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _paused_result(checkpoint: Checkpoint) -> RunResult[Any]:
    return RunResult(
        answer="",
        messages=checkpoint.messages,
        tool_trace=checkpoint.trace,
        usage=checkpoint.usage,
        stop_reason=StopReason.PAUSED,
        run_id=checkpoint.run_id,
        pending=checkpoint.pending,
        checkpoint=checkpoint,
        agent=checkpoint.agent,
    )


def _unfinished(session: Session, history: History) -> Journaled | None:
    """The run the journal holds unfinished; SessionConflict if a process still runs it."""
    unfinished = read_unfinished(history.unfinished, history.head)
    if unfinished is not None and unfinished.in_progress:
        raise _in_progress(session, unfinished)
    return unfinished


def _claimed(session: Session, run: Journaled) -> CheckpointError:
    writer = run.opening.writer
    return CheckpointError(
        f"the paused run {run.run_id!r} of session {session.session_id!r} was already "
        f"resumed: that resume runs now (process {writer.pid} on {writer.host!r}). A "
        "checkpoint is resumed exactly once"
    )


def _in_progress(session: Session, run: Journaled) -> SessionConflict:
    writer = run.opening.writer
    return SessionConflict(
        f"session {session.session_id!r} has a run in progress: run {run.run_id!r} (process "
        f"{writer.pid} on {writer.host!r}). Runs on one session never interleave: wait for it "
        "to finish, or use another session"
    )


def _waiting(session: Session, pending: Checkpoint) -> SessionConflict:
    return SessionConflict(
        f"session {session.session_id!r} has a paused run ({pending.run_id!r}) "
        "waiting for decisions: resume it with agent.resume(session=..., decisions=...), "
        "or clear the session, before starting another run"
    )


def retried_run(history: History, prompt: str) -> str | None:
    """The id of the session's unfinished run that ``prompt`` sent again without a run id
    would go on with (its own prompt again: a retry after a crash), or None. For a front
    door whose clients draw a run id per request (AG-UI): give this one instead, and the
    retry goes on with that run."""
    unfinished = read_unfinished(history.unfinished, history.head)
    if unfinished is None or not _retried(unfinished, (Message.user(prompt),)):
        return None
    return unfinished.run_id


def _retried(run: Journaled, prompt: tuple[Message, ...]) -> bool:
    """Whether a prompt given without a run id is the unfinished run's own, sent again (the
    caller retries after a crash, and has no run id to give): it goes on with that run."""
    return run.paused is None and run.opening.prompt == prompt


def _same_prompt(session: Session, run: Journaled, prompt: tuple[Message, ...]) -> None:
    if run.paused is not None or run.opening.prompt != prompt:
        raise SessionConflict(
            f"run id {run.run_id!r} names an unfinished run of session {session.session_id!r} "
            "with another prompt (or a resume of a pause): a run id names one run. Run it "
            "again with its own prompt to go on with it, or give this prompt another run id"
        )


def _paused_run(
    session: Session, pending: Checkpoint | None, given: Checkpoint | None
) -> Checkpoint:
    """The session's paused run, which must be the checkpoint given, if one is."""
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


async def _journaled_run(
    events: Events,
    session: Session,
    journal: RunJournal,
    opening: Opening,
    run_id: str,
    start: int,
    cancel: CancelSignal | None,
) -> Events:
    """A journaled run's events, committed at its end (after the head it opened after); a
    run that ends otherwise (a stop, a closed stream) says in its opening that it stopped,
    and keeps its journal."""
    running(run_id)
    ended = False
    try:
        async with aclosing(events):
            async for event in events:
                if isinstance(event, FinalAnswer):
                    if _kept(event.result, cancel):
                        await _commit(session, event.result, start, opening.after)
                    else:
                        await journal.drop_run(run_id)
                    ended = True
                yield event
    except RunStopped as stop:
        if not ended:
            ended = True
            await _stopped(journal, run_id, opening)
            stop.add_note(
                f"session {session.session_id!r} keeps this run as it stood: run it again with "
                f"run_id={run_id!r} to go on with it, or the session's next run closes it"
            )
        raise
    finally:
        if not ended:  # closed early, cancelled: it stopped as it stood
            await _stopped(journal, run_id, opening)
        done(run_id)


async def _stopped(journal: RunJournal, run_id: str, opening: Opening) -> None:
    """Say in its opening that the run stopped (best effort: if the store is out of reach,
    the next run finds it unfinished, and this process gone or not running it)."""
    body = opening.model_copy(update={"stopped": True}).model_dump_json()
    with suppress(SessionError):
        await journal.write_step(run_id, 0, body)


async def _committing(
    events: AsyncGenerator[Event, None],
    session: Session,
    start: int,
    head: int,
    cancel: CancelSignal | None,
) -> AsyncGenerator[Event, None]:
    """Pass the run's events on; store the run before its FinalAnswer is handed over
    (a cancelled run's too, unless its canceller said not to). Closing this stream closes
    the run's at once (its request and calls stop). For a store that keeps no journal."""
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
        stored = StoredRun(result.run_id, checkpoint=result.checkpoint)
    else:
        stored = StoredRun(
            result.run_id,
            messages=result.messages[start:],
            summary=result.history_summary,
            capability_states=result.capability_states,
        )
    try:
        await session.append(stored, after=head)
    except SessionError as error:
        error.result = result
        raise
