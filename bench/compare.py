"""One command: tooldeck beside the other agent libraries, alternating, with ratios.

    .venv/bin/python bench/compare.py               # full run, ~15-25 min
    .venv/bin/python bench/compare.py --rounds 1    # a quick look
    .venv/bin/python bench/compare.py --quick       # tooldeck only, tiny counts (CI smoke)

The other libraries run from their own virtual environments ($BENCH_VENVS/NAME, made by
bench/setup_venvs.sh); a missing one is skipped. The vendored driver bench/anchors/run_all.py
does the alternating runs; this script adds tooldeck to it and prints one table with
tooldeck's ratio to the best of the others (below 1 means tooldeck is faster or smaller).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ANCHORS = HERE / "anchors"
VENVS = Path(os.environ.get("BENCH_VENVS", Path.home() / ".cache/tooldeck-bench/venvs"))
OTHERS = ("openai_agents", "pydantic_ai", "agent_framework")
OURS = ("tooldeck", "tooldeck_inline")

# (label, phase, key, sub-key, unit, target for tooldeck or None)
ROWS: tuple[tuple[str, str, str, str, str, float | None], ...] = (
    ("W1 loop, sync tool in a thread", "A", "W1", "us_per_round", "us/round", 150),
    ("W1a loop, async tool", "A", "W1a", "us_per_round", "us/round", 30),
    ("W2 8 parallel 50 ms tools", "A", "W2", "ms_median", "ms", 52),
    ("W3 import", "B", "W3", "import_ms", "ms", 60),
    ("W4 tool + schema build", "A", "W4", "us_per_tool", "us/tool", 300),
    ("W5 1,000 concurrent runs", "C", "W5", "wall_s", "s", 0.4),
    ("W5 peak RSS", "C", "W5", "peak_rss_mb", "MB", 60),
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--w5-rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tooldeck only, tiny counts")
    parser.add_argument("--out", default=str(HERE / "results.json"))
    args = parser.parse_args()
    results = quick() if args.quick else full(args.rounds, args.w5_rounds, args.out)
    print_table(results, judge=not args.quick)
    if args.quick:
        print("quick mode: tiny counts (W5 with 50 runs) prove the suite runs; not figures")


def quick() -> dict[str, dict[str, list[float]]]:
    """Every workload once with tiny counts: proves the suite runs, measures nothing."""
    figures: dict[str, dict[str, list[float]]] = {}
    for name in OURS:
        command = [
            sys.executable,
            str(HERE / f"bench_{name}.py"),
            "--w1-runs",
            "5",
            "--w1-warmup",
            "2",
            "--w2-runs",
            "2",
            "--w3-n",
            "1",
            "--w4-n",
            "20",
            "--w5-n",
            "50",
        ]
        if name == "tooldeck_inline":
            command += ["--only", "W1"]
        output = run_json(command)
        figures[name] = {
            f"{key}.{sub}": [value]
            for _, _, key, sub, _, _ in ROWS
            if key in output and sub in output[key]
            for value in [output[key][sub]]
        }
    return figures


def full(rounds: int, w5_rounds: int, out: str) -> dict[str, dict[str, list[float]]]:
    present = [name for name in OTHERS if (VENVS / name / "bin" / "python").exists()]
    missing = sorted(set(OTHERS) - set(present))
    if missing:
        print(f"skipping (no venv in {VENVS}; run bench/setup_venvs.sh): {', '.join(missing)}")
    command = [
        sys.executable,
        str(ANCHORS / "run_all.py"),
        "--rounds",
        str(rounds),
        "--w5-rounds",
        str(w5_rounds),
        "--frameworks",
        ",".join(present),
        "--out",
        out,
    ]
    for name in OURS:
        command += ["--add", f"{name}=tooldeck:{sys.executable}:{HERE / f'bench_{name}.py'}"]
    env = {**os.environ, "BENCH_VENVS": str(VENVS), "BENCH_OUT": tempfile.gettempdir()}
    subprocess.run(command, check=True, env=env)
    return collect(json.loads(Path(out).read_text()))


def collect(raw: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Per library, per figure: the per-round values (medians are taken when printing)."""
    figures: dict[str, dict[str, list[float]]] = {}
    for phase in ("A", "C"):
        for label, runs in raw.get(phase, {}).items():
            if label.endswith("+notrace"):
                continue  # the libraries' defaults are what users get
            for run in runs:
                for _, row_phase, key, sub, _, _ in ROWS:
                    source = run.get(key) if phase == "A" else run
                    if row_phase == phase and isinstance(source, dict) and sub in source:
                        figures.setdefault(label, {}).setdefault(f"{key}.{sub}", []).append(
                            source[sub]
                        )
    for name, samples in raw.get("B", {}).items():
        imports = [s for sample in samples for s in sample["raw_import_s"]]
        bare = [s for sample in samples for s in sample["raw_pass_s"]]
        figures.setdefault(name, {})["W3.import_ms"] = [
            1e3 * (statistics.median(imports) - statistics.median(bare))
        ]
    return figures


def print_table(figures: dict[str, dict[str, list[float]]], *, judge: bool = True) -> None:
    names = [n for n in (*OURS, *OTHERS) if n in figures]
    others = [n for n in names if n not in OURS]
    header = ["workload", *names, "ratio", "target"]
    rows = [header]
    for label, _, key, sub, unit, target in ROWS:
        medians = {n: statistics.median(v) for n in names if (v := figures[n].get(f"{key}.{sub}"))}
        best_other = min((medians[n] for n in others if n in medians), default=None)
        ours = medians.get("tooldeck")
        ratio = f"{ours / best_other:.2f}" if ours is not None and best_other else "-"
        verdict = "-"
        if judge and target is not None and ours is not None:
            met = ours <= target
            verdict = f"{'<=' if met else '> '} {target:g} {'ok' if met else 'MISSED'}"
        cells = [
            f"{medians[n]:.{2 if unit == 's' else 0}f}" if n in medians else "-" for n in names
        ]
        rows.append([f"{label} ({unit})", *cells, ratio, verdict])
    inline = figures.get("tooldeck_inline", {}).get("W1.us_per_round")
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    if inline:
        print(
            f"W1 with @tool(inline=True): {statistics.median(inline):.0f} us/round (target <= 30)"
        )
    print("ratio = tooldeck / best of the others (lower is better); medians over rounds")


def run_json(command: list[str]) -> dict[str, Any]:
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    main()
