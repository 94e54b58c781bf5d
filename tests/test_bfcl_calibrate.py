"""The call-threshold calibration (bench/bfcl_calibrate.py) on recorded forced turns."""

from __future__ import annotations

from pathlib import Path

from bfcl_cases import bench_module

calibration = bench_module("bfcl_calibrate")
evaluation = bench_module("bfcl_eval")


def forced(case_id: str, category: str, fit: float, correct: bool) -> object:
    return evaluation.CaseResult(
        case_id, category, "tooldeck", correct, "", 1, 1, 1.0, call_score=-fit, fit=fit
    )


RESULTS = [
    forced("s1", "simple_python", 3.0, True),
    forced("s2", "simple_python", 2.0, True),
    forced("s3", "simple_python", 1.0, False),
    forced("s4", "simple_python", 0.5, True),
    forced("i1", "irrelevance", 2.5, False),
    forced("i2", "irrelevance", 0.8, False),
    forced("i3", "irrelevance", -1.0, False),
    forced("i4", "irrelevance", 1.2, True),  # its call did not parse: BFCL counts no call
]


def test_a_case_above_the_threshold_keeps_its_forced_verdict_below_it_answers() -> None:
    assert calibration.outcome(RESULTS[0], 2.9) is True
    assert calibration.outcome(RESULTS[0], 3.0) is False  # a call needs a fit above it
    assert calibration.outcome(RESULTS[4], 2.6) is True  # an answer is right in irrelevance
    assert calibration.outcome(RESULTS[4], 2.4) is False
    # The same case judged by the model's own log-odds (here the opposite of its fit).
    assert calibration.outcome(RESULTS[0], -3.5, "call_score") is True
    assert calibration.outcome(RESULTS[0], -2.5, "call_score") is False


def test_the_sweep_picks_the_best_sum_between_two_scores() -> None:
    point = calibration.point(RESULTS, 1.5)
    assert point.accuracy == {"irrelevance": 0.75, "simple_python": 0.5}
    # Halfway points -0.25, 0.9, 1.1, 1.6 and 2.75 all sum to 1.25: the middle one is taken.
    chosen = calibration.best(RESULTS)
    assert (chosen.threshold, chosen.total) == (1.1, 1.25)


def test_the_curve_table_and_a_round_trip_through_json_lines(tmp_path: Path) -> None:
    sink = evaluation.Sink(tmp_path / "forced.jsonl")
    for result in RESULTS:
        sink.add(result)
    sink.close({})
    again = calibration.read(tmp_path / "forced.jsonl")
    assert [r.fit for r in again] == [r.fit for r in RESULTS]
    text = calibration.table(calibration.curve(again, step=1.0))
    assert "| threshold | irrelevance | simple_python | sum |" in text
    assert "| 1 | 75% | 50% | 1.25 |" in text
