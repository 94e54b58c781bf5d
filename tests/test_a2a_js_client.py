"""The official JavaScript A2A client (``@a2a-js/sdk``, pinned in tests/npm_a2a) against
``tooldeck a2a serve`` in a real process, over both bindings the card names: it reads the
card, streams a prompt whose run pauses for an approval, approves the pending call in a
reply to the task, and reads the task's answer (tests/npm_a2a/drive.cjs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from _a2a import TOKEN, served
from _npm import A2A_DIR, installed
from tooldeck.testing import call, reply

COMPLETED, INPUT_REQUIRED = 3, 6


def _drive(url: str, transport: str, prompt: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is not on PATH: install Node.js 20+ with npm"
    modules = installed(A2A_DIR) / "node_modules"
    done = subprocess.run(
        [node, str(A2A_DIR / "drive.cjs"), url, TOKEN, transport, prompt],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(modules)},
        check=False,
    )
    steps = {step["step"]: step for step in map(json.loads, done.stdout.splitlines())}
    assert done.returncode == 0, (steps, done.stderr[-2000:])
    return steps


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
def test_the_javascript_client_streams_a_task_and_approves_its_pause(
    tmp_path: Path, provider, transport: str
) -> None:
    sim = provider([call("refund", {"order": "A1", "amount": 250}), reply("Refunded A1.")])
    with served(tmp_path, sim) as (url, server):
        steps = _drive(url, transport, "Refund order A1.")
    card = steps["card"]
    assert card["name"] == "agent"
    assert card["streaming"] is True
    assert card["schemes"] == ["bearer"]
    assert card["transport"] == transport
    assert "refund" in card["skills"]
    sent = steps["sent"]["last"]
    assert sent["state"] == INPUT_REQUIRED
    [pending] = sent["data"][0]["calls"]
    assert pending["name"] == "refund"
    assert pending["id"] == sim.call_ids[0]
    replied = steps["replied"]
    assert replied["last"]["state"] == COMPLETED
    assert {"artifact": "answer", "text": "Refunded A1."} in replied["seen"]
    assert steps["task"] == {"step": "task", "state": COMPLETED, "answer": "Refunded A1.",
                             "artifacts": ["text-2", "answer"]}  # fmt: skip
    effects = (tmp_path / "effects.txt").read_text().splitlines()
    assert effects == [f"refund A1 250 pid={server.pid}"]
