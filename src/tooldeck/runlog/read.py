"""Reading the run log back: the latest runs, and one run with its turns and calls."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tooldeck.messages import ToolCall
from tooldeck.run._engine.journal import Writer
from tooldeck.runlog._checked import checked, json_object
from tooldeck.runlog._schema import RunLogError, connect
from tooldeck.search import SEARCH_TOOL, Searched, searched


@dataclass(frozen=True, slots=True)
class LoggedTurn:
    """One model turn of a logged run (a row of ``model_turns``)."""

    round: int
    started_at: float
    duration_s: float
    input_tokens: int | None
    output_tokens: int | None
    settings: dict[str, Any]
    content: str
    tool_calls: int
    """How many calls the model asked for in this turn."""
    cost_usd: float | None = None
    """US dollars this response cost; None when unknown."""
    model: str | None = None
    """The model that answered, when a FallbackModel chose it."""


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One tool call of a logged run (a row of ``tool_calls``)."""

    round: int
    call_id: str
    name: str
    arguments: str
    """The arguments as the model sent them (JSON, or its raw text when not JSON)."""
    edited_arguments: str | None
    """The arguments a person approved instead, as JSON."""
    started_at: float | None
    """When it started running; None when it was refused before running (or waits)."""
    finished_at: float | None
    duration_s: float | None
    result: str | None
    """What the model read; None while the call waits for a decision."""
    error_code: str | None
    error: str | None
    """The exception the host kept, ``Type: message``."""
    waited_for: str | None
    """``approval`` or ``external`` for a call the run paused for."""
    waited_at: float | None
    """When the run paused for it."""
    decision: str | None
    """``approved`` (``approved:run``, ``approved:session`` with a scope), ``rejected``,
    ``result`` (an external call's result sent back), or ``remembered:run`` /
    ``remembered:session``: no one was asked, the call ran under an approval a person gave
    an earlier call of its tool with that scope (``decided_by`` is who)."""
    decided_by: str | None
    full_output: str | None = None
    """The tool's whole output when the model read less of it (``max_output_chars``)."""

    @property
    def failed(self) -> bool:
        return self.error_code is not None

    def search(self) -> Searched | None:
        """A call of ``search_tools`` read back: its query and the tools it revealed (none
        when it failed); None for a call of any other tool."""
        if self.name != SEARCH_TOOL:
            return None
        arguments = ToolCall.from_json(self.call_id, self.name, self.arguments).arguments
        if self.failed or self.result is None:
            return Searched(str(arguments.get("query", "")), ())
        return searched(self.name, arguments, self.result)


@dataclass(frozen=True, slots=True)
class LoggedGuardrail:
    """One guardrail's decision in a logged run (a row of ``guardrails``)."""

    round: int
    call_id: str | None
    """The call a tool guardrail judged; None for the prompt or the answer."""
    stage: str
    name: str
    verdict: str
    message: str
    at: float


@dataclass(frozen=True, slots=True)
class LoggedHandoff:
    """One handoff in a logged run (a row of ``handoffs``)."""

    round: int
    call_id: str
    """The transfer call that made it."""
    source: str
    target: str
    at: float


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    """A message sent to a logged run while it worked (a row of ``sent_messages``)."""

    round: int
    """The round whose request it joined (or, not ``sent``, the run's last)."""
    content: str
    sent: bool
    """False: the run ended before another request; it is kept at the end, unanswered."""
    at: float


