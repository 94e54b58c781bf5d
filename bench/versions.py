"""W1a and W5 of two versions of tooldeck side by side (a change's cost, or its gain).

Each round runs ``bench_tooldeck.py --only W1a,W5`` once per version, in fresh processes
whose ``PYTHONPATH`` puts that version's ``src`` first, alternating which goes first; the
figures are the medians over the rounds and the ratio after / before. The machine's speed
drifts, so compare only within one run of this script.

Run:  .venv/bin/python bench/versions.py BEFORE_SRC AFTER_SRC [--rounds 10] [--only W1a,W5,W3]
e.g.  git worktree add ../before <commit> && .venv/bin/python bench/versions.py ../before/src src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIGURES = {
    "W1a": ("W1a", "us_per_round", "µs per round"),
    "W5": ("W5", "wall_s", "s for 1,000 runs"),
    "W5 RSS": ("W5", "peak_rss_mb", "MB peak RSS"),
    "W3": ("W3", "import_ms", "ms to import tooldeck"),
    "W3 full": ("W3", "full_import_ms", "ms to import what the bench uses"),
}


def one_run(src: Path, only: str) -> dict[str, float]:
    """One process of the bench with ``src`` first on the path; its figures by name."""
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    done = subprocess.run(
        [sys.executable, str(HERE / "bench_tooldeck.py"), "--only", only],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    figures = {}
    for name, (workload, key, _) in FIGURES.items():
        if workload in result and key in result[workload]:
            figures[name] = float(result[workload][key])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the src folder of the version before")
    parser.add_argument("after", type=Path, help="the src folder of the version after")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--only", default="W1a,W5")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for round_ in range(args.rounds):
        order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
        for which in order:
            runs[which].append(one_run(getattr(args, which), args.only))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    print(f"| figure | before | after | after / before |  ({args.rounds} rounds, medians)")
    print("|---|---:|---:|---:|")
    for name, (_, _, unit) in FIGURES.items():
        values = {w: [r[name] for r in runs[w] if name in r] for w in runs}
        if not values["before"] or not values["after"]:
            continue
        before, after = statistics.median(values["before"]), statistics.median(values["after"])
        print(f"| {name}, {unit} | {before:.3g} | {after:.3g} | {after / before:.3f} |")


if __name__ == "__main__":
    main()
