"""Run-level safety in durable runs: the guardrails and the untrusted-content policy of the
agent a durable run starts with hold whichever agent holds it, after its worker is killed
(SIGKILL) and the run recovered in a new process, after a handoff, inside an agent tool, after
a resume in another process, and in the next run of its conversation on another worker;
and its side-effect calls run at most once (an approved one: the call approved), the turn a
kill cut short kept whole, with the fresh call ids a provider gives when asked again.

The shop of the promise matrix (tests/_promise_doors.py) on the provider simulator (a fresh
call id in every response), its agent wrapped in a DurableAgent on DBOS with PostgreSQL (the
suite's own server), each process of tests/_durable_shop.py a worker or a client as the
person's code would run them (tests/_promise_doors.py's ``DurableDoor``). Each test asserts
what happened in the world (the refunds), what the model read (the simulator's requests) and
what the person's code read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _promise_doors import LATER, PROMPT, DurableDoor, Shop, interrupted, shop_rules
from tooldeck.testing import (
    ProviderSimulator,
    SimRequest,
    after_tool,
    call,
    fail,
    last_user_contains,
    reply,
    rule,
)
from tooldeck.testing.steps import Calls

GUARD_SAYS = "a refund is confirmed by e-mail, never in the chat"
UNTRUSTED = "untrusted content"


@pytest.fixture
def shop(tmp_path: Path, provider: Callable[..., ProviderSimulator]) -> Shop:
    return Shop(tmp_path, provider([], rules=shop_rules()))


@pytest.fixture
def durable(shop: Shop, postgres_server: str, postgres_dsn: str) -> Iterator[DurableDoor]:
    runs = DurableDoor(shop, postgres_server, postgres_dsn)
    yield runs
    runs.close()


def offered(request: dict[str, Any]) -> list[str]:
    """The tools a request to the model offered (``ask_billing``: the shop's agent's)."""
    return [tool["function"]["name"] for tool in request.get("tools", [])]


# --- at most once, nothing lost, an approval binds its call --------------------------


def test_a_durable_run_recovered_after_a_kill_in_its_refund_refunds_once_and_loses_nothing(
    shop: Shop, durable: DurableDoor
) -> None:
    durable.killed("refund", prompt=PROMPT, run_id="run-7", session="s1")
    assert len(shop.refunds()) == 1

    told = durable.told("serve", run_id="run-7")  # a new worker recovers the run
    later = durable.told("run", prompt=LATER, run_id="run-8", session="s1")

    assert told["answer"] == "Refunded."
    assert len(shop.refunds()) == 1  # the recovered run did not refund again
    assert shop.times_asked(PROMPT) == 1  # its first turn read back, not asked again
    assert later["answer"] == "It is on its way."
    read = shop.model_read()  # the conversation's next run reads the whole recovered turn
    assert read[0] == ("user", PROMPT)
    assert read[2] == ("tool", "order A1: paid, not refunded")
    assert interrupted(read[4])  # the refund its model was told of, not run again
    assert read[5:] == [("assistant", "Refunded."), ("user", LATER)]


def test_a_durable_run_killed_while_its_model_answers_asks_again_and_refunds_once(
    tmp_path: Path,
    provider: Callable[..., ProviderSimulator],
    postgres_server: str,
    postgres_dsn: str,
) -> None:
    refund = call("refund_order", {"order_id": "A1"})
    rules = [  # the request after the lookup hangs once: the worker is killed waiting for it
        rule(after_tool("refund_order"), reply("Refunded.")),
        rule(after_tool("lookup_order"), [fail.hang(), refund]),
        rule(last_user_contains("refund"), call("lookup_order", {"order_id": "A1"})),
    ]
    shop = Shop(tmp_path, provider([], rules=rules))
    durable = DurableDoor(shop, postgres_server, postgres_dsn)
    try:
        durable.killed_asking(2, prompt=PROMPT, run_id="run-7")  # the lookup's step recorded

        told = durable.told("serve", run_id="run-7")
    finally:
        durable.close()

    assert told["answer"] == "Refunded."
    assert len(shop.refunds()) == 1  # the refund the model asked for when asked again
    assert shop.times_asked(PROMPT) == 1  # the lookup's turn read back, not asked again
    after_lookup = [r for r in shop.sim.requests if r["messages"][-1]["role"] == "tool"]
    assert len(after_lookup) == 3  # cut off by the kill, asked again, after the refund
    refunded = after_lookup[-1]["messages"]
    assert refunded[-1]["content"] == "refunded A1"
    refund_ids = [c["id"] for m in refunded if m.get("tool_calls") for c in m["tool_calls"]]
    assert len(refund_ids) == len(set(refund_ids)) == 2  # the lookup's id and a fresh one


def test_the_agent_a_durable_run_is_handed_to_refunds_once_after_a_kill_in_its_refund(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.handoff = True
    durable.killed("refund", prompt=PROMPT, run_id="run-7")  # billing's refund, handed over
    assert len(shop.refunds()) == 1

    told = durable.told("serve", run_id="run-7")

    assert (told["agent"], told["answer"]) == ("billing", "Refunded.")
    assert len(shop.refunds()) == 1
    assert offered(shop.sim.requests[-1]) == ["refund_order"]  # billing's model, recovered
    read = shop.model_read()
    assert ("tool", "Transferred to 'billing'.") in read
    assert interrupted(read[-1])
    assert shop.times_asked(PROMPT) == 1


def test_an_agent_tool_of_a_durable_run_refunds_once_after_a_kill_inside_it(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.agent_tool = True
    durable.killed("refund", prompt=PROMPT, run_id="run-7")  # inside billing's run
    assert len(shop.refunds()) == 1

    told = durable.told("serve", run_id="run-7")

    assert told["answer"] == "Refunded."
    assert len(shop.refunds()) == 1  # billing's refund step is not run again
    billing_read = [
        r["messages"][-1]["content"]
        for r in shop.sim.requests
        if r["messages"][-1]["role"] == "tool" and "ask_billing" not in offered(r)
    ]
    assert billing_read[-1].startswith("error[interrupted]")  # billing's model is told
    assert shop.model_read()[-1] == ("tool", "Refunded.")  # the shop's, billing's answer
    assert shop.times_asked(PROMPT) == 1


def test_a_durable_run_approved_in_another_process_runs_the_approved_refund_once(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.approval = True
    paused = durable.told("run", prompt=PROMPT, run_id="run-7")
    assert (paused["stop_reason"], paused["pending"]) == ("paused", ["refund_order"])
    assert shop.refunds() == []
    (waiting,) = paused["pending_ids"]

    approved = durable.told("approve", executor="web", run_id="run-7")  # a client
    assert approved == {"pause": 1, "approved": ["refund_order"]}
    told = durable.told("serve", run_id="run-7")  # the worker, started again, goes on
    again = durable.told("serve", run_id="run-7")  # and once more: the run ended

    assert told["answer"] == again["answer"] == "Refunded."
    assert len(shop.refunds()) == 1
    read = shop.sim.requests[-1]["messages"]
    (refund_call,) = [
        c
        for m in read
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "refund_order"
    ]
    assert refund_call["id"] in waiting  # the call approved is the call that ran
    assert (read[-1]["tool_call_id"], read[-1]["content"]) == (refund_call["id"], "refunded A1")


def test_a_durable_run_recovered_after_a_kill_in_its_lookup_keeps_its_turn_whole(
    shop: Shop, durable: DurableDoor
) -> None:
    durable.killed("lookup", prompt=PROMPT, run_id="run-7", session="s1")  # the turn came

    told = durable.told("serve", run_id="run-7")
    later = durable.told("run", prompt=LATER, run_id="run-8", session="s1")

    assert (told["answer"], later["answer"]) == ("Refunded.", "It is on its way.")
    assert len(shop.refunds()) == 1
    assert shop.times_asked(PROMPT) == 1  # the turn read back from its step, not asked again
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert read[2:] == [
        ("tool", "order A1: paid, not refunded"),  # the lookup, run again by the recovered run
        ("assistant", ""),  # the refund's call
        ("tool", "refunded A1"),
        ("assistant", "Refunded."),
        ("user", LATER),
    ]


def test_a_committed_durable_run_started_again_asks_and_runs_nothing(
    shop: Shop, durable: DurableDoor
) -> None:
    first = durable.told("run", prompt=PROMPT, run_id="run-7", session="s1")
    asked = len(shop.sim.requests)

    again = durable.told("run", prompt=PROMPT, run_id="run-7", session="s1", executor="worker-2")
    later = durable.told("run", prompt=LATER, run_id="run-8", session="s1")

    assert first["answer"] == again["answer"] == "Refunded."
    assert again["run_id"] == "run-7"
    assert len(shop.refunds()) == 1
    assert later["answer"] == "It is on its way."
    assert len(shop.sim.requests) == asked + 1  # only the later prompt's request
    read = shop.model_read()
    assert [text for role, text in read if role == "user"] == [PROMPT, LATER]  # kept once


def test_an_approved_durable_run_keeps_its_turn_for_the_conversations_next_run(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.approval = True
    paused = durable.told("run", prompt=PROMPT, run_id="run-7", session="s1")
    assert paused["stop_reason"] == "paused"
    durable.told("approve", executor="web", run_id="run-7")
    told = durable.told("serve", run_id="run-7")

    later = durable.told("run", prompt=LATER, run_id="run-8", session="s1")

    assert (told["answer"], later["answer"]) == ("Refunded.", "It is on its way.")
    assert len(shop.refunds()) == 1
    read = shop.model_read()
    assert [text for role, text in read if role == "user"] == [PROMPT, LATER]
    assert ("tool", "refunded A1") in read


def test_a_durable_run_paused_in_the_agent_handed_to_refunds_once_when_approved(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.approval = shop.handoff = True
    paused = durable.told("run", prompt=PROMPT, run_id="run-7")
    assert (paused["stop_reason"], paused["agent"]) == ("paused", "billing")
    assert shop.refunds() == []

    durable.told("approve", executor="web", run_id="run-7")
    told = durable.told("serve", run_id="run-7")

    assert (told["agent"], told["answer"]) == ("billing", "Refunded.")
    assert len(shop.refunds()) == 1
    assert offered(shop.sim.requests[-1]) == ["refund_order"]  # billing's model read it
    assert shop.model_read()[-1] == ("tool", "refunded A1")


def test_a_durable_run_paused_inside_an_agent_tool_refunds_once_when_approved(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.approval = shop.agent_tool = True
    paused = durable.told("run", prompt=PROMPT, run_id="run-7")
    assert (paused["stop_reason"], paused["pending"]) == ("paused", ["refund_order"])
    (waiting,) = paused["pending_ids"]
    assert "/" in waiting  # the outer call's fresh id, then billing's
    assert shop.refunds() == []

    durable.told("approve", executor="web", run_id="run-7")
    told = durable.told("serve", run_id="run-7")

    assert told["answer"] == "Refunded."
    assert len(shop.refunds()) == 1
    billing_read = [
        r["messages"][-1]["content"]
        for r in shop.sim.requests
        if r["messages"][-1]["role"] == "tool" and "ask_billing" not in offered(r)
    ]
    assert billing_read[-1] == "refunded A1"
    assert shop.model_read()[-1] == ("tool", "Refunded.")  # the shop's model, billing's answer


def test_the_same_durable_run_started_from_two_threads_at_once_refunds_once(
    shop: Shop, durable: DurableDoor
) -> None:
    asked = "Refund order A1."  # --prompts is split at commas: PROMPT has one
    said = durable.told(  # two threads of a web server, the same message retried at once
        "run", prompts=f"{asked},{asked}", sessions="s1,s1", run_id="run-7"
    )

    assert len(shop.refunds()) == 1
    assert [(one["run_id"], one["answer"]) for one in said] == [("run-7", "Refunded.")] * 2
    assert shop.times_asked(asked) == 1  # one run asked the model; the other joined it
    later = durable.told("run", prompt=LATER, run_id="run-8", session="s1")
    assert later["answer"] == "It is on its way."
    assert [text for role, text in shop.model_read() if role == "user"] == [asked, LATER]


# --- guardrails ----------------------------------------------------------------------


def test_a_durable_run_recovered_after_a_kill_in_its_refund_keeps_its_output_guardrail(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.guarded = True
    durable.killed("refund", prompt=PROMPT, run_id="run-7")
    assert len(shop.refunds()) == 1

    told = durable.told("serve", run_id="run-7")  # a new worker recovers the run

    assert told["stopped_by"].startswith("GuardrailTripped")
    assert told["guardrails"] == [["output", "no_refund_promises", "tripped", GUARD_SAYS]]
    assert not told["answer"]  # "Refunded." kept out
    assert len(shop.refunds()) == 1  # the recovered run did not refund again
    assert interrupted(shop.model_read()[-1])  # what the recovered run's model read
    assert shop.times_asked(PROMPT) == 1  # its first turn read back, not asked again


def test_a_durable_run_recovered_after_a_kill_in_its_lookup_keeps_its_output_guardrail(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.guarded = True
    durable.killed("lookup", prompt=PROMPT, run_id="run-7")  # the model's turn came
    assert shop.refunds() == []

    told = durable.told("serve", run_id="run-7")

    assert told["stopped_by"].startswith("GuardrailTripped")
    assert GUARD_SAYS in told["stopped_by"]
    assert not told["answer"]
    assert len(shop.refunds()) == 1  # the refund the model then asked for
    assert ("tool", "refunded A1") in shop.model_read()
    assert shop.times_asked(PROMPT) == 1


def test_the_starting_agents_output_guardrail_judges_the_agent_a_durable_run_is_handed_to(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.guarded = shop.handoff = True  # the module's guardrail; billing has none of its own
    durable.killed("refund", prompt=PROMPT, run_id="run-7")  # billing's refund, handed over
    assert len(shop.refunds()) == 1

    told = durable.told("serve", run_id="run-7")  # a new worker recovers the run

    assert told["stopped_by"].startswith("GuardrailTripped")
    assert told["agent"] == "billing"  # billing held the run when its answer was judged
    assert told["guardrails"] == [["output", "no_refund_promises", "tripped", GUARD_SAYS]]
    assert not told["answer"]  # billing's "Refunded." kept out
    assert len(shop.refunds()) == 1  # the recovered run did not refund again
    read = shop.model_read()
    assert ("tool", "Transferred to 'billing'.") in read
    assert interrupted(read[-1])  # billing's model, recovered, read what became of its refund
    assert offered(shop.sim.requests[-1]) == ["refund_order"]  # billing's tools, not the shop's
    assert shop.times_asked(PROMPT) == 1  # the shop's turn read back, not asked again


def test_a_durable_runs_output_guardrail_judges_an_agent_tool_recovered_after_a_kill(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.guarded = shop.agent_tool = True
    durable.killed("refund", prompt=PROMPT, run_id="run-7")  # inside billing's run
    assert len(shop.refunds()) == 1

    told = durable.told("serve", run_id="run-7")

    assert told["stopped_by"].startswith("GuardrailTripped")
    assert not told["answer"]
    assert len(shop.refunds()) == 1
    billing_read = [
        r["messages"][-1]["content"]
        for r in shop.sim.requests
        if r["messages"][-1]["role"] == "tool" and "ask_billing" not in offered(r)
    ]
    assert billing_read[-1].startswith("error[interrupted]")  # billing's model, recovered
    shop_read = [
        m["content"]
        for r in shop.sim.requests
        if "ask_billing" in offered(r)
        for m in r["messages"]
        if m["role"] == "tool"
    ]
    billing_said = [text for text in shop_read if "the agent" in text]
    assert billing_said, "the shop's model read what became of billing's run"
    assert all("Refunded." not in text for text in shop_read)  # billing's answer kept out
    assert "stop reason: guardrail" in billing_said[-1]


def test_a_durable_run_approved_in_another_process_keeps_its_output_guardrail(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.guarded = shop.approval = True
    paused = durable.told("run", prompt=PROMPT, run_id="run-7")
    assert (paused["stop_reason"], paused["pending"]) == ("paused", ["refund_order"])
    assert shop.refunds() == []

    approved = durable.told("approve", executor="web", run_id="run-7")  # a client
    assert approved == {"pause": 1, "approved": ["refund_order"]}
    told = durable.told("serve", run_id="run-7")  # the worker, started again, goes on

    assert told["stopped_by"].startswith("GuardrailTripped")
    assert GUARD_SAYS in told["stopped_by"]
    assert not told["answer"]
    assert len(shop.refunds()) == 1
    assert ("tool", "refunded A1") in shop.model_read()


# --- the untrusted policy --------------------------------------------------------------


def asked_about_untrusted(told: dict[str, Any], source: str = "lookup_order") -> None:
    assert told["stop_reason"] == "paused", told
    assert told["pending"] == ["refund_order"]
    (why,) = told["asked_because"]
    assert UNTRUSTED in why, why
    assert source in why, why  # which call brought it in


def test_a_durable_run_recovered_after_a_kill_once_the_lookup_came_asks_before_refunding(
    tmp_path: Path,
    provider: Callable[..., ProviderSimulator],
    postgres_server: str,
    postgres_dsn: str,
) -> None:
    refund = call("refund_order", {"order_id": "A1"})
    rules = [  # the request after the lookup hangs once: the worker is killed waiting for it
        rule(after_tool("lookup_order"), [fail.hang(), refund]),
        rule(last_user_contains("refund"), call("lookup_order", {"order_id": "A1"})),
    ]
    shop = Shop(tmp_path, provider([], rules=rules))
    shop.untrusted = True
    durable = DurableDoor(shop, postgres_server, postgres_dsn)
    try:
        durable.killed_asking(2, prompt=PROMPT, run_id="run-7")  # the lookup's step recorded

        told = durable.told("serve", run_id="run-7")
    finally:
        durable.close()

    asked_about_untrusted(told)  # the taint came back from the recorded lookup
    assert told["tainted_by"] == "lookup_order"
    assert shop.refunds() == []
    assert shop.times_asked(PROMPT) == 1  # the lookup's turn read back, not asked again
    lookups = [r for r in shop.sim.requests if r["messages"][-1]["role"] == "tool"]
    assert len(lookups) == 2  # the request cut off by the kill, and the recovered run's
    assert lookups[-1]["messages"][-1]["content"] == "order A1: paid, not refunded"


def test_the_agent_a_durable_run_is_handed_to_asks_after_a_kill_and_recovery(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.untrusted = shop.handoff = True  # billing itself would not ask: the run's policy does
    durable.killed("lookup", prompt=PROMPT, run_id="run-7")

    told = durable.told("serve", run_id="run-7")

    asked_about_untrusted(told)
    assert told["agent"] == "billing"
    assert shop.refunds() == []
    assert ("tool", "Transferred to 'billing'.") in shop.model_read()


def test_an_agent_tool_of_a_durable_run_starts_tainted_after_a_kill_and_recovery(
    shop: Shop, durable: DurableDoor
) -> None:
    shop.untrusted = shop.agent_tool = True  # the lookup tainted the shop's run, not billing's
    durable.killed("lookup", prompt=PROMPT, run_id="run-7")

    told = durable.told("serve", run_id="run-7")

    asked_about_untrusted(told)  # billing's refund waits, inside its call
    assert shop.refunds() == []
    asked_of_billing = [r for r in shop.sim.requests if "refund_order" in offered(r)]
    assert asked_of_billing, "billing's model was asked"


def test_a_durable_run_approved_in_another_process_still_asks_after_untrusted_content(
    tmp_path: Path,
    provider: Callable[..., ProviderSimulator],
    postgres_server: str,
    postgres_dsn: str,
) -> None:
    rules = [  # once A1 is refunded, the model (led by what it read) wants B2 refunded too
        rule(after_tool("refund_order"), call("refund_order", {"order_id": "B2"})),
        *shop_rules(),
    ]
    shop = Shop(tmp_path, provider([], rules=rules))
    shop.untrusted = True
    durable = DurableDoor(shop, postgres_server, postgres_dsn)
    try:
        paused = durable.told("run", prompt=PROMPT, run_id="run-7")
        asked_about_untrusted(paused)
        approved = durable.told("approve", executor="web", run_id="run-7")
        assert approved == {"pause": 1, "approved": ["refund_order"]}

        told = durable.told("serve", run_id="run-7")  # the worker goes on, to the next stop
    finally:
        durable.close()

    asked_about_untrusted(told)  # the taint survived the resume: B2 waits for a person
    assert told["pending_ids"] != paused["pending_ids"]
    assert len(shop.refunds()) == 1  # A1, approved; not B2
    assert ("tool", "refunded A1") in shop.model_read()


def _refund_named(request: SimRequest) -> Calls:
    """The refund of the order the person named last (``Refund order B2.``)."""
    assert request.last is not None
    return call("refund_order", {"order_id": request.last.text.split()[-1].rstrip(".")})


def test_the_next_durable_run_of_a_tainted_conversation_asks_on_another_worker(
    tmp_path: Path,
    provider: Callable[..., ProviderSimulator],
    postgres_server: str,
    postgres_dsn: str,
) -> None:
    rules = [
        rule(after_tool("refund_order"), reply("Refunded.")),
        rule(after_tool("lookup_order"), reply("Order A1 is paid.")),
        rule(last_user_contains("refund order"), _refund_named),
        rule(last_user_contains("look"), call("lookup_order", {"order_id": "A1"})),
    ]
    shop = Shop(tmp_path, provider([], rules=rules))
    shop.untrusted = True
    durable = DurableDoor(shop, postgres_server, postgres_dsn)
    try:
        first = durable.told("run", prompt="Look order A1 up.", session="alice", run_id="a-1")
        assert (first["answer"], first["tainted_by"]) == ("Order A1 is paid.", "lookup_order")

        # The conversation's next message lands on another worker, in a thread of its own,
        # while another conversation's runs beside it in another thread.
        both = durable.told(
            "run", executor="worker-2", prompts="Refund order A1.,Refund order B2.",
            sessions="alice,bob",
        )  # fmt: skip
    finally:
        durable.close()

    asked_about_untrusted(both["alice"])  # the lookup of alice's earlier run
    assert both["bob"]["answer"] == "Refunded."  # bob's conversation read nothing untrusted
    assert both["bob"]["tainted_by"] is None
    (refunded,) = shop.refunds()
    assert refunded.startswith("bob-run:")  # bob's refund, once; not alice's
    alice_asked = [
        r for r in shop.sim.requests if r["messages"][-1].get("content") == "Refund order A1."
    ]
    assert len(alice_asked) == 1
    assert ("tool", "order A1: paid, not refunded") in [
        (m["role"], m.get("content")) for m in alice_asked[0]["messages"]
    ]  # the model read alice's history: the same worker did not need to have run it
