"""Running sync tools in worker threads, cheaply, from any event loop.

One pool of worker threads serves the whole process (not asyncio's per-loop default
executor), so a ``run_sync`` does not start and join threads on every call. It is a
SimpleQueue feeding daemon threads rather than a ThreadPoolExecutor: the executor's
Future, Condition and work item per call are garbage the cyclic GC must scan, which at
10,000 concurrent runs cost a quarter of the wall time (bench/scaling.py). Results come back
to each event loop in batches: a worker that finishes while a hand-back is already
scheduled adds its result to it, so a thousand concurrent calls cost a few loop wake-ups.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

_Run = Callable[[Callable[[], Any]], Any]
_Job = tuple["_Bridge", _Run, Callable[[], Any], "asyncio.Future[Any]"]
"""Where to deliver, ``Context.run`` of the caller's context variables, the call, its future."""


def run_in_thread(function: Callable[[], Any]) -> asyncio.Future[Any]:
    """Run ``function`` in a worker thread with the caller's context variables."""
    loop = asyncio.get_running_loop()
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = _Bridge(loop)
    future: asyncio.Future[Any] = loop.create_future()
    _pool.put((bridge, contextvars.copy_context().run, function, future))
    return future


class _Bridge:
    """Hands results from worker threads back to one event loop, batched."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._finished: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._scheduled = False

    def finish(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        """Called in a worker thread with the outcome of one call."""
        with self._lock:
            self._finished.append((future, ok, value))
            if self._scheduled:
                return
            self._scheduled = True
        # RuntimeError: the loop closed while the tool ran, so nobody awaits the result.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        with self._lock:
            finished, self._finished = self._finished, []
            self._scheduled = False
        for future, ok, value in finished:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


class _Pool:
    """Daemon worker threads fed by one queue; a thread starts when none is idle."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._reset()

    def _reset(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._started = 0

    def put(self, job: _Job) -> None:
        self._jobs.put(job)
        if self._idle.acquire(blocking=False) or self._started >= self._size:
            return
        with self._lock:
            if self._started < self._size:
                self._started += 1
                name = f"tooldeck-tool-{self._started}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        jobs = self._jobs
        while True:
            bridge, run, function, future = jobs.get()
            try:
                outcome = (True, run(function))
            except BaseException as error:  # handed to the awaiting task, as an executor does
                outcome = (False, error)
            bridge.finish(future, *outcome)
            del bridge, run, function, future, outcome
            self._idle.release()


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Bridge] = (
    weakref.WeakKeyDictionary()
)
_pool = _Pool(min(32, (os.cpu_count() or 1) + 4))
# A forked child has none of the parent's threads: start afresh there.
os.register_at_fork(after_in_child=_pool._reset)
