"""Score a model's tool calling: BFCL's categories and your own cases, one report for all.

    from tooldeck.eval import load_suite, run_eval

    cases = load_suite("bfcl:simple_python", limit=20) + load_suite("my_cases.yaml")
    report = await run_eval(cases, ["local", "openai:gpt-4.1-mini"])
    print(report.markdown())
    write_report(report, "eval.html")  # tooldeck.eval.html; plots need the eval extra

Each case is run through ``tooldeck.Agent`` and scored: calls by BFCL's AST rules (exact
names and types, normalised strings, optional parameters, any order in parallel cases), the
call/no-call decision on its own (as When2Call scores it), schema-valid calls, seconds,
tokens and cost where known, and the user's own scorers. ``tooldeck eval`` is the command.
The BFCL data ships with the package (Apache-2.0; ``tooldeck/eval/bfcl/data``).
"""

from __future__ import annotations

from tooldeck.eval.bfcl import bfcl_case, bfcl_suite
from tooldeck.eval.casefile import load_case_file
from tooldeck.eval.cases import (
    EvalCase,
    ExpectAnswer,
    Expectation,
    ExpectCalls,
    ExpectDecision,
    ExpectOutput,
)
from tooldeck.eval.errors import CaseFileError, ResultFileError, UnknownSuite
from tooldeck.eval.report import Confusion, EvalReport, Summary
from tooldeck.eval.results import CaseResult
from tooldeck.eval.runner import Contestant, EvalSettings, Scorer, run_case, run_eval
from tooldeck.eval.store import ResultWriter, StoredRuns, read_results
from tooldeck.eval.suites import load_suite

__all__ = [
    "CaseFileError",
    "CaseResult",
    "Confusion",
    "Contestant",
    "EvalCase",
    "EvalReport",
    "EvalSettings",
    "ExpectAnswer",
    "ExpectCalls",
    "ExpectDecision",
    "ExpectOutput",
    "Expectation",
    "ResultFileError",
    "ResultWriter",
    "Scorer",
    "StoredRuns",
    "Summary",
    "UnknownSuite",
    "bfcl_case",
    "bfcl_suite",
    "load_case_file",
    "load_suite",
    "read_results",
    "run_case",
    "run_eval",
]
