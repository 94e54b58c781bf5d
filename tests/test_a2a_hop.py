"""An approval across the hop, tooldeck on both sides: a caller agent whose tool is
``A2AAgent(...).as_tool()`` calls a tooldeck server (``tooldeck a2a serve``, a real process)
whose refund tool needs approval. The caller's run pauses naming the remote's call; a SECOND
caller process resumes the caller's checkpoint with the decision; the remote run goes on.
Both models are provider simulators (fresh call ids), one per side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2a.types import ListTasksRequest, TaskState

from _a2a import AUTH, REFUND_A1, TOKEN, a2a_client, pending_calls, served
from _a2a_remote import caller_process
from tooldeck import Checkpoint, Reject, ToolResult
from tooldeck.remote import A2AAgent
from tooldeck.testing import ProviderSimulator, call, reply

CALLER = {"A2A_BEARER": TOKEN, "A2A_NAME": "shop"}
ASK_SHOP = call("shop", {"input": "Refund order A1."})


async def _remote_tasks(url: str) -> list[Any]:
    async with a2a_client(url) as client:
        listed = await client.list_tasks(ListTasksRequest(history_length=5))
    return list(listed.tasks)


def _tool_reads(sim: ProviderSimulator) -> list[str]:
    """What the remote's model read as tool results, in its last request."""
    messages = sim.requests[-1]["messages"]
    return [str(m["content"]) for m in messages if m.get("role") == "tool"]


def _caller_pause(tmp_path: Path, url: str, caller: ProviderSimulator) -> dict[str, Any]:
    """The first caller process: its run pauses on the remote's refund."""
    paused = caller_process("pause", tmp_path, url, caller, **CALLER)
    assert paused["stop_reason"] == "paused"
    (pending,) = paused["pending"]
    assert pending["name"] == "refund"
    assert pending["arguments"] == {"order": "A1", "amount": 250}  # ints, as the remote stored
    assert "its tool requires a person's approval (the remote's words)" in pending["reason"]
    return dict(pending)


async def test_a_remote_approval_is_decided_by_resuming_the_caller_in_a_second_process(
    tmp_path: Path, provider
) -> None:
    shop = provider([REFUND_A1, reply("Refunded 250 dollars of order A1.")])
    caller = provider([ASK_SHOP, reply("The shop refunded A1.")])
    with served(tmp_path, shop) as (url, _):
        pending = _caller_pause(tmp_path, url, caller)
        [task] = await _remote_tasks(url)
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        [waiting] = pending_calls(task)
        stored = Checkpoint.from_json((tmp_path / "checkpoint.json").read_text())
        (ask,) = stored.turn.pending
        assert pending["id"] == f"{ask.call.id}/{waiting['id']}"  # the caller names the remote's
        assert ask.nested is not None
        kept = ask.nested.capability_states["a2a_task"]
        assert kept["task_id"] == task.id
        assert kept["digests"] == {waiting["id"]: waiting["digest"]}  # sent back on resume
        assert not (tmp_path / "effects.txt").exists()

        resumed = caller_process("resume", tmp_path, url, caller, **CALLER)
        [task] = await _remote_tasks(url)

    assert resumed["stop_reason"] == "answer"
    assert resumed["answer"] == "The shop refunded A1."
    assert resumed["read"] == ["Refunded 250 dollars of order A1."]
    assert resumed["tainted"]
    [effect] = (tmp_path / "effects.txt").read_text().splitlines()
    assert effect.startswith("refund A1 250 pid=")
    assert _tool_reads(shop) == ["refunded 250 dollars of order A1"]
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_rejection_crosses_the_hop_and_the_remote_model_reads_the_reason(
    tmp_path: Path, provider
) -> None:
    shop = provider([REFUND_A1, reply("I did not refund A1: a manager must approve.")])
    caller = provider([ASK_SHOP, reply("The shop declined.")])
    reason = "refunds above 100 need a manager"
    with served(tmp_path, shop) as (url, _):
        _caller_pause(tmp_path, url, caller)
        rejected = caller_process(
            "reject", tmp_path, url, caller, A2A_REJECT_REASON=reason, **CALLER
        )
        [task] = await _remote_tasks(url)

    assert _tool_reads(shop) == [f"error[rejected]: {reason}"]
    assert not (tmp_path / "effects.txt").exists()
    assert rejected["read"] == ["I did not refund A1: a manager must approve."]
    assert rejected["answer"] == "The shop declined."
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_an_external_call_of_the_remote_is_answered_or_rejected_by_the_caller(
    tmp_path: Path, provider
) -> None:
    where = call("ask_warehouse", {"order": "A1"})
    shop = provider([where, reply("Nobody knows."), where, reply("It is in Lyon.")])
    with served(tmp_path, shop) as (url, _):
        remote = A2AAgent(url, allowed=[url], headers=AUTH, name="shop")
        first = await remote.run("Where is A1?")
        [asked] = first.pending
        assert (asked.name, asked.kind, asked.arguments) == (
            "ask_warehouse",
            "external",
            {"order": "A1"},
        )
        rejected = await remote.reply(first, {asked.id: Reject("the warehouse is closed")})
        assert _tool_reads(shop) == ["error[rejected]: the warehouse is closed"]
        assert (rejected.state, rejected.text) == ("completed", "Nobody knows.")

        second = await remote.run("Where is A1 now?")
        [asked] = second.pending
        answered = await remote.reply(second, {asked.id: ToolResult.success("in Lyon")})
        assert _tool_reads(shop) == ["in Lyon"]
        assert (answered.state, answered.text) == ("completed", "It is in Lyon.")
