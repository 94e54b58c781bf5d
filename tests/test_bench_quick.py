"""The benchmark suite still runs (tiny counts; CI proves it works, it does not time it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_compare_quick_mode_prints_every_workload() -> None:
    output = run("compare.py", "--quick")
    for row in (
        "W1 loop",
        "W1a loop",
        "W2 8 parallel",
        "W3 import",
        "W4 tool",
        "W5 1,000",
        "W5 peak",
    ):
        assert row in output
    assert "W1 with @tool(inline=True):" in output
    assert "quick mode" in output


def test_scaling_quick_mode_reports_both_history_lengths() -> None:
    w5_table, w1_table = run("scaling.py", "--quick").strip().split("\n\n")
    w5 = {row.split()[0]: [float(x) for x in row.split()[1:]] for row in w5_table.splitlines()[1:]}
    w1 = {row.split()[0]: [float(x) for x in row.split()[1:]] for row in w1_table.splitlines()[1:]}
    assert set(w5) == {"20", "100"}
    assert all(len(values) == 3 and all(v > 0 for v in values) for values in w5.values())
    assert set(w1) == {"10", "200"}
    assert all(len(values) == 2 and all(v > 0 for v in values) for values in w1.values())


def test_hop_reports_both_thread_round_trips() -> None:
    import json

    figures = json.loads(run("hop.py").strip().splitlines()[-1])
    assert set(figures) == {"asyncio_to_thread_us", "tooldeck_run_in_thread_us"}
    assert all(value > 0 for value in figures.values())


def test_session_bench_worker_measures_every_tooldeck_store(
    tmp_path: Path, postgres_dsn: str
) -> None:
    output = run("sessions.py", "--quick", "--worker", "tooldeck", str(tmp_path), postgres_dsn)
    figures = json.loads(output)
    assert sorted(figures) == ["PostgreSQL", "SQLite (FULL)", "SQLite (NORMAL)"]
    for store in figures.values():
        assert sorted(store) == [
            "append_cpu_us", "append_us", "first_load_cpu_ms", "first_load_ms",
            "load_cpu_ms", "load_ms", "object_load_cpu_ms", "object_load_ms",
        ]  # fmt: skip


def test_runlog_w5_quick_mode_compares_with_and_without_a_log() -> None:
    output = run("runlog_w5.py", "--quick")
    assert "no run log" in output
    assert "run log / none: wall " in output
    rows = next(line for line in output.splitlines() if line.strip().startswith("run log "))
    assert rows.split()[-1] == str(50 * 8 + 8)  # 50 runs of 8 rows and the warm-up run