@dataclass(frozen=True, slots=True)
class LoggedRun:
    """One logged run; ``turns``, ``calls`` and ``guardrails`` are filled by ``load_run`` only."""

    run_id: str
    session_id: str | None
    model: str
    prompt: str
    instructions: str
    started_at: float
    ended_at: float | None
    """None while the run goes on (or if its process died)."""
    duration_s: float | None
    """Working time: the time spent paused does not count."""
    stop_reason: str | None
    answer: str | None
    error: str | None
    """Why it stopped, when it stopped without an answer."""
    input_tokens: int
    output_tokens: int
    model_turns: int
    parts: int
    """1, plus one per resume of a paused run."""
    parent_run_id: str | None
    """For the run of an agent tool (``agent.as_tool``): the run that called it."""
    parent_call_id: str | None
    """... and the id of that call in it."""
    tool_calls: int
    failed_calls: int
    """Calls with an error code (a person's rejection is not a failure)."""
    cost_usd: float | None
    """US dollars the run's model responses cost; None when unknown."""
    untrusted_call_id: str | None
    """The call whose result first brought untrusted content into the run's conversation."""
    untrusted_tool: str | None
    writer_host: str | None
    """The host of the process that ran it (None in a log older than version 5)."""
    writer_pid: int | None
    """... its process id ..."""
    writer_started: int | None
    """... and when that process started (Linux clock ticks since boot; None: unknown)."""
    turns: tuple[LoggedTurn, ...] = ()
    calls: tuple[LoggedCall, ...] = ()
    guardrails: tuple[LoggedGuardrail, ...] = ()
    handoffs: tuple[LoggedHandoff, ...] = ()
    """Who handed the run to whom (``Agent(handoffs=...)``), in order."""
    messages_sent: tuple[LoggedMessage, ...] = ()
    """The messages sent to the run while it worked (``RunHandle.send``), in order."""
    process_gone: bool = False
    """It has no end and the process that ran it is gone (killed, or crashed): it will never
    end. Judged when the run was read (a process on another host is taken to be there)."""

    @property
    def status(self) -> str:
        """Its stop reason; else ``interrupted`` (no end, its process gone), ``running``, or
        ``no end logged`` (no end, and a log too old to name its process)."""
        if self.stop_reason is not None:
            return self.stop_reason
        if self.process_gone:
            return "interrupted"
        return "running" if self.writer_pid is not None else "no end logged"

    def to_json(self, details: bool = True) -> dict[str, Any]:
        """The run as plain JSON data (what ``tooldeck logs --json`` prints); without
        ``details``, no ``turns`` and ``calls``."""
        data = asdict(self)
        data["status"] = self.status
        if not details:
            del data["turns"], data["calls"], data["guardrails"], data["handoffs"]
            del data["messages_sent"]
            return data
        for call, shown in zip(self.calls, data["calls"], strict=True):
            search = call.search()
            if search is not None:  # a tool search: the tools it revealed, for a script
                shown["revealed"] = list(search.revealed)
        return data


_FAILED = "c.error_code IS NOT NULL AND c.error_code <> 'rejected'"
"""A failed call: one with an error code, except a person's rejection."""

_RUN_COLUMNS = (
    "r.run_id, r.session_id, r.model, r.prompt, r.instructions, r.started_at, r.ended_at,"
    " r.duration_s, r.stop_reason, r.answer, r.error, r.input_tokens, r.output_tokens,"
    " r.model_turns, r.parts, r.parent_run_id, r.parent_call_id,"
    " (SELECT count(*) FROM tool_calls c WHERE c.run_id = r.run_id),"
    f" (SELECT count(*) FROM tool_calls c WHERE c.run_id = r.run_id AND {_FAILED}),"
    " r.cost_usd, r.untrusted_call_id, r.untrusted_tool, r.writer_host, r.writer_pid,"
    " r.writer_started"
)


def list_runs(
    path: str | os.PathLike[str],
    limit: int | None = 20,
    *,
    tool: str | None = None,
    errors: bool = False,
    session: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> list[LoggedRun]:
    """The latest runs, newest first: all, or those that called ``tool``, had a failed
    call (``errors``: an error code other than ``rejected``), belong to ``session``, or
    started at ``since`` or later and before ``until`` (Unix seconds). A missing database
    has none."""
    where: list[str] = []
    values: list[object] = []
    if tool is not None:
        where.append("EXISTS (SELECT 1 FROM tool_calls c WHERE c.run_id = r.run_id AND c.name = ?)")
        values.append(tool)
    if errors:
        where.append(f"EXISTS (SELECT 1 FROM tool_calls c WHERE c.run_id = r.run_id AND {_FAILED})")
    if session is not None:
        where.append("r.session_id = ?")
        values.append(session)
    if since is not None:
        where.append("r.started_at >= ?")
        values.append(since)
    if until is not None:
        where.append("r.started_at < ?")
        values.append(until)
    query = f"SELECT {_RUN_COLUMNS} FROM runs r"
    if where:
        query += " WHERE " + " AND ".join(where)
    query += " ORDER BY r.started_at DESC, r.rowid DESC"
    if limit is not None:
        query += f" LIMIT {int(limit)}"
    with _reading(Path(path)) as connection:
        if connection is None:
            return []
        return [_run(row) for row in connection.execute(query, values)]


def load_run(path: str | os.PathLike[str], run_id: str) -> LoggedRun:
    """One run with its turns and calls, by its id or a unique start of it.

    Raises:
        RunLogError: No run, or several, match ``run_id``.
    """
    where = Path(path)
    with _reading(where) as connection:
        if connection is None:
            raise RunLogError(f"no run log at {str(where)!r}")
        rows = connection.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs r WHERE r.run_id >= ? AND r.run_id < ? LIMIT 6",
            (run_id, run_id + "\U0010ffff"),
        ).fetchall()
        if not run_id or not rows:
            raise RunLogError(
                f"no run {run_id!r} in the run log at {str(where)!r}; `tooldeck logs` lists them"
            )
        exact = [row for row in rows if row[0] == run_id]
        if len(rows) > 1 and not exact:
            ids = ", ".join(row[0] for row in rows[:5])
            raise RunLogError(f"{run_id!r} is the start of several run ids ({ids}); give more")
        run = _run((exact or rows)[0])
        turns = connection.execute(
            "SELECT round, started_at, duration_s, input_tokens, output_tokens, settings,"
            " content, tool_calls, cost_usd, model FROM model_turns WHERE run_id = ?"
            " ORDER BY started_at, round",
            (run.run_id,),
        )
        calls = connection.execute(
            "SELECT round, call_id, name, arguments, edited_arguments, started_at, finished_at,"
            " duration_s, result, error_code, error, waited_for, waited_at, decision, decided_by,"
            " full_output"
            " FROM tool_calls WHERE run_id = ? ORDER BY id",
            (run.run_id,),
        )
        guardrails = connection.execute(
            "SELECT round, call_id, stage, name, verdict, message, at FROM guardrails"
            " WHERE run_id = ? ORDER BY id",
            (run.run_id,),
        )
        handoffs = connection.execute(
            "SELECT round, call_id, source, target, at FROM handoffs WHERE run_id = ? ORDER BY id",
            (run.run_id,),
        )
        sent = connection.execute(
            "SELECT round, content, sent, at FROM sent_messages WHERE run_id = ? ORDER BY id",
            (run.run_id,),
        )
        return _with_details(run, turns, calls, guardrails, handoffs, sent)


