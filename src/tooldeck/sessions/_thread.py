"""A database connection owned by one thread, so the event loop never waits on the database.

Work is queued to the thread and its outcome handed back to the caller's event loop. Jobs
run one at a time, in order, on one connection: a caller never blocks (not even on a lock),
and a long wait for the database (another process's write lock) holds only this thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

C = TypeVar("C")
T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[Any], Any]]


class ConnectionThread(Generic[C]):
    """Runs ``work(connection)`` jobs in one daemon thread, connecting on the first job."""

    def __init__(
        self, connect: Callable[[], C], close: Callable[[C], None], name: str = "tooldeck-db"
    ) -> None:
        self._connect = connect
        self._close = close
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        """The process that started the thread: a forked child starts its own."""
        self._start_lock = threading.Lock()

    def run(self, work: Callable[[C], T]) -> asyncio.Future[T]:
        """Queue ``work``; the future completes on the calling loop with its result or error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._start_lock:
            if self._thread is None or self._pid != os.getpid():
                self._jobs = queue.SimpleQueue()
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._serve, args=(self._jobs,), name=self._name, daemon=True
                )
                self._thread.start()
            self._jobs.put((loop, future, work))
        return future

    def stop(self) -> None:
        """Let the jobs already queued finish, then close the connection and end the thread."""
        with self._start_lock:
            if self._thread is not None:
                self._jobs.put(None)
                self._jobs = queue.SimpleQueue()  # a later job starts a new thread on its own queue
                self._thread = None

    def _serve(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        connection: C | None = None
        while (job := jobs.get()) is not None:
            loop, future, work = job
            try:
                if connection is None:
                    connection = self._connect()
                outcome: tuple[bool, Any] = (True, work(connection))
            except BaseException as error:  # handed to the awaiting task
                outcome = (False, error)
            # RuntimeError: the caller's loop closed meanwhile; nobody awaits the outcome.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, *outcome)
            del job, loop, future, work, outcome
        if connection is not None:
            self._close(connection)


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
