"""What a session store does: the ``Session`` protocol the run talks to, and its records.

A session is an append-only log of entries numbered 1, 2, 3... per session id. An entry is
a finished run (every message of one run, its prompt through its answer: a ``StoredRun``),
a paused run (its checkpoint), the claim of a paused run by a resume, or a clear. The log's
last entry is its *head*; a writer appends after the head it read, and the append fails with
``SessionConflict`` if another writer got there first. A run is one entry, so it is stored
whole or not at all. The stores (``tooldeck.sessions``) implement the protocol; the run
package never imports them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tooldeck.messages import Message, ToolResult
from tooldeck.results import Checkpoint, HistorySummary


@dataclass(frozen=True, slots=True)
class History:
    """A session as ``Session.load()`` reads it."""

    messages: tuple[Message, ...]
    """Every message of the stored runs, oldest first (as stored: not repaired)."""
    head: int
    """The number of the log's last entry (0 for a new session); the next append goes after."""
    pending: Checkpoint | None = None
    """The checkpoint of a paused run waiting for decisions, if the head is one."""
    summary: HistorySummary | None = None
    """The latest summary of the earlier exchanges (``Summarize``), if a run stored one."""
    stored_runs: tuple[tuple[str, int], ...] = ()
    """(run id, message count) of each finished run in ``messages``, oldest first: a run
    submitted again with the id of one of them is recognised, not stored twice."""
    unfinished: UnfinishedRun | None = None
    """The run the session's journal holds that never finished, if the head is one
    (``RunJournal``; ``tooldeck.run._engine.journal`` reads it)."""
    capability_states: dict[str, Any] | None = None
    """The capability states the last committed run ended with (``StoredRun``), by
    ``state_key``: the next run starts each capability from its own. None: none kept (that
    run kept none, the session is new or was cleared, or it was written before they were)."""


@dataclass(frozen=True, slots=True)
class UnfinishedRun:
    """The latest run opened in the session's journal, as the store holds it (it may have
    committed since, or still run somewhere: ``tooldeck.run._engine.journal`` reads the bodies and
    tells)."""

    run_id: str
    opened: str
    """The body of its opening."""
    steps: tuple[str, ...] = ()
    """The bodies of its steps, in order."""
    where: str = ""
    """Which database and session (for the errors that name a broken body)."""


@dataclass(frozen=True, slots=True)
class StoredRun:
    """What one run adds to a session: its messages, or the checkpoint it paused with."""

    run_id: str
    messages: tuple[Message, ...] = ()
    """A finished run's new messages: its prompt through its answer."""
    checkpoint: Checkpoint | None = None
    """A paused run's checkpoint; its messages are committed when a resume finishes it."""
    summary: HistorySummary | None = None
    """A finished run's summary of the earlier exchanges (``RunResult.history_summary``):
    kept with the run, so a later run, in any process, does not ask the model for it again."""
    capability_states: dict[str, Any] | None = None
    """A finished run's capability states as it ended (``RunResult.capability_states``):
    kept with the run, for the session's next run to start from (``History``)."""

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (not self.messages):
            raise ValueError("a StoredRun holds either a finished run's messages or a checkpoint")
        if self.checkpoint is not None and (
            self.summary is not None or self.capability_states is not None
        ):
            raise ValueError(
                "a paused run's summary and capability states are kept in its checkpoint, "
                "not the StoredRun"
            )


