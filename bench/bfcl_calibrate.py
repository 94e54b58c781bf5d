"""Calibrate LocalModel's ``CallRule.min_fit`` on BFCL's development split; print the trade-off.

The development split is ``simple_python`` cases 101-200 and ``irrelevance`` cases 51-100;
the report split (the first 100 and the first 50) is never used here. Each case runs once
with ``tool_choice="required"``, recording how well the question fits the best-matching
tool (the model's embeddings), the model's call score, and the verdict on the call it
writes. Under ``tool_choice="auto"`` a first turn calls exactly when its fit is above the
threshold, and then writes that same call under the same grammar, so one run gives every
case's outcome at every threshold:

- fit above the threshold: the forced call's verdict;
- otherwise an answer: wrong where a call was expected, right in ``irrelevance``.

The sweep prints each category's accuracy (BFCL's rule) for a range of thresholds, and
the threshold with the best sum of the two (the middle one when several tie)::

    nice .venv/bin/python bench/bfcl_calibrate.py --out bench/bfcl_results/dev_forced.jsonl
    # about 10 minutes per 100 cases on 2 idle cores; on a busy machine add --threads 1
    .venv/bin/python bench/bfcl_calibrate.py --sweep bench/bfcl_results/dev_forced.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bfcl_eval import DATA, CaseResult, Sink, load_cases, run_tooldeck
from tooldeck.models.local import LocalModel

DEV_SPLIT = (("simple_python", 100, 100), ("irrelevance", 50, 50))
"""(category, cases skipped, cases taken): the development split."""


@dataclass(frozen=True)
class Point:
    """Accuracy on each category of the split when turns call above ``threshold``."""

    threshold: float
    accuracy: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.accuracy.values())


def outcome(result: CaseResult, threshold: float, measure: str = "fit") -> bool:
    """Whether a case is right when its turn calls only when ``measure`` is above ``threshold``
    (``"fit"``, or ``"call_score"`` to see what the model's own log-odds would do)."""
    value = result.fit if measure == "fit" else result.call_score
    if value is not None and value > threshold:
        return result.correct
    return result.category == "irrelevance"  # an answer: right only where no call fits


def values(results: Sequence[CaseResult], measure: str) -> list[float]:
    found = [r.fit if measure == "fit" else r.call_score for r in results]
    return [value for value in found if value is not None]


def point(results: Sequence[CaseResult], threshold: float, measure: str = "fit") -> Point:
    categories = sorted({r.category for r in results})
    accuracy = {}
    for category in categories:
        rows = [r for r in results if r.category == category]
        accuracy[category] = sum(outcome(r, threshold, measure) for r in rows) / len(rows)
    return Point(threshold, accuracy)


def best(results: Sequence[CaseResult], measure: str = "fit") -> Point:
    """The threshold with the best sum of accuracies (the middle of the best ones on a tie).

    Candidates lie halfway between neighbouring values, so each is as far as it can be
    from the cases on either side.
    """
    ordered = sorted(set(values(results, measure)))
    if not ordered:
        raise ValueError(f"no case has a {measure}: run a LocalModel with --out first")
    edges = [ordered[0] - 1, *ordered, ordered[-1] + 1]
    candidates = [round((a + b) / 2, 4) for a, b in itertools.pairwise(edges)]
    points = [point(results, t, measure) for t in candidates]
    top = max(p.total for p in points)
    winners = [p for p in points if p.total == top]
    return winners[len(winners) // 2]


def curve(results: Sequence[CaseResult], step: float, measure: str = "fit") -> list[Point]:
    found = values(results, measure)
    low, high = math.floor(min(found) / step), math.ceil(max(found) / step)
    return [point(results, round(n * step, 4), measure) for n in range(low, high + 1)]


def table(points: Sequence[Point]) -> str:
    categories = list(points[0].accuracy)
    lines = [
        "| threshold | " + " | ".join(categories) + " | sum |",
        "|---:|" + "---:|" * (len(categories) + 1),
    ]
    for p in points:
        cells = " | ".join(f"{p.accuracy[c]:.0%}" for c in categories)
        lines.append(f"| {p.threshold:g} | {cells} | {p.total:.2f} |")
    return "\n".join(lines)


def read(path: Path) -> list[CaseResult]:
    with path.open(encoding="utf-8") as lines:
        return [CaseResult(**json.loads(line)) for line in lines if line.strip()]


async def run_split(model: LocalModel, max_tokens: int, sink: Sink) -> list[CaseResult]:
    results = []
    for category, start, limit in DEV_SPLIT:
        for case in load_cases(DATA, [category], start, limit):
            result = await run_tooldeck(model, case, max_tokens, tool_choice="required")
            results.append(sink.add(result))
    await model.aclose()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sweep", type=Path, nargs="+", help="only sweep the cases of these JSON-lines files"
    )
    parser.add_argument("--out", type=Path, help="write the forced cases here (JSON lines)")
    parser.add_argument("--model", default=None, help="a GGUF file (default: the default weights)")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument(
        "--threads", type=int, default=None, help="n_threads (1 does better on a busy machine)"
    )
    args = parser.parse_args(argv)
    if args.sweep:
        results = [result for path in args.sweep for result in read(path)]
    else:
        sink = Sink(args.out)
        model = LocalModel(args.model, n_threads=args.threads)
        results = asyncio.run(run_split(model, args.max_tokens, sink))
        sink.close({"split": DEV_SPLIT, "max_tokens": args.max_tokens})
    for measure, step in (("fit", 0.05), ("call_score", 0.5)):
        chosen = best(results, measure)
        print(f"## calling when {measure} is above the threshold\n")
        print(table(curve(results, step, measure)), "\n")
        print(f"best sum: threshold {chosen.threshold:g}\n{table([chosen])}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
