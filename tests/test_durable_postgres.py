"""Several workers on one PostgreSQL share a queue of durable runs; one is killed midway and
the other finishes every run (real processes, a real PostgreSQL started by the tests)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbos import WorkflowStatus

from _durable_harness import DurableApp

RUNS = 200


@pytest.fixture
def app(tmp_path: Path, postgres_server: str) -> Iterator[DurableApp]:
    durable_app = DurableApp(tmp_path, db=postgres_server, schema=f"dbos_{uuid.uuid4().hex[:8]}")
    yield durable_app
    durable_app.close()


def finished(app: DurableApp) -> list[WorkflowStatus]:
    client = app.client()
    try:
        return list(client.list_workflows(status="SUCCESS", load_input=False))
    finally:
        client.destroy()


def pending_of(app: DurableApp, executor: str) -> set[str]:
    client = app.client()
    try:
        found = client.list_workflows(status="PENDING", executor_id=executor, load_input=False)
        return {status.workflow_id for status in found}
    finally:
        client.destroy()


def test_two_workers_drain_a_queue_and_the_survivor_finishes_a_killed_workers_runs(
    app: DurableApp,
) -> None:
    prefix = uuid.uuid4().hex[:8]
    enqueued = app.spawn("enqueue", executor="client", scenario="queue", run_id=prefix, runs=RUNS)
    assert app.output(enqueued) == {"enqueued": RUNS}
    env = {"NOTE_S": "0.5"}  # each run holds its worker long enough for the kill to land in one
    first = app.spawn("worker", executor="pg-a", scenario="queue", concurrency=8, env=env)
    app.spawn("worker", executor="pg-b", scenario="queue", concurrency=8, env=env)

    def both_working() -> bool:
        executors = Counter(status.executor_id for status in finished(app))
        return executors["pg-a"] > 0 and executors["pg-b"] > 0 and executors.total() >= RUNS // 3

    app.wait_until(both_working, "both workers to finish runs, a third of them in all")
    app.wait_until(lambda: bool(pending_of(app, "pg-a")), "the first worker to hold runs")
    app.kill(first)
    cut_off = pending_of(app, "pg-a")  # the killed worker's runs, unfinished
    assert cut_off, "the killed worker had no run in progress: the test proves nothing"
    recovered = app.output(app.spawn("recover", executor="ops", scenario="queue", dead="pg-a"))
    assert set(recovered["recovered"]) == cut_off

    app.wait_until(lambda: len(finished(app)) == RUNS, "every run to finish")
    results = finished(app)
    ids = [f"{prefix}-{index:03d}" for index in range(RUNS)]
    assert sorted(status.workflow_id for status in results) == ids
    assert {status.output.answer for status in results} == {"answer: x"}
    by_id = {status.workflow_id: status for status in results}
    assert {by_id[run_id].executor_id for run_id in cut_off} == {"pg-b"}

    done = Counter(line.split()[3] for line in app.lines() if line.startswith("done note"))
    started = Counter(line.split()[3] for line in app.lines() if line.startswith("start note"))
    for run_id in ids:
        if run_id in cut_off:  # at-least-once inside the step the kill fell in
            assert 1 <= done[run_id] <= 2, run_id
            assert 1 <= started[run_id] <= 2, run_id
        else:  # exactly once everywhere else
            assert done[run_id] == started[run_id] == 1, run_id
