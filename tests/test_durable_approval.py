"""A paused durable run waits without its process: approved later from another process,
it is finished by a worker (real processes, a real SQLite system database)."""

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


def test_a_run_approved_from_another_process_after_its_worker_exited(app: DurableApp) -> None:
    run_id = uuid.uuid4().hex
    paused = app.output(app.spawn("run", executor="worker-1", scenario="approval", run_id=run_id))
    assert paused == {
        "run_id": run_id,
        "answer": "",
        "stop_reason": "paused",
        "pending": ["call_0_5"],
    }
    assert app.counts()["start pay 5"] == 0  # the worker that started the run has exited

    decided = app.output(app.spawn("decide", executor="web", scenario="approval", run_id=run_id))
    assert decided == {"pause": 1, "decided": ["call_0_5"]}
    assert app.counts()["start pay 5"] == 0  # the approver only delivers the decision

    result = app.output(app.spawn("serve", executor="worker-1", scenario="approval", run_id=run_id))

    assert result == {
        "run_id": run_id,
        "answer": "answer: a,paid 5",
        "stop_reason": "answer",
        "pending": [],
    }
    counts = app.counts()
    assert counts["start note a"] == counts["start pay 5"] == counts["done pay 5"] == 1
    assert counts["model start 0"] == counts["model start 2"] == 1
    # In step-id order: the approved call runs after the wait, at the id reserved for it
    # when the model's turn arrived.
    assert app.steps(run_id) == [
        "app-approval.model",
        "app-approval.tool:note:call_0_a",
        "app-approval.tool:pay:call_0_5",
        "DBOS.setEvent",  # tooldeck.pause.1: the paused result
        "DBOS.setEvent",  # tooldeck.waiting = 1
        "DBOS.recv",
        "DBOS.sleep",  # the wait's deadline
        "DBOS.setEvent",  # tooldeck.waiting = 0
        "app-approval.model",
    ]


def test_a_run_approval_holds_after_the_worker_is_killed_and_the_run_recovered(
    app: DurableApp,
) -> None:
    run_id = uuid.uuid4().hex
    paused = app.output(
        app.spawn("run", executor="worker-1", scenario="approval_run", run_id=run_id)
    )
    assert paused["pending"] == ["call_0_5"]
    scoped = {"APPROVE_SCOPE": "run"}
    decide = app.spawn("decide", executor="web", scenario="approval_run", run_id=run_id, env=scoped)
    assert app.output(decide) == {"pause": 1, "decided": ["call_0_5"]}

    # the worker pays 5, then is killed in the charge of the next turn
    hanging = {"HANG_CHARGE": "before"}
    first = app.spawn(
        "serve", executor="worker-1", scenario="approval_run", run_id=run_id, env=hanging
    )
    app.wait_until(lambda: app.logged("start charge 6"), "start charge 6")
    app.kill(first)
    result = app.output(
        app.spawn("serve", executor="worker-1", scenario="approval_run", run_id=run_id)
    )

    # recovered, the run still remembers the approval: pay 7 runs without another pause
    assert result["stop_reason"] == "answer"
    assert result["pending"] == []
    counts = app.counts()
    assert counts["done pay 5"] == counts["done pay 7"] == 1
    assert app.steps(run_id).count("DBOS.recv") == 1  # one pause only
