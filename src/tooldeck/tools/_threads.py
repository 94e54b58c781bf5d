"""Running sync tools in worker threads, cheaply, from any event loop.

One thread pool serves the whole process (not asyncio's per-loop default executor), so a
``run_sync`` does not start and join threads on every call. Results come back to the event
loop in batches: a worker that finishes while a hand-back is already scheduled just adds
its result to it, so a thousand concurrent calls cost a few loop wake-ups, not a thousand.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_pool: ThreadPoolExecutor | None = None
_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Bridge] = (
    weakref.WeakKeyDictionary()
)


def tool_threads() -> ThreadPoolExecutor:
    """The process-wide pool sync tools run in."""
    global _pool
    if _pool is None:
        workers = min(32, (os.cpu_count() or 1) + 4)
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tooldeck-tool")
    return _pool


def run_in_thread(function: Callable[[], Any]) -> asyncio.Future[Any]:
    """Run ``function`` in a worker thread with the caller's context variables."""
    loop = asyncio.get_running_loop()
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = _Bridge(loop)
    return bridge.submit(contextvars.copy_context().run, function)


class _Bridge:
    """Hands results from worker threads back to one event loop, batched."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._finished: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._scheduled = False

    def submit(
        self, run: Callable[[Callable[[], Any]], Any], function: Callable[[], Any]
    ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self.loop.create_future()
        tool_threads().submit(self._work, run, function, future)
        return future

    def _work(
        self,
        run: Callable[[Callable[[], Any]], Any],
        function: Callable[[], Any],
        future: asyncio.Future[Any],
    ) -> None:
        try:
            outcome = (future, True, run(function))
        except BaseException as error:  # handed to the awaiting task, as an executor does
            outcome = (future, False, error)
        with self._lock:
            self._finished.append(outcome)
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
