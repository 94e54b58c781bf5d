"""The run log's writer: one thread per log that turns records into rows, in batches.

The event loop only appends small tuples to a deque (atomic, lock-free); the thread wakes
when a run ends (or every ``interval`` seconds while runs go on), takes everything queued,
converts it to rows and writes it in one transaction. Conversion (JSON and all) happens
here, off the event loop.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sqlite3
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tooldeck.checkpoint import Approve, Reject
from tooldeck.contracts import AssistantOutput, PendingCall, RecordedError, ToolTrace, Usage
from tooldeck.models.base import ModelSettings
from tooldeck.runlog._schema import RunLogError, connect

_log = logging.getLogger("tooldeck.runlog")

START, TURN, PENDING, CALL, END, FLUSH = range(6)
"""Record kinds; a record is a tuple whose first item is its kind."""

Record = tuple[Any, ...]

_SQL = {
    START: (
        "INSERT INTO runs (run_id, session_id, model, prompt, instructions, started_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET parts = parts + 1,"
        " ended_at = NULL, stop_reason = NULL"
    ),
    TURN: "INSERT OR REPLACE INTO model_turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    PENDING: (
        "INSERT INTO tool_calls (run_id, round, call_id, name, arguments, waited_for,"
        " waited_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
    ),
    CALL: (
        "INSERT INTO tool_calls (run_id, round, call_id, name, arguments, edited_arguments,"
        " started_at, finished_at, duration_s, result, error_code, error, decision, decided_by)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET"
        " edited_arguments = excluded.edited_arguments, started_at = excluded.started_at,"
        " finished_at = excluded.finished_at, duration_s = excluded.duration_s,"
        " result = excluded.result, error_code = excluded.error_code, error = excluded.error,"
        " decision = excluded.decision, decided_by = excluded.decided_by"
    ),
    END: (
        "UPDATE runs SET ended_at = ?, duration_s = coalesce(duration_s, 0) + ?,"
        " stop_reason = ?, answer = ?, error = ?, input_tokens = coalesce(?, input_tokens),"
        " output_tokens = coalesce(?, output_tokens), model_turns = coalesce(?, model_turns)"
        " WHERE run_id = ?"
    ),
}
_ORDER = (START, TURN, PENDING, CALL, END)
"""Writing a batch kind by kind keeps what matters: a run's row exists before its end is
written, a pending call's row before its decision, and a run's ends stay in order."""


class Writer:
    """Queue records from any thread; a daemon thread writes them in batches."""

    def __init__(self, path: Path, connection: sqlite3.Connection, interval: float) -> None:
        self.path = path
        self.interval = interval
        self._connection: sqlite3.Connection | None = connection
        self._queue: deque[Record] = deque()
        self.put: Callable[[Record], None] = self._queue.append
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._settings_json: dict[ModelSettings, str] = {}
        self.failure: str | None = None
        """What went wrong in the latest batch that could not be written, if any."""
        _live.add(self)

    @property
    def closed(self) -> bool:
        return self._stopping

    def start(self) -> None:
        """Start the thread if it is not running (cheap when it is)."""
        if self._thread is not None:
            return
        with self._lock:
            if self._stopping:
                raise RunLogError(f"the run log at {str(self.path)!r} is closed")
            if self._thread is None:
                thread = threading.Thread(target=self._work, name="tooldeck-runlog", daemon=True)
                thread.start()
                self._thread = thread

    def wake(self) -> None:
        """Write what is queued now, without waiting for the next interval."""
        self._wake.set()

    def flush(self, timeout: float | None) -> bool:
        """Wait until everything queued so far is written; False if ``timeout`` passed."""
        if self._thread is None:
            self._write(self._take())  # nothing started: write here (or nothing to do)
            return True
        done = threading.Event()
        self.put((FLUSH, done))
        self._wake.set()
        return done.wait(timeout)

    def close(self) -> None:
        """Write what is queued, stop the thread, close the database."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        else:
            self._write(self._take())
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        _live.discard(self)

    def _work(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            stopping = self._stopping
            self._write(self._take())
            if stopping and not self._queue:
                return

    def _take(self) -> list[Record]:
        queue = self._queue
        batch = []
        while queue:
            batch.append(queue.popleft())
        return batch

    def _write(self, batch: list[Record]) -> None:
        if not batch:
            return
        rows: dict[int, list[tuple[Any, ...]]] = {kind: [] for kind in _ORDER}
        flushes = []
        try:
            for record in batch:
                if record[0] == FLUSH:
                    flushes.append(record[1])
                else:
                    rows[record[0]].append(self._row(record))
            self._commit(rows)
        except Exception as error:  # the thread must go on; the failure is reported
            self.failure = (
                f"{len(batch) - len(flushes)} run log records were not written to "
                f"{str(self.path)!r}: {type(error).__name__}: {error}"
            )
            _log.warning("%s", self.failure)
        finally:
            for done in flushes:
                done.set()

    def _commit(self, rows: dict[int, list[tuple[Any, ...]]]) -> None:
        if self._connection is None:
            self._connection = connect(self.path)  # in a forked child: its own connection
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            for kind in _ORDER:
                if rows[kind]:
                    connection.executemany(_SQL[kind], rows[kind])
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise

    def _row(self, record: Record) -> tuple[Any, ...]:
        kind = record[0]
        if kind == CALL:
            return _call_row(*record[1:])
        if kind == TURN:
            return self._turn_row(*record[1:])
        if kind == START:
            return record[1:]
        if kind == END:
            return _end_row(*record[1:])
        return _pending_row(*record[1:])

    def _turn_row(
        self,
        run_id: str,
        round_: int,
        started_at: float,
        duration_s: float,
        settings: ModelSettings,
        output: AssistantOutput,
    ) -> tuple[Any, ...]:
        text = self._settings_json.get(settings)
        if text is None:
            text = self._settings_json[settings] = json.dumps(dataclasses.asdict(settings))
        usage = output.usage
        return (
            run_id,
            round_,
            started_at,
            duration_s,
            usage.input_tokens if usage is not None else None,
            usage.output_tokens if usage is not None else None,
            text,
            output.content,
            len(output.tool_calls),
        )

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's thread and connection are not ours."""
        self._thread = None
        self._connection = None
        self._queue.clear()
        self._lock = threading.Lock()
        self._wake = threading.Event()


def _call_row(
    run_id: str,
    round_: int,
    trace: ToolTrace,
    started_at: float | None,
    finished_at: float,
    decision: object,
) -> tuple[Any, ...]:
    call, result = trace.call, trace.result
    edited = None
    decided, by = None, None
    if isinstance(decision, Approve):
        decided, by = "approved", decision.by or None
        if decision.arguments is not None:
            edited = json.dumps(decision.arguments, ensure_ascii=False)
    elif isinstance(decision, Reject):
        decided, by = "rejected", decision.by or None
    elif decision is not None:
        decided = "result"
    code = result.error_code
    return (
        run_id,
        round_,
        call.id,
        call.name,
        call.arguments_json,
        edited,
        started_at,
        finished_at,
        trace.duration_s,
        result.output,
        code.value if code is not None else None,
        _error_text(trace.error),
        decided,
        by,
    )


def _error_text(error: BaseException | None) -> str | None:
    if error is None:
        return None
    name = error.type_name if isinstance(error, RecordedError) else type(error).__name__
    return f"{name}: {error}"


def _pending_row(
    run_id: str, round_: int, pending: PendingCall, paused_at: float
) -> tuple[Any, ...]:
    call = pending.call
    return (run_id, round_, call.id, call.name, call.arguments_json, pending.kind, paused_at)


def _end_row(
    run_id: str,
    ended_at: float,
    duration_s: float,
    stop_reason: str,
    answer: str | None,
    error: str | None,
    usage: Usage | None,
) -> tuple[Any, ...]:
    """The end of a run, or of a part of it (a pause); without usage the tokens stay."""
    tokens: tuple[int | None, ...] = (None, None, None)
    if usage is not None:
        tokens = (usage.input_tokens, usage.output_tokens, usage.requests)
    return (ended_at, duration_s, str(stop_reason), answer, error, *tokens, run_id)


_live: weakref.WeakSet[Writer] = weakref.WeakSet()
"""Every open writer: flushed at exit, reset in a forked child."""


def close_all(writers: Iterable[Writer] | None = None) -> None:
    """Write what every open log has queued and close it (at interpreter exit)."""
    for writer in list(writers if writers is not None else _live):
        try:
            writer.close()
        except Exception as error:  # exit goes on; say what was lost
            _log.warning("closing the run log at %s failed: %s", writer.path, error)


def _after_fork_in_child() -> None:
    for writer in list(_live):
        writer.forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
