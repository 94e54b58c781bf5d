"""The table of ``tasks:chained`` on real models, from stored result files (issue 38).

    PYTHONPATH=src python bench/code_mode_table.py "embedded=bench/code_mode_results/local.jsonl"

Per model and mode (``own``: plain tool calls; ``code``: code mode): cases, accuracy,
model requests, tool calls that ran (a program's each counted) and input/output tokens per
case, cases that hit the time limit, and in code mode the programs that called a tool.
"""

from __future__ import annotations

import sys

from tooldeck.eval import CaseResult, read_results


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
        "| tokens in / out per case | cases where a tool ran | timed out |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for given in sys.argv[1:]:
        label, _, path = given.rpartition("=")
        results = list(read_results(path).report.results)
        for mode in ("own", "code"):
            mine = [r for r in results if r.category == f"{mode}/chained"]
            if mine:
                print(row(label or path, mode, mine))


if __name__ == "__main__":
    main()
