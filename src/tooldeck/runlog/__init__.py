"""The run log: every run, model turn and tool call in SQLite, queryable afterwards.

``Agent(run_log=RunLog(path))`` records each run the agent makes: the prompt, each model
turn (when, how long, tokens, settings, text), each tool call (arguments, result, error
code, duration, and for paused runs the decision and who gave it), the answer, the stop
reason and the model. The log observes the run's event stream and changes nothing in it;
rows are written by a thread of the log's own, in batches, so the event loop never waits
on the database. What a run records is written just after it ends (once nothing else was
recorded for a few milliseconds, so runs ending together are written after their burst,
in one batch), at the latest ``interval`` seconds after it was recorded, and on
``flush()``, on ``close()`` and at interpreter exit.

The tables are documented in docs/run-log.md; read them with ``sqlite3``, Datasette,
``tooldeck logs``, or ``RunLog.runs()`` / ``RunLog.run()`` here.

Layer 4: a ``StreamObserver`` (``tooldeck.run.observer``) of the run's events. May import
the layers below; the run never imports this package.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import AsyncGenerator
from pathlib import Path
from types import TracebackType

from tooldeck.run.events import Event
from tooldeck.run.observer import Observing, RunInfo
from tooldeck.runlog._observer import record_run
from tooldeck.runlog._schema import (
    SCHEMA_VERSION,
    RunLogError,
    connect,
    default_path,
    tooldeck_home,
)
from tooldeck.runlog._writer import Writer, close_all
from tooldeck.runlog.read import (
    LoggedCall,
    LoggedGuardrail,
    LoggedRun,
    LoggedTurn,
    list_runs,
    load_run,
)

__all__ = [
    "SCHEMA_VERSION",
    "LoggedCall",
    "LoggedGuardrail",
    "LoggedRun",
    "LoggedTurn",
    "RunLog",
    "RunLogError",
    "default_path",
    "tooldeck_home",
]


class RunLog(Observing):
    """Records an agent's runs in an SQLite database (created if missing).

    Args:
        path: The database file; None is the CLI's (``default_path()``: under
            ``TOOLDECK_HOME``, else the user's data directory).
        interval: While runs go on, the most seconds a record waits to be written.

    Raises:
        RunLogError: The file is not a run log, or a newer tooldeck's (never changed).

    Examples:
        >>> import tempfile
        >>> from tooldeck import Agent, AssistantOutput, ScriptedModel
        >>> folder = tempfile.mkdtemp()
        >>> with RunLog(f"{folder}/runs.db") as log:
        ...     agent = Agent(ScriptedModel([AssistantOutput(content="Hi!")]), run_log=log)
        ...     result = agent.run_sync("Hello")
        ...     [(run.prompt, run.answer, run.stop_reason) for run in log.runs()]
        [('Hello', 'Hi!', 'answer')]
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, interval: float = 1.0
    ) -> None:
        if interval <= 0:
            raise ValueError(f"RunLog interval must be positive seconds, got {interval!r}")
        self.path = Path(path) if path is not None else default_path()
        self._writer = Writer(self.path, connect(self.path), interval)

    def observe(
        self, events: AsyncGenerator[Event, None], run: RunInfo
    ) -> AsyncGenerator[Event, None]:
        """Record the run whose events these are (the Agent calls this for each run)."""
        self._writer.start()
        return record_run(events, run, self._writer)

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until everything recorded so far is in the database.

        Raises:
            RunLogError: Records could not be written (the message says why), or
                ``timeout`` seconds passed first.
        """
        if not self._writer.flush(timeout):
            raise RunLogError(f"the run log at {str(self.path)!r} was not written in {timeout} s")
        self._raise_failure()

    def close(self) -> None:
        """Write what is queued, stop the writer and close the database (idempotent)."""
        self._writer.close()
        self._raise_failure()

    def runs(
        self,
        limit: int | None = 20,
        *,
        tool: str | None = None,
        errors: bool = False,
        session: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[LoggedRun]:
        """The latest runs, newest first, after a flush (see ``tooldeck.runlog.read``)."""
        if not self._writer.closed:
            self.flush()
        return list_runs(
            self.path, limit, tool=tool, errors=errors, session=session, since=since, until=until
        )

    def run(self, run_id: str) -> LoggedRun:
        """One run with its model turns and tool calls, by id or unique id prefix."""
        if not self._writer.closed:
            self.flush()
        return load_run(self.path, run_id)

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunLog({str(self.path)!r})"

    def _raise_failure(self) -> None:
        failure, self._writer.failure = self._writer.failure, None
        if failure is not None:
            raise RunLogError(failure)


atexit.register(close_all)
