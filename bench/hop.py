"""The floor under W1: what one round trip to a worker thread costs on this machine.

    .venv/bin/python bench/hop.py

Times 2,000 sequential round trips of a no-op function from an event loop to a worker
thread and back: with asyncio's own ``asyncio.to_thread`` (the default executor), and with
tooldeck's ``run_in_thread`` (the pool sync tools run in). W1 (a sync tool in a thread) costs
about W1 inline (the same loop with no thread) plus one of these.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time

from tooldeck.tools._threads import run_in_thread


def noop() -> None:
    return None


async def median_us(hop: object, count: int = 2000) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await hop()  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


async def main() -> dict[str, float]:
    to_thread = lambda: asyncio.to_thread(noop)  # noqa: E731
    ours = lambda: run_in_thread(noop)  # noqa: E731
    for hop in (to_thread, ours):
        await median_us(hop, 200)  # warm the threads
    return {
        "asyncio_to_thread_us": await median_us(to_thread),
        "tooldeck_run_in_thread_us": await median_us(ours),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
