"""The run journal across real processes, on SQLite and PostgreSQL sessions: a shop-support
run whose model gives fresh call ids (as hosted providers do) is SIGKILLed at a step — in a
tool with side effects, in a lookup, in a model request, in the resume of an approved call,
just after its commit — and the session is met again: by the same run (its id, or the same
resume) or by the session's next run. No side effect runs twice, no round is asked twice,
nothing the run did is lost, and the run met again says so.

The children are tests/_journal_child.py, started with subprocess.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from _stores import Store, execute
from helpers import kill_when_written
from tooldeck.run._engine.recovery import NO_REPORT

CHILD = Path(__file__).with_name("_journal_child.py")
PROMPT = "Did my refund go through? If not, refund it."
LOOKED_UP = "order A1: paid, not refunded"


def start(store: Store, workdir: Path, scenario: str, run_id: str, hang: str) -> Any:
    command = [sys.executable, str(CHILD), *store.args(), str(workdir), scenario, run_id, hang]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def killed(store: Store, workdir: Path, scenario: str, run_id: str, hang: str) -> None:
    """Run the child until it reaches ``hang``, and SIGKILL it there."""
    child = start(store, workdir, scenario, run_id, hang)
    marker = workdir / "hanging"
    kill_when_written(child, marker, repr(hang))
    assert child.returncode == -signal.SIGKILL
    marker.unlink()


def finished(store: Store, workdir: Path, scenario: str, run_id: str = "-") -> dict[str, Any]:
    child = start(store, workdir, scenario, run_id, "none")
    try:
        out, err = child.communicate(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err[-3000:]
    outcome: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return outcome


def refunds(workdir: Path) -> list[str]:
    effects = workdir / "effects"
    return effects.read_text().splitlines() if effects.exists() else []


def recorded_calls(store: Store) -> list[tuple[Any, ...]]:
    query = "SELECT call_key, tool_name, result IS NOT NULL FROM tooldeck_session_calls"
    return [tuple(row) for row in execute(store, query)]


async def test_the_same_run_again_after_a_kill_in_a_side_effect_refunds_once(
    store: Store, tmp_path: Path
) -> None:
    killed(store, tmp_path, "run", "run-7", "refund")

    again = finished(store, tmp_path, "run", "run-7")

    assert refunds(tmp_path) == ["refund run-7:2:0"]  # the key names its place, not an id
    assert again["answer"] == "Refunded."
    assert again["read"][0] == LOOKED_UP
    assert again["read"][1].startswith("error[interrupted]: the call may have completed")
    assert again["recovered"] == [
        {"how": "continued", "run_id": "run-7", "rounds": 2, "settled": []}
    ]
    assert again["requests"] == 1  # rounds 1 and 2 are not asked again
    assert recorded_calls(store) == [("run-7:2:0", "refund_order", True)]


async def test_reconcile_settles_a_killed_refund_when_the_run_goes_on(
    store: Store, tmp_path: Path
) -> None:
    killed(store, tmp_path, "run-checked", "run-7", "refund")

    again = finished(store, tmp_path, "run-checked", "run-7")

    assert refunds(tmp_path) == ["refund run-7:2:0"]
    assert again["read"] == [LOOKED_UP, "refunded (found by reconcile)"]


async def test_a_kill_in_a_model_request_asks_only_the_rounds_not_answered(
    store: Store, tmp_path: Path
) -> None:
    killed(store, tmp_path, "run", "run-8", "request")

    again = finished(store, tmp_path, "run", "run-8")

    assert again["answer"] == "Refunded."
    assert refunds(tmp_path) == ["refund run-8:2:0"]
    assert again["requests"] == 2  # the lookup round was answered and kept
    assert again["first_request"] == [PROMPT, "", LOOKED_UP]


async def test_the_next_run_after_a_kill_in_a_side_effect_keeps_all_and_says_so(
    store: Store, tmp_path: Path
) -> None:
    killed(store, tmp_path, "run", "-", "refund")

    following = finished(store, tmp_path, "next")

    assert len(refunds(tmp_path)) == 1
    (recovered,) = following["recovered"]
    assert (recovered["how"], recovered["rounds"]) == ("closed", 2)
    (settled,) = recovered["settled"]
    assert settled.startswith("error[interrupted]: the call may have completed")
    # the model reads the first prompt, the lookup and the refund that happened, then this
    assert following["first_request"] == [PROMPT, "", LOOKED_UP, "", settled, "Thanks."]
    assert following["answer"] == "You're welcome."
    ((key, name, finished_),) = recorded_calls(store)
    assert (name, finished_) == ("refund_order", True)  # no row left "started"
    assert key == f"{recovered['run_id']}:2:0"


async def test_the_next_run_after_a_kill_in_a_lookup_answers_it_interrupted(
    store: Store, tmp_path: Path
) -> None:
    killed(store, tmp_path, "run", "-", "lookup")

    following = finished(store, tmp_path, "next")

    (recovered,) = following["recovered"]
    assert recovered["settled"] == [f"error[interrupted]: {NO_REPORT}"]
    assert following["first_request"] == [PROMPT, "", recovered["settled"][0], "Thanks."]
    assert refunds(tmp_path) == []


async def test_a_resume_killed_in_its_approved_refund_goes_on_when_resumed_again(
    store: Store, tmp_path: Path
) -> None:
    paused = finished(store, tmp_path, "ask")
    assert paused["stop_reason"] == "paused"
    killed(store, tmp_path, "resume", "-", "refund")

    again = finished(store, tmp_path, "resume")

    assert len(refunds(tmp_path)) == 1  # approved once, run once
    assert again["answer"] == "Refunded."
    assert again["recovered"][0]["how"] == "continued"
    assert again["read"][1].startswith("error[interrupted]: the call may have completed")


async def test_the_next_prompt_after_a_resume_killed_in_its_refund_keeps_the_conversation(
    store: Store, tmp_path: Path
) -> None:
    finished(store, tmp_path, "ask")
    killed(store, tmp_path, "resume", "-", "refund")

    following = finished(store, tmp_path, "next")

    assert len(refunds(tmp_path)) == 1
    (recovered,) = following["recovered"]
    assert recovered["how"] == "closed"
    (settled,) = recovered["settled"]
    assert settled.startswith("error[interrupted]: the call may have completed")
    assert following["first_request"] == [PROMPT, "", LOOKED_UP, "", settled, "Thanks."]
    assert [row[2] for row in recorded_calls(store)] == [True]


async def test_a_run_killed_after_its_commit_and_run_again_is_stored_once(
    store: Store, tmp_path: Path
) -> None:
    killed(store, tmp_path, "run", "run-9", "commit")

    again = finished(store, tmp_path, "run", "run-9")

    assert again["recovered"] == [{"how": "stored", "run_id": "run-9", "rounds": 3, "settled": []}]
    assert again["answer"] == "Refunded."
    assert again["requests"] == 0
    assert refunds(tmp_path) == ["refund run-9:2:0"]
    rows = execute(store, "SELECT kind, run_id FROM tooldeck_session_log ORDER BY seq")
    assert [tuple(row) for row in rows] == [("turn", "run-9")]


async def test_the_same_prompt_again_without_a_run_id_goes_on_with_the_killed_run(
    store: Store, tmp_path: Path
) -> None:
    # the command line's case: `tooldeck run --session S "..."` run again after a crash
    killed(store, tmp_path, "run", "-", "refund")

    again = finished(store, tmp_path, "run")

    assert len(refunds(tmp_path)) == 1
    assert [r["how"] for r in again["recovered"]] == ["continued"]
    assert again["recovered"][0]["run_id"] == again["run_id"]
    assert again["answer"] == "Refunded."
    assert again["read"][1].startswith("error[interrupted]: the call may have completed")


async def test_a_capabilitys_state_goes_on_from_the_journal_after_a_kill(
    store: Store, tmp_path: Path
) -> None:
    # killed in the second model request: the journal's step after the lookup holds the
    # capability's count; the run met again counts on from it, not from zero
    killed(store, tmp_path, "run-counted", "-", "request")

    again = finished(store, tmp_path, "run-counted")

    assert [r["how"] for r in again["recovered"]] == ["continued"]
    assert again["read"] == [
        "order A1: paid, not refunded (call 1 of the run)",
        "refunded A1 (call 2 of the run)",
    ]
    assert len(refunds(tmp_path)) == 1
