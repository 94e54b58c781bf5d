"""Durable runs survive SIGKILL: a new process finishes the run, completed steps are not
repeated (real processes, a real SQLite system database, no mocks)."""

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


def test_killed_while_a_tool_sleeps_the_run_finishes_in_a_new_process(app: DurableApp) -> None:
    run_id = uuid.uuid4().hex
    first = app.spawn(
        "run", executor="worker-1", scenario="parallel", run_id=run_id, env={"SLOW_S": "300"}
    )
    finished = ["app-parallel.tool:note:call_0_a", "app-parallel.tool:note:call_0_b"]
    app.wait_until(
        lambda: app.logged("start slow c") and app.recorded(run_id, finished),
        "the two quick calls recorded while the slow one sleeps",
    )
    app.kill(first)

    second = app.spawn(
        "serve", executor="worker-1", scenario="parallel", run_id=run_id, env={"SLOW_S": "0"}
    )
    result = app.output(second)

    assert result == {
        "run_id": run_id,
        "answer": "answer: a,b,c",
        "stop_reason": "answer",
        "pending": [],
    }
    counts = app.counts()
    # Completed steps ran exactly once, across both processes; the call that was running
    # when the process died ran again from its start (at-least-once inside a step).
    assert counts["start note a"] == counts["done note a"] == 1
    assert counts["start note b"] == counts["done note b"] == 1
    assert counts["start slow c"] == 2
    assert counts["done slow c"] == 1
    assert counts["model start 0"] == counts["model done 0"] == 1
    assert counts["model start 3"] == counts["model done 3"] == 1
    assert app.steps(run_id) == [
        "app-parallel.model",
        "app-parallel.tool:note:call_0_a",
        "app-parallel.tool:note:call_0_b",
        "app-parallel.tool:slow:call_0_c",
        "app-parallel.model",
    ]


def test_killed_after_a_tool_finished_the_tool_does_not_run_again(app: DurableApp) -> None:
    run_id = uuid.uuid4().hex
    first = app.spawn(
        "run",
        executor="worker-1",
        scenario="sequential",
        run_id=run_id,
        env={"BLOCK_MODEL_AT": "1"},
    )
    app.wait_until(
        lambda: (
            app.logged("model start 1")
            and app.recorded(run_id, ["app-sequential.tool:note:call_0_a"])
        ),
        "the tool's step recorded and the next model request begun",
    )
    app.kill(first)

    second = app.spawn("serve", executor="worker-1", scenario="sequential", run_id=run_id)
    result = app.output(second)

    assert result["answer"] == "answer: a"
    counts = app.counts()
    assert counts["start note a"] == counts["done note a"] == 1
    assert counts["model start 0"] == counts["model done 0"] == 1
    assert counts["model start 1"] == 2  # the request that was cut off is made again
    assert counts["model done 1"] == 1
    note_lines = [line for line in app.lines() if line.startswith("done note")]
    assert note_lines == [f"done note a {run_id}"]  # ctx.run_id is the workflow id


def test_killed_inside_an_agent_tool_the_inner_run_resumes_where_it_was(app: DurableApp) -> None:
    run_id = uuid.uuid4().hex
    env = {"SLOW_S": "300"}
    first = app.spawn("run", executor="worker-1", scenario="nested", run_id=run_id, env=env)
    inner = "app-nested/helper"
    app.wait_until(
        lambda: (
            app.logged("start slow c") and app.recorded(run_id, [f"{inner}.tool:note:call_0_a"])
        ),
        "the inner quick call recorded while the inner slow one sleeps",
    )
    app.kill(first)

    second = app.spawn("serve", executor="worker-1", scenario="nested", run_id=run_id)
    assert app.output(second)["answer"] == "answer: answer: a,c"
    counts = app.counts()
    assert counts["model start 0"] == counts["inner start 0"] == 1  # read back, not asked
    assert counts["start note a"] == counts["done note a"] == 1
    assert (counts["start slow c"], counts["done slow c"]) == (2, 1)
    assert [line for line in app.lines() if line.startswith("done note")] == [
        f"done note a {run_id}/call_0_x"  # the inner run's id, the same in both processes
    ]
    assert app.steps(run_id) == [
        "app-nested.model",
        f"{inner}.model",
        f"{inner}.tool:note:call_0_a",
        f"{inner}.tool:slow:call_0_c",
        f"{inner}.model",
        "app-nested.model",
    ]
