"""At-most-once side effects across real processes, on SQLite and PostgreSQL sessions: a
process is SIGKILLed inside (or after) a ``side_effects=True`` call, then the same run is run
again in a new process; the side effects are counted in a file.

The children are tests/_once_child.py, started with subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from _stores import Store

CHILD = Path(__file__).with_name("_once_child.py")
KEY = "order-1:1:0"
"""The charge's idempotency key: the run id, the round, the call id."""


def start(store: Store, workdir: Path, tool_name: str, hang: str) -> subprocess.Popen[str]:
    command = [sys.executable, str(CHILD), *store.args(), str(workdir), "order-1", tool_name, hang]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def killed_while_hanging(child: subprocess.Popen[str], workdir: Path) -> None:
    deadline = time.monotonic() + 120
    while not (workdir / "hanging").exists():
        if child.poll() is not None:
            raise AssertionError(f"the child ended early: {child.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, "the child never reached its hanging point"
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    (workdir / "hanging").unlink()


def finished(child: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        out, err = child.communicate(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err[-3000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def charges(workdir: Path) -> list[str]:
    effects = workdir / "effects"
    return effects.read_text().splitlines() if effects.exists() else []


def killed_then_run_again(store: Store, workdir: Path, tool_name: str, hang: str) -> list[str]:
    """Kill a run at ``hang``, run it again (same run id) to its end: what the model read."""
    killed_while_hanging(start(store, workdir, tool_name, hang), workdir)
    again = finished(start(store, workdir, tool_name, "none"))
    assert again["answer"] == "done"
    read: list[str] = again["read"]
    return read


async def test_a_call_killed_after_its_effect_is_not_run_again_the_model_is_told(
    store: Store, tmp_path: Path
) -> None:
    read = killed_then_run_again(store, tmp_path, "charge", "after")

    assert charges(tmp_path) == [f"{KEY} charged 5"]
    assert read[0].startswith("error[interrupted]: the call may have completed")
    assert KEY in read[0]
    assert read[1] == "waited"


async def test_a_call_killed_before_its_effect_is_not_run_blindly_either(
    store: Store, tmp_path: Path
) -> None:
    read = killed_then_run_again(store, tmp_path, "charge", "before")

    assert charges(tmp_path) == []  # it did not happen, and was not tried again without asking
    assert read[0].startswith("error[interrupted]: the call may have completed")


async def test_reconcile_finds_the_effect_of_a_killed_call(store: Store, tmp_path: Path) -> None:
    read = killed_then_run_again(store, tmp_path, "charge_checked", "after")

    assert charges(tmp_path) == [f"{KEY} charged 5"]
    assert read[0] == "charged 5 (found by reconcile)"


async def test_reconcile_that_finds_nothing_runs_the_call(store: Store, tmp_path: Path) -> None:
    read = killed_then_run_again(store, tmp_path, "charge_checked", "before")

    assert charges(tmp_path) == [f"{KEY} charged 5"]
    assert read[0] == "charged 5"


async def test_a_completed_call_is_answered_from_its_record(store: Store, tmp_path: Path) -> None:
    read = killed_then_run_again(store, tmp_path, "charge", "later")

    assert charges(tmp_path) == [f"{KEY} charged 5"]  # charged by the first process only
    assert read == ["charged 5", "waited"]


@pytest.mark.parametrize("tool_name", ["charge", "charge_checked"])
async def test_a_run_that_was_not_killed_charges_once(
    store: Store, tmp_path: Path, tool_name: str
) -> None:
    result = finished(start(store, tmp_path, tool_name, "none"))

    assert result["read"] == ["charged 5", "waited"]
    assert charges(tmp_path) == [f"{KEY} charged 5"]
