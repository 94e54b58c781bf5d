"""The call-rule cross-validation (bench/call_rule.py) on recorded forced turns."""

from __future__ import annotations

from bfcl_cases import bench_module
from tooldeck.eval import CaseResult

cv = bench_module("call_rule")


def forced(case_id: str, category: str, fit: float, score: float, correct: bool) -> CaseResult:
    expected_call = category != "irrelevance"
    return CaseResult(
        "local", f"bfcl:{category}", case_id, category, correct, "", expected_call, True, 1, 1,
        1.0, signals={"fit": fit, "call_score": score},
    )  # fmt: skip


RESULTS = [
    forced("simple_python_0", "simple_python", 0.9, 1.0, True),
    forced("simple_python_1", "simple_python", 0.8, -1.0, True),
    forced("simple_python_2", "simple_python", 0.6, 2.0, False),
    forced("simple_python_3", "simple_python", 0.5, 0.5, True),
    forced("irrelevance_0", "irrelevance", 0.85, 3.0, False),
    forced("irrelevance_1", "irrelevance", 0.55, 2.5, False),
    forced("irrelevance_2", "irrelevance", 0.3, -2.0, False),
    forced("irrelevance_3", "irrelevance", 0.7, 0.0, True),  # its call did not parse
]


def test_a_case_that_calls_keeps_its_forced_verdict_one_that_answers_is_right_only_without_a_call() -> (
    None
):
    rule = cv.Candidate("fit", 0.75, None)
    assert cv.outcome(RESULTS[0], rule) is True  # calls: the forced call was right
    assert cv.outcome(RESULTS[2], rule) is False  # answers where a call was expected
    assert cv.outcome(RESULTS[4], rule) is False  # calls where none was expected
    assert cv.outcome(RESULTS[5], rule) is True  # answers where none was expected
    both = cv.Candidate("fit and score", 0.75, 0.0)
    assert not both.calls(RESULTS[1])  # fit above, score below
    either = cv.Candidate("fit or score", 0.75, 0.0)
    assert either.calls(RESULTS[1])
    assert either.calls(RESULTS[3])
    assert str(both) == "fit > 0.75 and score > 0"


def test_the_best_rule_maximises_the_call_decision() -> None:
    assert cv.accuracy(RESULTS, cv.Candidate("fit", 0.75, None)) == {
        "simple_python": 0.5,
        "irrelevance": 0.75,
    }
    # By the call decision, four thresholds tie at 62.5% (0.4, 0.575, 0.75, 0.875).
    chosen = cv.best(RESULTS, "fit")
    assert chosen.fit == 0.75
    assert cv.decision(RESULTS, chosen) == 0.625
    # By BFCL's accuracy, five tie at 62.5% (0.4, 0.575, 0.65, 0.75, 0.875).
    assert cv.bfcl(RESULTS, cv.Candidate("fit", 0.65, None)) == 0.625
    assert cv.objective(RESULTS, chosen) == max(
        cv.objective(RESULTS, candidate) for candidate in cv.candidates(RESULTS, "fit")
    )


def test_folds_span_every_category_and_each_is_held_out_once() -> None:
    parts = cv.folds(RESULTS, 2)
    assert [[r.id for r in part] for part in parts] == [
        ["simple_python_0", "simple_python_1", "irrelevance_0", "irrelevance_1"],
        ["simple_python_2", "simple_python_3", "irrelevance_2", "irrelevance_3"],
    ]
    assert cv.case_range(parts[1]) == "simple_python 2–3, ..."
    lines = cv.cross_validate(RESULTS, 2, "fit")
    assert (
        lines[1]
        == "| held-out fold | rule fitted on the other folds | simple_python | irrelevance | mean "
        "| call decision |"
    )
    assert len(lines) == 6  # the title, the header and its rule, a row per fold, the pool
