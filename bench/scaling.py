"""How tooldeck's cost grows with work: W5 at 100 / 1,000 / 10,000 concurrent runs, and W1
with conversations of 10 and 200 tool rounds.

    .venv/bin/python bench/scaling.py            # full (~1 min)
    .venv/bin/python bench/scaling.py --quick    # tiny counts (CI smoke)

W5 runs each size in a fresh process (peak RSS is per process). W1 reports the cost of a
round at both history lengths: if the loop re-converted or re-validated the history each
round, the 200-round figure would be far above the 10-round one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "anchors"))

import bench_tooldeck as T  # noqa: E402


def w5(n: int) -> dict[str, float]:
    command = [sys.executable, str(HERE / "bench_tooldeck.py"), "--w5-inproc", "--w5-n", str(n)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def w1(rounds: int, runs: int, inline: bool) -> float:
    """Median microseconds per tool round for a conversation of ``rounds`` rounds."""
    T.Adapter.INLINE = inline
    run = T.Adapter.setup_loop(k=rounds, delay=0.0, async_tool=False)
    for _ in range(3):
        await run()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        assert await run() == "done"
        samples.append((time.perf_counter() - started) / rounds * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = (20, 100) if args.quick else (100, 1_000, 10_000)
    print(f"{'W5 concurrent runs':>20} {'wall s':>8} {'per run ms':>11} {'peak MB':>8}")
    for n in sizes:
        result = w5(n)
        print(
            f"{n:>20,} {result['wall_s']:>8.3f} {result['wall_s'] / n * 1e3:>11.3f} "
            f"{result['peak_rss_mb']:>8.0f}"
        )
    runs = 3 if args.quick else 40
    print(f"\n{'W1 history (rounds)':>20} {'thread us/round':>16} {'inline us/round':>16}")
    for rounds in (10, 200):
        threaded = asyncio.run(w1(rounds, runs, inline=False))
        inline = asyncio.run(w1(rounds, runs, inline=True))
        print(f"{rounds:>20} {threaded:>16.0f} {inline:>16.0f}")


if __name__ == "__main__":
    main()
