"""W5 with and without a run log, side by side: does recording every run slow the loop?

    .venv/bin/python bench/runlog_w5.py              # 7 alternating rounds of 1,000 runs
    .venv/bin/python bench/runlog_w5.py --quick      # tiny counts (CI smoke)

Each measurement is a fresh process running the shared W5 workload (bench/anchors: 1,000
concurrent runs, a fake model sleeping 10 ms a turn, 3 tool rounds and an answer), with
``Agent(run_log=RunLog(path))`` on a new database or without a log; the order alternates
each round. With the log, the process then waits for every row to be written
(``RunLog.flush()``) and reports that wait and the rows written, so nothing is hidden
after the measured wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "anchors"))

import benchlib as B  # noqa: E402

import bench_tooldeck as T  # noqa: E402


def child(n: int, log_path: str | None) -> dict[str, float]:
    """One W5 measurement in this process (with a run log when ``log_path`` is given)."""
    log = None
    if log_path is not None:
        from tooldeck.runlog import RunLog

        log = T.Adapter.RUN_LOG = RunLog(log_path)
    cpu = time.process_time()
    figures: dict[str, float] = asyncio.run(B.w5_inproc(T.Adapter, n))
    if log is not None:
        started = time.perf_counter()
        log.close()
        figures["flush_s"] = time.perf_counter() - started
    figures["cpu_s"] = time.process_time() - cpu  # both threads, the warm-up run included
    if log_path is not None:
        with sqlite3.connect(log_path) as db:
            figures["rows"] = sum(
                db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("runs", "model_turns", "tool_calls")
            )
    return figures


def measure(n: int, logged: bool, folder: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", "--n", str(n)]
    if logged:
        command += ["--log", os.path.join(folder, f"w5-{time.monotonic_ns()}.db")]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.n, args.log)))
        return
    rounds, n = (2, 50) if args.quick else (args.rounds, args.n)
    load_before = os.getloadavg()
    off: list[dict[str, float]] = []
    on: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(rounds):
            for logged in (False, True) if index % 2 == 0 else (True, False):
                (on if logged else off).append(measure(n, logged, folder))
    load_after = os.getloadavg()

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    print(f"W5: {n:,} concurrent runs, {rounds} alternating rounds (medians)")
    print(f"{'':>14} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'flush s':>8} {'rows':>7}")
    print(
        f"{'no run log':>14} {median(off, 'wall_s'):>8.3f} {median(off, 'cpu_s'):>8.3f} "
        f"{median(off, 'peak_rss_mb'):>8.0f}"
    )
    print(
        f"{'run log':>14} {median(on, 'wall_s'):>8.3f} {median(on, 'cpu_s'):>8.3f} "
        f"{median(on, 'peak_rss_mb'):>8.0f} {median(on, 'flush_s'):>8.3f} "
        f"{median(on, 'rows'):>7.0f}"
    )
    ratio = median(on, "wall_s") / median(off, "wall_s")
    cpu_ratio = median(on, "cpu_s") / median(off, "cpu_s")
    print(f"run log / none: wall {ratio:.2f} (target <= 1.25), cpu {cpu_ratio:.2f}")
    print("wall s by round, none:", " ".join(f"{row['wall_s']:.3f}" for row in off))
    print("wall s by round, log: ", " ".join(f"{row['wall_s']:.3f}" for row in on))
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}")


if __name__ == "__main__":
    main()