def decided_calls(path: str | os.PathLike[str], session: str) -> list[tuple[str, LoggedCall]]:
    """The calls a person (or the application) decided on in the runs of ``session``, with
    their run's id, oldest first. A missing database has none."""
    with _reading(Path(path)) as connection:
        if connection is None:
            return []
        rows = connection.execute(
            "SELECT c.run_id, c.round, c.call_id, c.name, c.arguments, c.edited_arguments,"
            " c.started_at, c.finished_at, c.duration_s, c.result, c.error_code, c.error,"
            " c.waited_for, c.waited_at, c.decision, c.decided_by, c.full_output"
            " FROM tool_calls c JOIN runs r ON r.run_id = c.run_id"
            " WHERE r.session_id = ? AND c.decision IS NOT NULL ORDER BY c.id",
            (session,),
        ).fetchall()
    return [
        (row[0], LoggedCall(*checked(row[1:], LoggedCall, "tool_calls", row[0]))) for row in rows
    ]


def _with_details(
    run: LoggedRun,
    turns: sqlite3.Cursor,
    calls: sqlite3.Cursor,
    guardrails: sqlite3.Cursor,
    handoffs: sqlite3.Cursor,
    sent: sqlite3.Cursor,
) -> LoggedRun:
    loaded_turns = tuple(_turn(row, run.run_id) for row in turns.fetchall())
    loaded_calls = tuple(
        LoggedCall(*checked(row, LoggedCall, "tool_calls", run.run_id)) for row in calls.fetchall()
    )
    decided = tuple(
        LoggedGuardrail(*checked(row, LoggedGuardrail, "guardrails", run.run_id))
        for row in guardrails.fetchall()
    )
    handed = tuple(
        LoggedHandoff(*checked(row, LoggedHandoff, "handoffs", run.run_id))
        for row in handoffs.fetchall()
    )
    messages = tuple(
        _sent_message(checked(row, LoggedMessage, "sent_messages", run.run_id))
        for row in sent.fetchall()
    )
    return replace(
        run,
        turns=loaded_turns,
        calls=loaded_calls,
        guardrails=decided,
        handoffs=handed,
        messages_sent=messages,
    )


def _sent_message(values: list[Any]) -> LoggedMessage:
    round_, content, sent, at = values
    return LoggedMessage(round_, content, bool(sent), at)


@contextmanager
def _reading(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A connection to read the log (None if there is no file); an older one is migrated.
    A query SQLite cannot answer (text that is not UTF-8, a damaged file) is a RunLogError."""
    if not path.exists():
        yield None
        return
    connection = connect(path)
    try:
        yield connection
    except sqlite3.Error as error:
        raise RunLogError(f"cannot read the run log at {str(path)!r}: {error}") from error
    finally:
        connection.close()


def _run(row: tuple[Any, ...]) -> LoggedRun:
    run = LoggedRun(*checked(row, LoggedRun, "runs", row[0]))
    if run.ended_at is None and _gone(run.writer_host, run.writer_pid, run.writer_started):
        return replace(run, process_gone=True)
    return run


def _gone(host: str | None, pid: int | None, started: int | None) -> bool:
    """Whether the process a run's row names is no longer there (as the run journal judges
    the writer of a run: ``tooldeck.run._engine.journal.Writer``)."""
    if host is None or pid is None:
        return False  # a log older than version 5: it does not say
    return not Writer(host=host, pid=pid, started=started).alive()


def _turn(row: tuple[Any, ...], run_id: str) -> LoggedTurn:
    values = checked(row, LoggedTurn, "model_turns", run_id)
    values[5] = json_object(values[5], "model_turns", run_id, "settings")
    return LoggedTurn(*values)
