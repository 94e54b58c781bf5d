"""The table of ``tasks:chained`` on real models, from stored result files (issue 38).

    PYTHONPATH=src python bench/code_mode_table.py "embedded=bench/code_mode_results/local.jsonl"

Per model and mode (``own``: plain tool calls; ``code``: code mode): cases, accuracy,
model requests, tool calls that ran (a program's each counted) and input/output tokens per
case, cases that hit the time limit, and the cases where a tool ran. Each stored answer is
checked again against the suite's current answer patterns.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from tooldeck.eval import CaseResult, ExpectAnswer, read_results
from tooldeck.eval.chained import TASKS


def checked_again(result: CaseResult) -> CaseResult:
    """The stored answer checked against the suite's current pattern (made stricter after a
    run: an answer listing every city named the warmest one too)."""
    if result.error:
        return result
    task = next(task for task in TASKS if result.id.endswith(f"/{task.id}"))
    problem = ExpectAnswer(matches=task.answer).problem(result.text)
    return replace(result, correct=not problem, reason=problem)


def row(label: str, mode: str, results: list[CaseResult]) -> str:
    n = len(results)

    def per_case(field: str, digits: int = 2) -> str:
        values = [getattr(r, field) for r in results if getattr(r, field) is not None]
        return f"{sum(values) / n:,.{digits}f}" if values else "–"

    right = sum(r.correct for r in results)
    timed_out = sum("max_duration_s" in r.error for r in results)
    calling = sum(bool(r.tool_calls) for r in results)
    tokens = f"{per_case('input_tokens', 0)} / {per_case('output_tokens', 0)}"
    return (
        f"| {label} | {mode} | {n} | {right / n:.0%} ({right}/{n}) | {per_case('requests')} | "
        f"{per_case('tool_calls')} | {tokens} | {calling}/{n} | {timed_out} |"
    )


def main() -> None:
    print(
        "| model | mode | cases | accuracy | requests/case | tool calls/case "
        "| tokens in / out per case | cases where a tool was called | timed out |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for given in sys.argv[1:]:
        label, _, path = given.rpartition("=")
        results = [checked_again(r) for r in read_results(path).report.results]
        for mode in ("own", "code"):
            mine = [r for r in results if r.category == f"{mode}/chained"]
            if mine:
                print(row(label or path, mode, mine))


if __name__ == "__main__":
    main()
