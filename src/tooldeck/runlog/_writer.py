"""The run log's writer: one thread per log that turns records into rows, in batches.

The event loop only extends a list, the tape, by a record's values (atomic under the GIL,
lock-free); the thread wakes when a run ends (or every ``interval`` seconds while runs go
on), takes the tape so far, converts it to rows and writes them in one transaction.
Conversion (JSON and all) happens here, off the event loop.

Woken by a run's end, the thread first waits for the event loop to go quiet (nothing put on
the tape for ``QUIET_S``), but never past ``interval`` after its last write: when many runs
end together, the rows are made after the burst, in one batch, instead of taking the
interpreter's lock from the runs still going. A run ending alone is written ``QUIET_S``
after its end; no record waits much longer than ``interval``.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tooldeck.runlog._rows import FLUSH, Record, RowMaker, Statements, read_tape
from tooldeck.runlog._schema import RunLogError, connect

_log = logging.getLogger("tooldeck.runlog")

Put = Callable[[Record], None]
"""Puts one record on the tape (a tuple: its kind, then its fields)."""

QUIET_S = 0.005
"""How long nothing may be put on the tape before a woken writer takes it."""


class Writer:
    """Records put on a tape from any thread; a daemon thread writes them in batches."""

    def __init__(self, path: Path, connection: sqlite3.Connection, interval: float) -> None:
        self.path = path
        self.interval = interval
        self._connection: sqlite3.Connection | None = connection
        self._tape: list[Any] = []
        """Records, one after another: a kind, then its fields (see _rows)."""
        self.put: Put = self._tape.extend
        self._wake = threading.Event()
        self._hurry = False
        """A flush or close waits: write without waiting for quiet."""
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._rows = RowMaker()
        self.failure: str | None = None
        """What went wrong in the latest batch that could not be written, if any."""
        _live.add(self)

    @property
    def closed(self) -> bool:
        return self._stopping

    def start(self) -> None:
        """Start the thread if it is not running (cheap when it is); refuse once closed."""
        if self._thread is not None and not self._stopping:
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
        if not self._wake.is_set():  # Event.set takes a lock and notifies, in Python
            self._wake.set()

    def flush(self, timeout: float | None) -> bool:
        """Wait until everything queued so far is written; False if ``timeout`` passed."""
        if self._stopping:
            return True  # closing wrote everything
        if self._thread is None:
            self._write(self._take())  # nothing started: write here (or nothing to do)
            return True
        done = threading.Event()
        self.put((FLUSH, done))
        self._hurry = True
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
        self._write(self._take())  # what came after the thread's last batch
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        _live.discard(self)

    def _work(self) -> None:
        written = time.monotonic()
        while True:
            if self._wake.wait(self.interval):
                self._wait_for_quiet(written + self.interval)
            self._wake.clear()
            self._hurry = False
            stopping = self._stopping
            self._write(self._take())
            written = time.monotonic()
            if stopping and not self._tape:
                return

    def _wait_for_quiet(self, deadline: float) -> None:
        """Wait until nothing was put on the tape for QUIET_S (or the deadline, a flush, a
        close)."""
        queued = len(self._tape)
        while not (self._hurry or self._stopping) and time.monotonic() < deadline:
            time.sleep(QUIET_S)
            now = len(self._tape)
            if now == queued:
                return
            queued = now

    def _take(self) -> list[Any]:
        """The tape so far (whole records: each was put in one atomic extend)."""
        tape = self._tape
        end = len(tape)
        taken = tape[:end]
        del tape[:end]
        return taken

    def _write(self, tape: list[Any]) -> None:
        if not tape:
            return
        records: list[Record] = []
        flushes = [item for item in tape if isinstance(item, threading.Event)]
        try:
            records, flushes = read_tape(tape)
            self._commit(self._rows.statements(records))
        except Exception as error:  # the thread must go on; the failure is reported
            self.failure = (
                f"{len(records)} run log records were not written to "
                f"{str(self.path)!r}: {type(error).__name__}: {error}"
            )
            _log.warning("%s", self.failure)
        finally:
            for done in flushes:
                done.set()

    def _commit(self, statements: Statements) -> None:
        if self._connection is None:
            self._connection = connect(self.path)  # in a forked child: its own connection
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            for sql, rows in statements:
                connection.executemany(sql, rows)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's thread and connection are not ours."""
        self._thread = None
        self._connection = None
        self._tape.clear()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._hurry = False


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
