"""Running a coroutine from synchronous code, cheaply and repeatably.

Each thread keeps one event loop for its synchronous calls, so a second ``run_sync`` does
not pay for a new loop, and clients bound to a loop (HTTP connection pools) keep working.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()
_runners: list[asyncio.Runner] = []


def run_sync(coroutine: Coroutine[Any, Any, T], *, lane: str = "main") -> T:
    """Run ``coroutine`` to completion on this thread's loop; refuse inside a running loop.

    ``lane`` names another loop of this thread, for callers that change their loop (DBOS
    gives the loops it runs on its own default executor, gone once DBOS is destroyed).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coroutine.close()
        raise RuntimeError(
            "run_sync() cannot be called from a running event loop (e.g. in async code or "
            "Jupyter); use `await agent.run(...)` instead"
        )
    lanes: dict[str, asyncio.Runner] = _local.__dict__.setdefault("lanes", {})
    runner = lanes.get(lane)
    if runner is None:
        runner = lanes[lane] = asyncio.Runner()
        _runners.append(runner)
    return runner.run(coroutine)


@atexit.register
def _close_runners() -> None:
    for runner in _runners:
        runner.close()
