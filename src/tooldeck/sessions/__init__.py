"""Sessions: conversations kept between runs, in SQLite or PostgreSQL.

``agent.run(prompt, session=SQLiteSession("chat.db", "user-42"))`` starts from the session's
history and, when the run ends, appends it as a stored run: every message of the run, from
the prompt to the answer, as one entry of an append-only log, committed whole or not at all.

The rules:

- A run that ends with an answer is stored whole. A run that pauses commits its
  checkpoint; ``agent.resume(session=..., decisions=...)`` claims it (exactly once: a
  second resume, from any process, is refused with CheckpointError) and stores the whole
  run when it ends. A run that raises (RunStopped: a limit, a model error; or any other
  exception, or a cancellation) commits nothing: the session stays as it was.
- Runs on one session never interleave: a run commits only if the session is still where
  it was when the run started. Otherwise the second writer gets ``SessionConflict`` at
  once (it does not wait), with its finished run in ``error.result``; nothing is lost and
  nothing is mixed. A session with a paused run refuses new runs the same way until the
  run is resumed (or the session cleared).
- A run with ``Agent(history_strategy=Summarize(...))`` stores its summary of the earlier runs with
  its own; the next run that loads the session, in any process, extends it instead of
  asking the model for it again.
- A stored run keeps the states its capabilities ended it with; the session's next run, in
  any process, starts each capability from its own (``Capability.next_run_state``).
- Decoded stored runs are shared by the session objects of one conversation in a process
  (a stored run never changes), so a new object per request decodes only what was added
  since; ``stored_run_cache`` bounds what the process keeps
  (``stored_run_cache.max_messages``).
- ``SQLiteSession.list_sessions(path)`` and ``PostgresSession.list_sessions(dsn)`` list the
  conversations a database holds (``SessionInfo``: id, title, runs, times, paused); a
  session's ``clear()`` deletes one, which is then no longer listed.
- ``SQLiteBudget`` and ``PostgresBudget`` keep a spending budget
  (``tooldeck.run.budget.Budget``) in a database, so the runs of many processes draw on one
  (per tenant per day, say).
- The calls of ``@tool(side_effects=True)`` tools are recorded (``CallRecords``: a
  ``tooldeck_session_calls`` table), so a run met again with the same run id never makes a
  call twice: see the Run control page, "Calls that never happen twice".
- The history is repaired when it is loaded: a tool call with no result gets an
  ``error[interrupted]`` observation and a result that answers no call is dropped, so a
  provider never refuses a stored conversation.

Layer 4: the stores implement ``tooldeck.run.session.Session``, the protocol the run
talks to. May import the layers below (``tooldeck.run`` included); the run never imports
this package.

A "turn" is a model's: one assistant message. What a session keeps of a finished run is a
stored run (``StoredRun``); the log's ``kind`` column still says ``'turn'`` for it, as do
databases already written, and so it stays (stored data is never renamed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tooldeck.errors import SessionConflict, SessionError
from tooldeck.run.session import CallRecords, History, RecordedCall, Session, StoredRun
from tooldeck.sessions._cache import StoredRunCaches, stored_run_cache
from tooldeck.sessions.budget import SQLiteBudget
from tooldeck.sessions.sqlite import SQLiteSession

if TYPE_CHECKING:
    from tooldeck.runlog import RunLog
    from tooldeck.sessions._listing import SessionInfo
    from tooldeck.sessions.budget_postgres import PostgresBudget
    from tooldeck.sessions.postgres import PostgresSession

__all__ = [
    "CallRecords",
    "History",
    "PostgresBudget",
    "PostgresSession",
    "RecordedCall",
    "RunLog",
    "SQLiteBudget",
    "SQLiteSession",
    "Session",
    "SessionConflict",
    "SessionError",
    "SessionInfo",
    "StoredRun",
    "StoredRunCaches",
    "stored_run_cache",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresSession":  # psycopg loads only when PostgreSQL is used
        from tooldeck.sessions.postgres import PostgresSession

        return PostgresSession
    if name == "PostgresBudget":  # psycopg loads only when PostgreSQL is used
        from tooldeck.sessions.budget_postgres import PostgresBudget

        return PostgresBudget
    if name == "SessionInfo":  # what list_sessions() returns, defined when first asked for
        from tooldeck.sessions._listing import SessionInfo

        return SessionInfo
    if name == "RunLog":  # the run log lives in tooldeck.runlog; here too, as DESIGN.md has it
        from tooldeck.runlog import RunLog

        return RunLog
    if name == "Turn":  # renamed in 0.2: a "turn" is one assistant message
        import warnings

        warnings.warn("tooldeck.sessions.Turn is now StoredRun", DeprecationWarning, stacklevel=2)
        return StoredRun
    if name in _RENAMED:  # renamed for the same reason
        import warnings

        new, value = _RENAMED[name]
        warnings.warn(f"tooldeck.sessions.{name} is now {new}", DeprecationWarning, stacklevel=2)
        return value
    raise AttributeError(f"module 'tooldeck.sessions' has no attribute {name!r}")


_RENAMED: dict[str, tuple[str, object]] = {
    "turn_cache": ("stored_run_cache", stored_run_cache),
    "TurnCaches": ("StoredRunCaches", StoredRunCaches),
}
"""Old name -> its new name and what it is, of what a session keeps of a run (a stored run,
not a turn)."""
