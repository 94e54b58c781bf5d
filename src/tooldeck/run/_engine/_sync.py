"""Running a coroutine from synchronous code, cheaply and repeatably.

Each thread keeps one event loop for its synchronous calls, so a second ``run_sync`` does
not pay for a new loop, and clients bound to a loop (HTTP connection pools) keep working.
Called where an event loop is already running (a Jupyter cell, an async web handler), the
coroutine runs instead on tooldeck's own loop in a background thread, one loop for the
whole process, while the caller waits.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()
_runners: list[asyncio.Runner] = []
_background: asyncio.AbstractEventLoop | None = None
_background_lock = threading.Lock()


def run_sync(coroutine: Coroutine[Any, Any, T], *, lane: str = "main") -> T:
    """Run ``coroutine`` to completion and return its result, blocking this thread.

    Without a running event loop it runs on this thread's own loop (``lane`` names another
    loop of this thread, for callers that change their loop: DBOS gives the loops it runs
    on its own default executor, gone once DBOS is destroyed). Inside one (Jupyter,
    async code) it runs on tooldeck's background loop, in another thread, while the caller's
    loop is blocked until it ends: a tool that needs the caller's loop (an object created on
    it, or work scheduled on it) cannot work there; ``await agent.run(...)`` is the way to
    run on the caller's loop.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return _this_thread_runner(lane).run(coroutine)
    if running is _background:
        coroutine.close()
        raise RuntimeError(
            "run_sync() was called from code already running inside run_sync() (an async "
            "tool?): it would wait for itself; use `await agent.run(...)` there"
        )
    future = asyncio.run_coroutine_threadsafe(coroutine, _background_loop())
    try:
        return future.result()
    except BaseException:  # e.g. KeyboardInterrupt in a notebook: stop the run too
        future.cancel()
        raise


def _this_thread_runner(lane: str) -> asyncio.Runner:
    lanes: dict[str, asyncio.Runner] = _local.__dict__.setdefault("lanes", {})
    runner = lanes.get(lane)
    if runner is None:
        runner = lanes[lane] = asyncio.Runner()
        _runners.append(runner)
    return runner


def _background_loop() -> asyncio.AbstractEventLoop:
    """tooldeck's own loop in a daemon thread, started on first use."""
    global _background
    with _background_lock:
        if _background is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="tooldeck-run-sync", daemon=True
            )
            thread.start()
            _background = loop
        return _background


def _forget_background_loop() -> None:
    """A forked child has none of the parent's threads: its first call starts a new loop."""
    global _background
    _background = None


os.register_at_fork(after_in_child=_forget_background_loop)


@atexit.register
def _close_runners() -> None:
    for runner in _runners:
        runner.close()
    if _background is not None:
        _background.call_soon_threadsafe(_background.stop)