@runtime_checkable
class Session(Protocol):
    """A conversation kept between runs (``agent.run(prompt, session=...)``).

    ``SQLiteSession`` and ``PostgresSession`` implement it; implement it for another store
    with the same rules: ``append`` and ``consume`` write one entry at ``after + 1`` only if
    ``after`` is still the head (atomically: of two writers with the same ``after``, exactly
    one wins), and every write is one transaction.
    """

    @property
    def session_id(self) -> str:
        """Which conversation of the store this is."""
        ...

    async def load(self) -> History:
        """The committed messages, the head, the paused run's checkpoint, the latest
        history summary and the last committed run's capability states, if any."""
        ...

    async def append(self, run: StoredRun, *, after: int) -> int:
        """Append ``run`` as entry ``after + 1`` and return that number; keep its summary
        (``run.summary``) and its capability states (``run.capability_states``: the last
        stored run's, none if it had none), in the same transaction, for ``load()`` to
        return. A store that keeps no states (``History.capability_states`` always None)
        still works: each run then starts its capabilities from ``initial_state()``.

        Raises:
            SessionConflict: ``after`` is no longer the head: another writer came first.
        """
        ...

    async def pending(self) -> Checkpoint | None:
        """The checkpoint of the paused run that waits for decisions, if any."""
        ...

    async def consume(self, run_id: str, *, after: int) -> int:
        """Claim the paused run ``run_id`` (entry ``after``) for one resume; return the new head.

        Raises:
            CheckpointError: the entry is not that paused run, or another resume (or a clear)
                claimed it first. A checkpoint is consumed exactly once.
        """
        ...

    async def clear(self) -> None:
        """Delete the session's entries (a paused run's checkpoint and the summary too)."""
        ...

    async def aclose(self) -> None:
        """Release the connection; the session can be opened again later."""
        ...


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """What the record holds of a call that started before."""

    result: ToolResult | None
    """Its result, or None: it started and never reported (the process may have died)."""


@runtime_checkable
class CallRecords(Protocol):
    """Where a run records its ``side_effects`` calls (a session that can: ``SQLiteSession``,
    ``PostgresSession``). Both verbs are one transaction each."""

    async def start_call(self, key: str, tool_name: str) -> RecordedCall | None:
        """Record that the call ``key`` starts, atomically: None if it had never started
        (this caller runs it), else what was recorded of it (another caller, or an earlier
        process, started it)."""
        ...

    async def finish_call(self, key: str, result: ToolResult) -> None:
        """Record the result of the call ``key``."""
        ...


@runtime_checkable
class RunJournal(Protocol):
    """A session that keeps a journal of its runs, written ahead (``tooldeck.run._engine.journal``:
    ``SQLiteSession`` and ``PostgresSession`` do), so a run met again goes on from it. Each
    verb is one transaction. Appending a stored run drops the session's journal with it."""

    async def open_run(
        self, run_id: str, opening: str, *, closing: StoredRun | None = None, after: int = 0
    ) -> None:
        """Keep the opening of run ``run_id``; with ``closing`` (an unfinished run closed as
        it stood), first append it as entry ``after + 1`` and drop the session's journal.

        Raises:
            SessionConflict: ``closing`` was given and ``after`` is no longer the head.
        """
        ...

    async def claim_run(self, run_id: str, opening: str, *, after: int) -> int:
        """``Session.consume``, and the resumed run's opening kept with the claim."""
        ...

    async def write_step(self, run_id: str, step: int, body: str) -> None:
        """Keep step ``step`` of run ``run_id`` (step 0 rewrites its opening; the runs inside
        an agent tool's calls write steps under ids derived from the outer run's)."""
        ...

    async def read_steps(self, run_id: str) -> tuple[str, ...]:
        """The bodies of run ``run_id``'s steps from 1 on, in order."""
        ...

    async def drop_run(self, run_id: str) -> None:
        """Forget run ``run_id``'s journal (a run cancelled with ``commit=False``)."""
        ...


def records_of(session: Session) -> CallRecords | None:
    """The session, when it can record ``side_effects`` calls (``CallRecords``)."""
    return session if isinstance(session, CallRecords) else None


def journal_of(session: Session) -> RunJournal | None:
    """The session, when it keeps a journal of its runs (``RunJournal``)."""
    return session if isinstance(session, RunJournal) else None


def __getattr__(name: str) -> Any:
    if name == "Turn":  # renamed in 0.2: a "turn" is one assistant message
        warnings.warn("Turn is now StoredRun", DeprecationWarning, stacklevel=2)
        return StoredRun
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
