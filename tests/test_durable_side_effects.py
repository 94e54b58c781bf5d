"""At-most-once side effects in durable runs: a process SIGKILLed inside (or after) a
``side_effects=True`` call, its run recovered by a new process; the side effects counted in
the app's log (real processes, a real SQLite system database).

Without ``side_effects`` DBOS runs a step that never finished again (at least once: see
test_durable_crash.py); with it, the call is not run blindly again."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from _durable_harness import DurableApp


@pytest.fixture
def app(tmp_path: Path) -> Iterator[DurableApp]:
    durable_app = DurableApp(tmp_path)
    yield durable_app
    durable_app.close()


def killed_then_recovered(app: DurableApp, scenario: str, hang: str, at: str) -> str:
    """Run ``scenario`` until the log shows ``at``, kill it, recover it; its answer."""
    run_id = uuid.uuid4().hex
    env = {"HANG_CHARGE": hang, "SLOW_S": "300" if hang == "none" else "0"}
    first = app.spawn("run", executor="worker-1", scenario=scenario, run_id=run_id, env=env)
    app.wait_until(lambda: app.logged(at), at)
    app.kill(first)
    second = app.spawn("serve", executor="worker-1", scenario=scenario, run_id=run_id)
    result = app.output(second)
    assert result["stop_reason"] == "answer"
    answer: str = result["answer"]
    return answer


def test_a_call_killed_after_its_effect_is_not_run_again(app: DurableApp) -> None:
    answer = killed_then_recovered(app, "charge", "after", "effect charge 5")

    counts = app.counts()
    assert counts["effect charge 5"] == 1
    assert counts["start charge 5"] == 1
    assert answer.startswith("answer: a,error[interrupted]: the call may have completed")
    assert answer.endswith(",c")


def test_a_call_killed_before_its_effect_is_not_run_blindly(app: DurableApp) -> None:
    answer = killed_then_recovered(app, "charge", "before", "start charge 5")

    counts = app.counts()
    assert counts["start charge 5"] == 1
    assert counts["effect charge 5"] == 0
    assert "error[interrupted]: the call may have completed" in answer


def test_reconcile_finds_the_effect_of_the_killed_call(app: DurableApp) -> None:
    answer = killed_then_recovered(app, "charge_checked", "after", "effect charge 5")

    assert app.counts()["effect charge 5"] == 1
    assert answer == "answer: a,charged (found by reconcile),c"


def test_reconcile_that_finds_nothing_runs_the_call(app: DurableApp) -> None:
    answer = killed_then_recovered(app, "charge_checked", "before", "start charge 5")

    counts = app.counts()
    assert counts["start charge 5"] == 2
    assert counts["effect charge 5"] == 1
    assert answer == "answer: a,charged 5,c"


def test_a_completed_call_is_read_back_not_run_again(app: DurableApp) -> None:
    answer = killed_then_recovered(app, "charge", "none", "start slow c")

    counts = app.counts()
    assert counts["start charge 5"] == counts["effect charge 5"] == 1
    assert answer == "answer: a,charged 5,c"
