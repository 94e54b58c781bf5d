"""The worker threads sync tools run in, shared by every run and event loop.

One pool for the process (not asyncio's per-loop default executor) so that a ``run_sync``
does not start and join threads on every call.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

_pool: ThreadPoolExecutor | None = None


def tool_threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        workers = min(32, (os.cpu_count() or 1) + 4)
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tooldeck-tool")
    return _pool
