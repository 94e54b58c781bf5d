"""The run journal at the command line, against the provider simulator (fresh call ids, as
a hosted provider gives): ``tooldeck run --session`` SIGKILLed inside a refund, then the
same command again, or another prompt. The refund runs once, and the person reads what
happened: a line on stderr, the ``recovered`` key of ``--json``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tooldeck.testing import ProviderSimulator, after_tool, call, last_user_contains, reply, rule

PROMPT = "Did my refund go through? If not, refund it."
SHOP = '''
import os
import time
from pathlib import Path

from tooldeck import RunContext, tool


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid, not refunded"


@tool(side_effects=True)
def refund_order(ctx: RunContext, order_id: str) -> str:
    """Refund an order."""
    with open(os.environ["SHOP_EFFECTS"], "a") as effects:
        effects.write(ctx.idempotency_key + "\\n")
    if os.environ.get("SHOP_HANG") == "refund":
        Path(os.environ["SHOP_EFFECTS"] + ".hanging").touch()
        time.sleep(600)
    return f"refunded {order_id}"
'''


def shop_rules() -> list[Any]:
    """The model a shop's provider would be: it reads the conversation and answers it."""
    return [
        rule(after_tool("refund_order"), reply("Refunded.")),
        rule(after_tool("lookup_order"), call("refund_order", {"order_id": "A1"})),
        rule(last_user_contains("refund"), call("lookup_order", {"order_id": "A1"})),
        rule(last_user_contains("where"), reply("It is on its way.")),
    ]


def command(workdir: Path, sim: ProviderSimulator, prompt: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "tooldeck.cli", "run", prompt, "--session", "crash1",
        "-t", str(workdir / "shop.py"), "--model", "openai-chat:gpt-4.1-mini",
        "--base-url", sim.base_url, *extra,
    ]  # fmt: skip


def environment(workdir: Path, sim: ProviderSimulator, hang: str = "") -> dict[str, str]:
    kept = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return {
        **kept,
        **sim.env,
        "TOOLDECK_HOME": str(workdir / "home"),
        "SHOP_EFFECTS": str(workdir / "effects"),
        "SHOP_HANG": hang,
    }


def killed_in_the_refund(workdir: Path, sim: ProviderSimulator) -> None:
    child = subprocess.Popen(
        command(workdir, sim, PROMPT, "--no-display"),
        env=environment(workdir, sim, hang="refund"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    marker = workdir / "effects.hanging"
    deadline = time.monotonic() + 120
    try:
        while not marker.exists():
            if child.poll() is not None:
                raise AssertionError(f"tooldeck ended early: {child.communicate()[1][-3000:]}")
            assert time.monotonic() < deadline, "tooldeck never reached the refund"
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL


def run(workdir: Path, sim: ProviderSimulator, prompt: str, *extra: str) -> Any:
    return subprocess.run(
        command(workdir, sim, prompt, *extra),
        env=environment(workdir, sim),
        capture_output=True,
        text=True,
        timeout=180,
    )


def refunds(workdir: Path) -> list[str]:
    return (workdir / "effects").read_text().splitlines()


def test_the_same_command_again_after_a_kill_in_a_refund_refunds_once(
    tmp_path: Path, provider: Callable[..., ProviderSimulator]
) -> None:
    (tmp_path / "shop.py").write_text(SHOP)
    sim = provider([], rules=shop_rules())
    killed_in_the_refund(tmp_path, sim)

    again = run(tmp_path, sim, PROMPT, "--no-display")

    assert again.returncode == 0, again.stderr
    assert again.stdout == "Refunded.\n"
    assert "goes on from its journal (2 model rounds kept, not asked again)" in again.stderr
    assert len(refunds(tmp_path)) == 1  # the kill's refund, not a second
    last = sim.requests[-1]["messages"]
    assert last[-1]["role"] == "tool"
    assert last[-1]["content"].startswith("error[interrupted]: the call may have completed")
    asked_first = [r["messages"][-1].get("content") for r in sim.requests]
    assert asked_first.count(PROMPT) == 1  # the first round was never asked again


def test_another_prompt_after_a_kill_keeps_the_refund_and_json_says_so(
    tmp_path: Path, provider: Callable[..., ProviderSimulator]
) -> None:
    (tmp_path / "shop.py").write_text(SHOP)
    sim = provider([], rules=shop_rules())
    killed_in_the_refund(tmp_path, sim)

    following = run(tmp_path, sim, "Where is my order?", "--json")

    assert following.returncode == 0, following.stderr
    document = json.loads(following.stdout)
    assert document["answer"] == "It is on its way."
    (recovered,) = document["recovered"]
    assert (recovered["how"], recovered["rounds"]) == ("closed", 2)
    (settled,) = recovered["settled"]
    assert settled["name"] == "refund_order"
    assert settled["error_code"] == "interrupted"
    read = [(m["role"], m.get("content")) for m in sim.requests[-1]["messages"]]
    assert read[0] == ("user", PROMPT)
    assert read[2] == ("tool", "order A1: paid, not refunded")
    assert read[4] == ("tool", settled["output"])
    assert read[5] == ("user", "Where is my order?")
    assert len(refunds(tmp_path)) == 1
