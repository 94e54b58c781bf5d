"""Choose the local model's call rule by cross-validation over BFCL folds, from one forced run.

Under ``tool_choice="auto"`` the default weights decide "call or answer" before writing the
turn, then write it under a grammar of calls only (the same turn ``"required"`` writes,
same prompt, greedy) or of an answer only. So one run with ``--tool-choice required``
gives every case's outcome under every rule, without running the model again:

- the rule calls: the forced call's verdict (BFCL's rule);
- the rule answers: right exactly where the case expects no call.

The forced run records each case's two measures (``signals``: ``fit``, the embedding
similarity of the message and the best tool; ``call_score``, the model's log-odds of
calling). Folds: the cases of every category are cut into ``--folds`` consecutive ranges
(fold k holds the k-th range of each category), so each fold spans all categories. For
each fold the rule is fitted on the other folds and reported on the held-out fold only.

What the rule is fitted to is the decision it makes, scored as When2Call scores it: a call
where the case expects one (right or wrong arguments: the rule does not write them, and a
wrong answer is worse than a call), no call where none is expected; each category weighs
the same (``--objective decision``, the default; the middle threshold among ties). The
held-out fold's accuracy by BFCL's rules is reported beside it. ``--objective balanced``
weighs the call and the no-call categories as two halves instead, ``--objective bfcl``
fits BFCL's accuracy (where an answer in a call category is only as wrong as a wrong
call)::

    nice -n 15 .venv/bin/tooldeck eval bfcl:simple_python,multiple,live_simple,parallel \\
        bfcl:irrelevance,live_irrelevance --limit 100 --tool-choice required \\
        --out bench/bfcl_results/forced_cv.jsonl
    .venv/bin/python bench/call_rule.py bench/bfcl_results/forced_cv.jsonl --folds 5
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tooldeck.eval import CaseResult, read_results

Rule = Callable[[CaseResult], bool]
"""Whether a case's turn calls, from its measures."""


@dataclass(frozen=True)
class Candidate:
    """A rule of one family with its thresholds."""

    family: str
    fit: float | None
    score: float | None

    def calls(self, result: CaseResult) -> bool:
        fit = result.signals.get("fit", float("-inf"))
        score = result.signals.get("call_score", float("-inf"))
        above_fit = self.fit is None or fit > self.fit
        above_score = self.score is None or score > self.score
        if self.family == "fit or score":
            return fit > (self.fit or 0.0) or score > (self.score or 0.0)
        return above_fit and above_score

    def __str__(self) -> str:
        parts = [f"fit > {self.fit:g}" if self.fit is not None else ""]
        parts.append(f"score > {self.score:g}" if self.score is not None else "")
        joiner = " or " if self.family == "fit or score" else " and "
        return joiner.join(p for p in parts if p) or "always call"


def outcome(result: CaseResult, rule: Candidate) -> bool:
    if rule.calls(result):
        return result.correct
    return result.expected_call is False  # an answer: right only where no call is expected


def accuracy(results: Sequence[CaseResult], rule: Candidate) -> dict[str, float]:
    categories = list(dict.fromkeys(r.category for r in results))
    return {
        c: statistics.fmean(outcome(r, rule) for r in results if r.category == c)
        for c in categories
    }


def decision(results: Sequence[CaseResult], rule: Candidate) -> float:
    """How often the rule calls exactly where a call is expected, per category, averaged."""
    categories = list(dict.fromkeys(r.category for r in results))
    return statistics.fmean(
        statistics.fmean(rule.calls(r) is r.expected_call for r in results if r.category == c)
        for c in categories
    )


def balanced(results: Sequence[CaseResult], rule: Candidate) -> float:
    """The decision's mean over the call categories and over the no-call categories,
    averaged (each half weighs the same)."""
    halves = []
    for expected in (True, False):
        categories = list(dict.fromkeys(r.category for r in results if r.expected_call is expected))
        per_category = [
            statistics.fmean(rule.calls(r) is expected for r in results if r.category == category)
            for category in categories
        ]
        if per_category:
            halves.append(statistics.fmean(per_category))
    return statistics.fmean(halves)


def bfcl(results: Sequence[CaseResult], rule: Candidate) -> float:
    """The mean over categories of BFCL's accuracy."""
    return statistics.fmean(accuracy(results, rule).values())


OBJECTIVES: dict[str, Callable[[Sequence[CaseResult], Candidate], float]] = {
    "decision": decision,
    "balanced": balanced,
    "bfcl": bfcl,
}
objective = decision
"""What a rule is fitted to (``--objective`` changes it)."""


