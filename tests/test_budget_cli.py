"""A spent ``--max-cost`` at the command line, against the provider simulator: with
``--on-limit final-answer`` the model is not asked again, the command says there is no
answer (never an empty ``answer:``), and exits 1, in every form (display, --no-display,
--json). The simulator's ledger shows no request past the limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tooldeck.testing import ProviderSimulator, after_tool, call, last_user_contains, reply, rule

Provider = Callable[..., ProviderSimulator]
SHOP = '''
from tooldeck import tool


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid"
'''


def tooldeck_run(
    workdir: Path, sim: ProviderSimulator, *options: str
) -> subprocess.CompletedProcess[str]:
    """``tooldeck run`` of the shop's prompt against ``sim``, in a process of its own."""
    (workdir / "shop.py").write_text(SHOP, encoding="utf-8")
    kept = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    argv = [
        sys.executable, "-m", "tooldeck.cli", "run", "Is my order A1 paid?",
        "-t", str(workdir / "shop.py"), "--model", "openai-chat:gpt-4.1-mini",
        "--base-url", sim.base_url, "--on-limit", "final-answer", "--no-log", *options,
    ]  # fmt: skip
    env = {**kept, **sim.env, "TOOLDECK_HOME": str(workdir / "home")}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def run_spent(
    workdir: Path, sim: ProviderSimulator, *form: str
) -> subprocess.CompletedProcess[str]:
    """With a cost limit the first response passes (at gpt-4.1-mini's price)."""
    return tooldeck_run(workdir, sim, "--max-cost", "0.000001", *form)


def looking_up(provider: Provider, text: str = "") -> ProviderSimulator:
    step = call("lookup_order", {"order_id": "A1"}, text=text) if text else None
    step = step or call("lookup_order", {"order_id": "A1"})
    return provider(rules=[rule(last_user_contains("order"), step)])


@pytest.mark.parametrize("text", ["", "Let me look."])
def test_a_spent_max_cost_shows_no_answer_and_exits_1(
    provider: Provider, tmp_path: Path, text: str
) -> None:
    sim = looking_up(provider, text)

    done = run_spent(tmp_path, sim)

    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown
    assert len(sim.requests) == 1  # not asked again past the limit
    assert "\nanswer:" not in "\n" + shown
    assert "asked once more" not in shown
    assert "stop: max_cost\n" in shown
    assert (
        "tooldeck: error: the run stopped without an answer: the run spent its cost limit "
        "(--max-cost), so the model was not asked again: a last request would spend past it"
    ) in done.stderr
    if text:
        assert "its last turn asked for tools, which did not run, and said: 'Let me look.'" in shown


def test_no_display_prints_no_answer_on_stdout(provider: Provider, tmp_path: Path) -> None:
    sim = looking_up(provider)

    done = run_spent(tmp_path, sim, "--no-display")

    assert (done.returncode, done.stdout) == (1, "")
    assert "stop: max_cost\n" in done.stderr
    assert len(sim.requests) == 1


def test_json_gives_no_answer_and_says_why(provider: Provider, tmp_path: Path) -> None:
    sim = looking_up(provider, "Let me look.")

    done = run_spent(tmp_path, sim, "--json")

    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert (document["answer"], document["stop_reason"]) == ("", "max_cost")  # as at any stop
    assert document["error"].startswith(
        "the run stopped without an answer: the run spent its cost limit (--max-cost)"
    )
    assert "answer_forced" not in document
    assert [c["error_code"] for c in document["calls"]] == ["call_limit"]
    assert len(sim.requests) == 1


def test_an_empty_forced_answer_is_no_answer(provider: Provider, tmp_path: Path) -> None:
    sim = provider(
        rules=[
            rule(after_tool("lookup_order"), reply("")),
            rule(last_user_contains("order"), call("lookup_order", {"order_id": "A1"})),
        ]
    )
    done = tooldeck_run(tmp_path, sim, "--max-rounds", "1", "--no-display")

    assert (done.returncode, done.stdout) == (1, "")
    assert "stop: max_rounds\n" in done.stderr
    assert (
        "the run stopped without an answer: asked once more at the limit, without tools, the "
        "model answered with no text"
    ) in done.stderr
    assert len(sim.requests) == 2
