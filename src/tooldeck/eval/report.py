"""``EvalReport``: the scored results of one or more models, summed up per model and category.

Per (model, category): cases, accuracy by BFCL's rule and by the strict rule, the call
decision (When2Call's view: did the first turn call exactly when it should?), calls made and
the share that were schema-valid, seconds per case, model requests, the tool calls that ran
(a code-mode program's each counted), tokens and cost where known, and the mean of each
user scorer. ``to_json`` is what ``tooldeck eval --json`` prints;
``tooldeck.eval.html.write_report`` writes the self-contained HTML report.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tooldeck.eval.results import CaseResult


@dataclass(frozen=True, slots=True)
class Summary:
    """One model on one category (or ``"all"``)."""

    model: str
    category: str
    cases: int
    accuracy: float
    strict_accuracy: float
    decision_cases: int
    """Cases that say whether a call is expected."""
    decision_accuracy: float | None
    calls: int
    schema_valid: float | None
    """Share of the calls made that were schema-valid (None: no call was made)."""
    mean_s: float
    median_s: float
    input_tokens: int | None
    output_tokens: int | None
    requests: int | None
    """Model requests of the cases that count them (results stored before they did not)."""
    tool_calls: int | None
    """Calls of the cases' tools that ran, each call of a code-mode program counted (None:
    results stored before they were counted)."""
    tokens_per_request: float | None
    """Input tokens per model request, over the cases that count both (the tools shown
    weigh most in it: ``bfcl:many_tools`` compares the ways of showing them)."""
    cost: float | None
    scores: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        """The row as JSON values."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Confusion:
    """The first turn's call decision of one model against what the cases expect."""

    model: str
    called_when_expected: int
    answered_when_expected: int
    """Should have called, answered instead."""
    called_when_not: int
    """Should have answered, called instead."""
    answered_when_not: int


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Every scored case of a run (or of several stored runs), in the order they were run."""

    results: tuple[CaseResult, ...]

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(r.model for r in self.results))

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys(r.category for r in self.results))

    def of(self, model: str) -> list[CaseResult]:
        """The results of one model."""
        return [r for r in self.results if r.model == model]

    def summary(self, overall: bool = True) -> list[Summary]:
        """A row per model and category, then (``overall``) one per model over all cases."""
        rows: list[Summary] = []
        for model in self.models:
            mine = self.of(model)
            categories = list(dict.fromkeys(r.category for r in mine))
            rows.extend(
                summarize(model, c, [r for r in mine if r.category == c]) for c in categories
            )
            if overall and len(categories) > 1:
                rows.append(summarize(model, "all", mine))
        return rows

    def confusion(self) -> list[Confusion]:
        """The call/no-call confusion of each model (cases that say what they expect)."""
        made = []
        for model in self.models:
            decided = [r for r in self.of(model) if r.expected_call is not None]
            counts = [
                sum(r.expected_call is expected and r.made_call is called for r in decided)
                for expected, called in ((True, True), (True, False), (False, True), (False, False))
            ]
            made.append(Confusion(model, *counts))
        return made

    def failures(self) -> list[CaseResult]:
        """The results that are wrong."""
        return [r for r in self.results if not r.correct]

    def merged(self, *others: EvalReport) -> EvalReport:
        """This report's results and those of ``others``; a case scored twice keeps the last."""
        by_key = {r.key: r for report in (self, *others) for r in report.results}
        return EvalReport(tuple(by_key.values()))

    def to_json(self) -> dict[str, Any]:
        """The summary rows and every case, as JSON values."""
        return {
            "models": self.models,
            "summary": [row.to_json() for row in self.summary()],
            "confusion": [asdict(row) for row in self.confusion()],
            "cases": [r.to_json() for r in self.results],
        }

    def markdown(self) -> str:
        """The summary as a Markdown table (what ``bench/`` prints)."""
        return markdown_table(self.summary())


def summarize(model: str, category: str, rows: Sequence[CaseResult]) -> Summary:
    """The figures of ``rows`` (one model's cases)."""
    calls = sum(r.calls for r in rows)
    decided = [r.decision_correct for r in rows if r.decision_correct is not None]
    names = list(dict.fromkeys(name for r in rows for name in r.scores))
    return Summary(
        model=model,
        category=category,
        cases=len(rows),
        accuracy=sum(r.correct for r in rows) / len(rows),
        strict_accuracy=sum(r.strictly_correct for r in rows) / len(rows),
        decision_cases=len(decided),
        decision_accuracy=sum(decided) / len(decided) if decided else None,
        calls=calls,
        schema_valid=sum(r.valid_calls for r in rows) / calls if calls else None,
        mean_s=statistics.fmean(r.seconds for r in rows),
        median_s=statistics.median(r.seconds for r in rows),
        input_tokens=_whole(_total([r.input_tokens for r in rows])),
        output_tokens=_whole(_total([r.output_tokens for r in rows])),
        requests=_whole(_total([r.requests for r in rows])),
        tool_calls=_whole(_total([r.tool_calls for r in rows])),
        tokens_per_request=_per_request(rows),
        cost=_total([r.cost for r in rows]),
        scores={n: statistics.fmean(r.scores[n] for r in rows if n in r.scores) for n in names},
    )


def _total(values: Sequence[float | None]) -> float | None:
    """The sum, when every value is known; None otherwise."""
    known = [v for v in values if v is not None]
    return sum(known) if known and len(known) == len(values) else None


def _per_request(rows: Sequence[CaseResult]) -> float | None:
    counted = [r for r in rows if r.requests and r.input_tokens is not None]
    requests = sum(r.requests or 0 for r in counted)
    return sum(r.input_tokens or 0 for r in counted) / requests if requests else None


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def markdown_table(rows: Sequence[Summary]) -> str:
    """Summary rows as a Markdown table."""
    lines = [
        "| model | category | cases | accuracy (BFCL) | strict | call decision | calls made "
        "| schema-valid calls | s/case (mean, median) | requests/case | tool calls/case "
        "| tokens in/out per case | input tokens/request |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.model} | {row.category} | {row.cases} | {row.accuracy:.1%} | "
            f"{row.strict_accuracy:.1%} | {percent(row.decision_accuracy)} | {row.calls} | "
            f"{percent(row.schema_valid)} | {row.mean_s:.2f}, {row.median_s:.2f} | "
            f"{per_case(row, row.requests)} | {per_case(row, row.tool_calls)} | "
            f"{tokens_per_case(row)} | {per_request(row)} |"
        )
    return "\n".join(lines)


def per_request(row: Summary) -> str:
    """Input tokens per request, ``1,234``, or ``–`` when not counted."""
    return "–" if row.tokens_per_request is None else f"{row.tokens_per_request:,.0f}"


def per_case(row: Summary, total: int | None) -> str:
    """A total over the row's cases, per case (``2.35``), or ``–`` when not counted."""
    return "–" if total is None else f"{total / row.cases:.2f}"


def tokens_per_case(row: Summary) -> str:
    """Input and output tokens per case, ``1,234 / 56``, or ``–`` when not counted."""
    if row.input_tokens is None or row.output_tokens is None:
        return "–"
    return f"{row.input_tokens / row.cases:,.0f} / {row.output_tokens / row.cases:,.0f}"


def percent(value: float | None) -> str:
    """``42.0%``, or ``–`` when there is no value."""
    return "–" if value is None else f"{value:.1%}"