def thresholds(values: Sequence[float]) -> list[float]:
    """Midpoints between neighbouring values, and one below and above them all."""
    ordered = sorted(set(values))
    edges = [ordered[0] - 1, *ordered, ordered[-1] + 1]
    return [round((a + b) / 2, 4) for a, b in itertools.pairwise(edges)]


def candidates(results: Sequence[CaseResult], family: str) -> list[Candidate]:
    fits = thresholds([r.signals["fit"] for r in results])
    scores = thresholds([r.signals["call_score"] for r in results])
    if family == "fit":
        return [Candidate(family, t, None) for t in fits]
    if family == "score":
        return [Candidate(family, None, s) for s in scores]
    coarse_fits, coarse_scores = (
        fits[:: max(1, len(fits) // 40)],
        scores[:: max(1, len(scores) // 40)],
    )
    return [Candidate(family, t, s) for t in coarse_fits for s in coarse_scores]


def best(results: Sequence[CaseResult], family: str) -> Candidate:
    """The candidate with the best objective; the middle one among ties."""
    scored = [(objective(results, c), c) for c in candidates(results, family)]
    top = max(value for value, _ in scored)
    winners = [c for value, c in scored if value == top]
    return winners[len(winners) // 2]


def folds(results: Sequence[CaseResult], count: int) -> list[list[CaseResult]]:
    """Fold k: the k-th of ``count`` consecutive ranges of each category's cases."""
    made: list[list[CaseResult]] = [[] for _ in range(count)]
    for category in dict.fromkeys(r.category for r in results):
        rows = [r for r in results if r.category == category]
        for index, row in enumerate(rows):
            made[index * count // len(rows)].append(row)
    return made


def case_range(fold: Sequence[CaseResult]) -> str:
    """``cases 20-39``: the positions a fold holds in each category (by BFCL's order)."""
    first = fold[0].category
    numbers = [int(r.id.rsplit("_", 1)[1].split("-")[0]) for r in fold if r.category == first]
    return f"{first} {min(numbers)}–{max(numbers)}, ..." if numbers else ""


def cross_validate(results: Sequence[CaseResult], count: int, family: str) -> list[str]:
    parts = folds(results, count)
    categories = list(dict.fromkeys(r.category for r in results))
    lines = [
        f"#### {family}\n",
        "| held-out fold | rule fitted on the other folds | "
        + " | ".join(categories)
        + " | mean | call decision |",
        "|---|---|" + "---:|" * (len(categories) + 2),
    ]
    pooled: list[tuple[CaseResult, Candidate]] = []
    for index, held in enumerate(parts):
        training = [r for k, part in enumerate(parts) if k != index for r in part]
        rule = best(training, family)
        pooled.extend((r, rule) for r in held)
        shown = accuracy(held, rule)
        cells = " | ".join(f"{shown[c]:.0%}" for c in categories)
        mean = statistics.fmean(shown.values())
        decided = decision(held, rule)
        lines.append(
            f"| {index + 1} ({case_range(held)}) | {rule} | {cells} | {mean:.1%} | {decided:.1%} |"
        )
    right = {c: [outcome(r, rule) for r, rule in pooled if r.category == c] for c in categories}
    calls = {c: [rule.calls(r) for r, rule in pooled if r.category == c] for c in categories}
    cells = " | ".join(
        f"{statistics.fmean(right[c]):.0%} ({sum(calls[c])} calls)" for c in categories
    )
    lines.append(f"| all, each case held out | | {cells} | | |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="forced runs (tooldeck eval --out)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--objective", choices=sorted(OBJECTIVES), default="decision")
    args = parser.parse_args(argv)
    global objective
    objective = OBJECTIVES[args.objective]
    results = [r for path in args.results for r in read_results(path).results]
    results = [r for r in results if "fit" in r.signals and "call_score" in r.signals]
    for family in ("fit", "score", "fit and score", "fit or score"):
        print("\n".join(cross_validate(results, args.folds, family)), "\n")
        chosen = best(results, family)
        print(f"fitted on every fold: {chosen}; call decision {decision(results, chosen):.1%}\n")
    for fixed in (Candidate("fit", 0.75, None), Candidate("fit", None, None)):
        shown = accuracy(results, fixed)
        listed = ", ".join(f"{c} {v:.0%}" for c, v in shown.items())
        print(f"{fixed}: {listed}; call decision {decision(results, fixed):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
