"""The promise matrix: each promise tooldeck documents, at each front door, under each fault.

Read a cell as a sentence — "*at most once* holds at *the CLI* after *a SIGKILL in a
side-effect call*" — and its test as the proof: a shop-support agent on the provider
simulator (a fresh call id in every response, as hosted providers give; tests/_promise_doors.py),
driven as a person drives it, in real processes, killed where the fault says. Each test
asserts what happened in the world (the refunds made), what the model read (the simulator's
last request) and what the person read (the answer, the recovered-run line, the page).

A cell is one of:

- ``Here(test)``: proven by a test of this file;
- ``Elsewhere("tests/file.py::test_name")``: proven by that test (this file checks it exists);
- ``Why("...")``: the promise cannot apply there, and why;
- ``Open("...")``: it applies and is not proven yet — the list is the work left, held to
  its length by ``test_the_open_cells_are_the_ones_written_down`` so it only shrinks.

``test_every_cell_is_proven_or_says_why`` holds the matrix whole: a new promise, door or
fault without its cells fails it.
"""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _promise_doors import (
    INTERRUPTED,
    LATER,
    PROMPT,
    CliDoor,
    LibraryDoor,
    Shop,
    WebDoor,
    interrupted,
    shop_rules,
)
from helpers import MAY_HAVE_RUN
from tooldeck import Agent
from tooldeck.errors import RunStopped, SessionConflict
from tooldeck.results import RunResult
from tooldeck.sessions import SQLiteSession
from tooldeck.testing import ProviderSimulator, SimRequest, after_tool, call, rule

PROMISES = (
    "at most once",  # docs/run-control.md: a side-effect call runs at most once per place
    "nothing lost",  # docs/sessions.md: the run journal
    "an approval binds its call",  # docs/approvals.md: the decision runs the call approved
    "guardrails",  # docs/guardrails.md: run-level guardrails whoever holds the run
    "the untrusted policy",  # docs/untrusted.md: after_untrusted, taint carried along
    "budgets",  # docs/budgets.md: a spent budget lets no request out
    "cancellation",  # docs/run-control.md: cancel reaches every tool in flight
)
DOORS = ("library", "CLI", "web/AG-UI", "MCP serve", "durable")
FAULTS = (
    "SIGKILL in a side-effect call",
    "SIGKILL after the model's turn",
    "the same run after its commit",
    "a handoff",
    "an agent tool",
    "a resume in another process",
    "another thread",
)
Door = LibraryDoor | CliDoor | WebDoor
DOOR_MAKERS: dict[str, Callable[[Shop], Door]] = {
    "library": LibraryDoor,
    "CLI": CliDoor,
    "web/AG-UI": WebDoor,
}


@dataclass(frozen=True)
class Here:
    test: Callable[[Shop, Door], None]


@dataclass(frozen=True)
class Elsewhere:
    test: str


@dataclass(frozen=True)
class Why:
    reason: str


@dataclass(frozen=True)
class Open:
    """A cell that applies and is not proven yet: named here so it cannot be forgotten."""

    reason: str


Cell = Here | Elsewhere | Why | Open
CELLS: dict[tuple[str, str, str], Cell] = {}


def cell(promise: str, fault: str, *doors: str) -> Callable[[Any], Any]:
    """Register the decorated test as the cell (promise, door, fault) for each door."""

    def register(test: Callable[[Shop, Door], None]) -> Callable[[Shop, Door], None]:
        for door in doors:
            CELLS[(promise, door, fault)] = Here(test)
        return test

    return register


LIVE_DOORS = ("library", "CLI", "web/AG-UI")


# --- at most once ----------------------------------------------------------------------


@cell("at most once", "SIGKILL in a side-effect call", *LIVE_DOORS)
def same_prompt_again_after_a_kill_in_the_refund(shop: Shop, door: Door) -> None:
    door.killed(PROMPT, "refund")
    assert len(shop.refunds()) == 1

    told = door.ask(PROMPT)

    assert len(shop.refunds()) == 1  # not refunded a second time
    assert told.recovered == ["continued"]
    assert told.answer == "Refunded."
    assert interrupted(shop.model_read()[-1])
    assert shop.times_asked(PROMPT) == 1  # its first round was not asked again


@cell("at most once", "SIGKILL after the model's turn", *LIVE_DOORS)
def same_prompt_again_after_a_kill_once_the_turn_came(shop: Shop, door: Door) -> None:
    door.killed(PROMPT, "lookup")  # the model's turn (a lookup) came; its call was running

    told = door.ask(PROMPT)

    assert len(shop.refunds()) == 1  # the refund the model then asked for, once
    assert told.recovered == ["continued"]
    assert told.answer == "Refunded."
    assert shop.times_asked(PROMPT) == 1
    read = shop.model_read()
    assert ("tool", "refunded A1") in read


@cell("budgets", "the same run after its commit", "library", "web/AG-UI")
@cell("at most once", "the same run after its commit", "library", "web/AG-UI")
@cell("nothing lost", "the same run after its commit", "library", "web/AG-UI")
def the_same_run_id_after_its_commit(shop: Shop, door: Door) -> None:
    first = door.ask(PROMPT)
    asked = len(shop.sim.requests)

    again = door.ask(PROMPT)  # the caller could not tell whether it had committed

    assert (first.answer, again.answer) == ("Refunded.", "Refunded.")
    assert again.recovered == ["stored"]
    assert len(shop.sim.requests) == asked  # nothing asked, nothing run
    assert len(shop.refunds()) == 1
    door.ask(LATER)
    assert [text for role, text in shop.model_read() if role == "user"] == [PROMPT, LATER]


@cell("at most once", "a handoff", *LIVE_DOORS)
def same_prompt_again_after_a_kill_in_the_refund_of_the_agent_handed_to(
    shop: Shop, door: Door
) -> None:
    shop.handoff = True
    door.killed(PROMPT, "refund")  # billing's refund, after the shop's agent handed over

    told = door.ask(PROMPT)

    assert len(shop.refunds()) == 1
    assert told.recovered == ["continued"]
    assert told.answer == "Refunded."
    assert shop.sim.requests[-1]["tools"][0]["function"]["name"] == "refund_order"  # billing's
    assert interrupted(shop.model_read()[-1])
    assert shop.times_asked(PROMPT) == 1


@cell("at most once", "another thread", "library")
def the_same_run_from_two_threads_at_once_refunds_once(shop: Shop, door: Door) -> None:
    outcomes: list[object] = []

    def run(agent: Agent[None, str]) -> None:
        session = SQLiteSession(shop.workdir / "home" / "sessions.db", "crash1")
        try:
            outcomes.append(agent.run_sync(PROMPT, session=session, run_id="run-7").answer)
        except SessionConflict as conflict:
            outcomes.append(conflict)

    with pytest.MonkeyPatch.context() as patch:
        for name, value in shop.env().items():
            patch.setenv(name, value)
        agent = shop.agent_here()
        threads = [threading.Thread(target=run, args=(agent,)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)

    assert len(shop.refunds()) == 1
    assert len(outcomes) == 2
    for outcome in outcomes:  # its answer, the other's stored one, or told of the other run
        assert outcome == "Refunded." or isinstance(outcome, SessionConflict), outcome
        if isinstance(outcome, SessionConflict):  # in progress there, or stored meanwhile
            assert "run-7" in str(outcome) or "changed while this run ran" in str(outcome)


@cell("at most once", "another thread", "web/AG-UI")
@cell("nothing lost", "another thread", "web/AG-UI")
def a_second_message_while_the_first_refunds(shop: Shop, door: Door) -> None:
    assert isinstance(door, WebDoor)

    first, second = door.two_at_once(PROMPT, LATER)  # two tabs, one conversation

    assert first.answer == "Refunded."
    assert len(shop.refunds()) == 1
    assert '"code":"thread_busy"' in second  # the second is told, and changes nothing
    assert "has a run going on: wait for its end" in second
    assert PROMPT in first.shown
    assert "Refunded." in first.shown
    assert shop.times_asked(LATER) == 0


@cell("at most once", "an agent tool", *LIVE_DOORS)
def same_prompt_again_after_a_kill_in_the_refund_of_an_agent_tool(shop: Shop, door: Door) -> None:
    shop.agent_tool = True
    door.killed(PROMPT, "refund")  # inside billing's run, asked as a tool

    told = door.ask(PROMPT)

    assert len(shop.refunds()) == 1  # billing's refund is found by its key, not run again
    assert told.recovered == ["continued"]
    assert told.answer == "Refunded."
    billing_read = [
        r["messages"][-1] for r in shop.sim.requests if r["messages"][-1]["role"] == "tool"
    ]
    assert billing_read[-2]["content"].startswith(INTERRUPTED)  # billing's model is told
    assert billing_read[-1]["content"] == "Refunded."  # then the shop's, billing's answer
    assert shop.times_asked(PROMPT) == 1


# --- nothing lost --------------------------------------------------------------------


@cell("nothing lost", "SIGKILL in a side-effect call", *LIVE_DOORS)
def another_prompt_after_a_kill_in_the_refund(shop: Shop, door: Door) -> None:
    door.killed(PROMPT, "refund")

    told = door.ask(LATER)

    assert told.answer == "It is on its way."
    assert told.recovered == ["closed"]
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert read[2] == ("tool", "order A1: paid, not refunded")
    assert interrupted(read[4])
    assert read[5] == ("user", LATER)
    assert len(shop.refunds()) == 1
    assert PROMPT in told.shown or door.name != "web/AG-UI"  # the page shows the first prompt


@cell("nothing lost", "SIGKILL after the model's turn", *LIVE_DOORS)
def another_prompt_after_a_kill_once_the_turn_came(shop: Shop, door: Door) -> None:
    door.killed(PROMPT, "lookup")

    told = door.ask(LATER)

    assert told.answer == "It is on its way."
    assert told.recovered == ["closed"]
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert interrupted(read[2], side_effects=False)  # the lookup that never reported
    assert read[-1] == ("user", LATER)
    assert shop.refunds() == []


@cell("nothing lost", "a handoff", *LIVE_DOORS)
def another_prompt_after_a_kill_in_the_agent_handed_to(shop: Shop, door: Door) -> None:
    shop.handoff = True
    door.killed(PROMPT, "refund")

    told = door.ask(LATER)

    assert told.answer == "It is on its way."
    assert told.recovered == ["closed"]
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert ("tool", "Transferred to 'billing'.") in read
    assert interrupted(read[-2])
    assert read[-1] == ("user", LATER)
    assert len(shop.refunds()) == 1


@cell("nothing lost", "an agent tool", *LIVE_DOORS)
def another_prompt_after_a_kill_inside_an_agent_tool(shop: Shop, door: Door) -> None:
    shop.agent_tool = True
    door.killed(PROMPT, "refund")

    told = door.ask(LATER)

    assert told.answer == "It is on its way."
    assert told.recovered == ["closed"]
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert read[2] == ("tool", "order A1: paid, not refunded")
    assert interrupted(read[4], side_effects=False)
    assert "it may have acted through its tools" in str(read[4][1])  # not "call it again"
    assert read[-1] == ("user", LATER)
    assert len(shop.refunds()) == 1


@cell("nothing lost", "a resume in another process", *LIVE_DOORS)
@cell("at most once", "a resume in another process", "CLI", "web/AG-UI")
@cell("an approval binds its call", "SIGKILL in a side-effect call", "CLI", "web/AG-UI")
def a_kill_in_an_approved_refund_then_another_prompt(shop: Shop, door: Door) -> None:
    shop.approval = True
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)
    assert paused.stop == "paused"
    door.killed(LATER, "refund", approving=True)  # the approved refund, in another process
    assert len(shop.refunds()) == 1

    told = door.ask(LATER)

    assert told.answer == "It is on its way."
    assert told.recovered == ["closed"]
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert interrupted(read[4])
    assert read[-1] == ("user", LATER)
    assert len(shop.refunds()) == 1


# --- an approval binds its call -----------------------------------------------------


@cell("an approval binds its call", "a resume in another process", *LIVE_DOORS)
def approved_in_another_process_runs_once(shop: Shop, door: Door) -> None:
    shop.approval = True
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)
    assert paused.stop == "paused"
    assert shop.refunds() == []

    approved = door.approve()

    assert approved.answer == "Refunded."
    assert len(shop.refunds()) == 1
    told_model = [r["messages"][-1] for r in shop.sim.requests]
    assert {"role": "tool", "content": "refunded A1"} in [
        {"role": m["role"], "content": m.get("content")} for m in told_model
    ]


@cell("an approval binds its call", "SIGKILL in a side-effect call", "library")
@cell("at most once", "a resume in another process", "library")
def the_same_approval_after_a_kill_in_its_call_runs_nothing_again(shop: Shop, door: Door) -> None:
    shop.approval = True
    LibraryDoor(shop, run_id="-").ask(PROMPT)
    door.killed("", "refund", approving=True)

    again = door.approve()

    assert len(shop.refunds()) == 1
    assert again.recovered == ["continued"]
    assert again.answer == "Refunded."
    assert interrupted(shop.model_read()[-1])


@cell("an approval binds its call", "a handoff", *LIVE_DOORS)
def an_approved_refund_of_the_agent_handed_to_runs_once_there(shop: Shop, door: Door) -> None:
    shop.approval = shop.handoff = True
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)  # billing's refund waits
    assert paused.stop == "paused"

    approved = door.approve()

    assert approved.answer == "Refunded."
    assert len(shop.refunds()) == 1
    (answered,) = [
        r for r in shop.sim.requests if r["messages"][-1].get("content") == "refunded A1"
    ]
    assert [tool["function"]["name"] for tool in answered["tools"]] == ["refund_order"]  # billing


@cell("an approval binds its call", "an agent tool", *LIVE_DOORS)
def an_approved_refund_inside_an_agent_tool_runs_once_there(shop: Shop, door: Door) -> None:
    shop.approval = shop.agent_tool = True
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)  # billing's refund waits, the shop's run
    assert paused.stop == "paused"
    assert shop.refunds() == []

    approved = door.approve()

    assert approved.answer == "Refunded."
    assert len(shop.refunds()) == 1
    (answered,) = [
        r for r in shop.sim.requests if r["messages"][-1].get("content") == "refunded A1"
    ]
    assert [tool["function"]["name"] for tool in answered["tools"]] == ["refund_order"]  # billing
    shop_read = [
        r["messages"][-1].get("content")
        for r in shop.sim.requests
        if "ask_billing" in [tool["function"]["name"] for tool in r.get("tools", [])]
    ]
    assert "Refunded." in shop_read  # the shop's model read billing's answer to its call


@cell("an approval binds its call", "another thread", "library")
def one_approval_sent_from_two_processes_at_once_refunds_once(shop: Shop, door: Door) -> None:
    assert isinstance(door, LibraryDoor)
    shop.approval = True
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)
    assert paused.stop == "paused"

    children = [  # the person's code, in two workers at once, both resume the pause
        subprocess.Popen(
            door.command("", "approve"),
            env=shop.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    said = [child.communicate(timeout=180) for child in children]

    assert len(shop.refunds()) == 1  # the call approved ran once
    answered = [
        out for child, (out, _) in zip(children, said, strict=True) if child.returncode == 0
    ]
    refused = [err for child, (_, err) in zip(children, said, strict=True) if child.returncode]
    assert len(answered) == 1, said  # one resumed it; the other was told, and ran nothing
    assert json.loads(answered[0].splitlines()[-1])["answer"] == "Refunded."
    assert len(refused) == 1
    assert "SessionConflict" in refused[0] or "CheckpointError" in refused[0], refused[0][-2000:]
    assert ("tool", "refunded A1") in shop.model_read()


# --- guardrails and the untrusted policy ---------------------------------------------


@cell("guardrails", "SIGKILL in a side-effect call", *LIVE_DOORS)
def a_run_going_on_after_a_kill_keeps_its_output_guardrails(shop: Shop, door: Door) -> None:
    shop.guarded = True
    door.killed(PROMPT, "refund")

    told = door.ask(PROMPT, ok=False)  # the answer confirms the refund: the guardrail trips

    assert told.recovered == ["continued"]
    assert not told.answer  # kept out
    assert "a refund is confirmed by e-mail, never in the chat" in told.shown
    assert "Refunded." not in told.shown.replace("refund_order", "")
    assert len(shop.refunds()) == 1


@cell("guardrails", "SIGKILL after the model's turn", *LIVE_DOORS)
def a_run_going_on_after_a_kill_in_a_lookup_keeps_its_guardrails(shop: Shop, door: Door) -> None:
    shop.guarded = True
    door.killed(PROMPT, "lookup")

    told = door.ask(PROMPT, ok=False)

    assert told.recovered == ["continued"]
    assert not told.answer
    assert "a refund is confirmed by e-mail, never in the chat" in told.shown
    assert len(shop.refunds()) == 1


@cell("the untrusted policy", "SIGKILL after the model's turn", *LIVE_DOORS)
def a_run_going_on_after_a_kill_asks_before_acting_on_what_it_read(shop: Shop, door: Door) -> None:
    shop.untrusted = True  # the lookup reads customers' words; the module says "ask"
    door.killed(PROMPT, "lookup")

    told = door.ask(PROMPT)

    assert told.recovered == ["continued"]
    assert shop.refunds() == []  # not without a person's yes
    assert "untrusted content" in told.shown
    assert "lookup_order" in told.shown  # which call brought it in


@cell("guardrails", "a handoff", *LIVE_DOORS)
def the_starting_agents_output_guardrail_judges_the_agent_handed_to(shop: Shop, door: Door) -> None:
    shop.guarded = shop.handoff = True  # the module's guardrail; billing has none of its own

    told = door.ask(PROMPT, ok=False)

    assert not told.answer  # billing's "Refunded." was kept out
    assert "a refund is confirmed by e-mail, never in the chat" in told.shown
    assert len(shop.refunds()) == 1  # billing did refund: the guardrail judges the answer


@cell("guardrails", "an agent tool", *LIVE_DOORS)
def the_outer_runs_output_guardrail_judges_an_agent_tools_answer(shop: Shop, door: Door) -> None:
    shop.guarded = shop.agent_tool = True

    told = door.ask(PROMPT, ok=False)

    assert not told.answer
    assert "a refund is confirmed by e-mail, never in the chat" in told.shown
    outer_read = [
        m for r in shop.sim.requests for m in r["messages"] if m.get("tool_call_id") is not None
    ]
    billing_said = [m["content"] for m in outer_read if "the agent" in (m.get("content") or "")]
    assert billing_said, "the shop's model read billing's answer"  # stopped, not "Refunded."
    assert all("Refunded." not in text for text in billing_said)


@cell("guardrails", "a resume in another process", *LIVE_DOORS)
def a_run_approved_in_another_process_keeps_its_guardrails(shop: Shop, door: Door) -> None:
    shop.guarded = shop.approval = True
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)
    assert paused.stop == "paused"

    approved = door.approve(ok=False)

    assert not approved.answer
    assert "a refund is confirmed by e-mail, never in the chat" in approved.shown
    assert len(shop.refunds()) == 1


@cell("the untrusted policy", "a handoff", *LIVE_DOORS)
def the_agent_handed_to_asks_before_acting_on_untrusted_content(shop: Shop, door: Door) -> None:
    shop.untrusted = shop.handoff = True  # billing itself would not ask: the run's policy does

    told = door.ask(PROMPT)

    assert shop.refunds() == []
    assert "untrusted content" in told.shown
    assert "lookup_order" in told.shown


@cell("the untrusted policy", "an agent tool", *LIVE_DOORS)
def an_agent_tool_starts_tainted_and_asks_before_acting(shop: Shop, door: Door) -> None:
    shop.untrusted = shop.agent_tool = True  # the lookup tainted the shop's run, not billing's

    told = door.ask(PROMPT)

    assert shop.refunds() == []
    assert "untrusted content" in told.shown


def _refunded_a1(request: SimRequest) -> bool:
    last = request.last
    return after_tool("refund_order")(request) and last is not None and last.text == "refunded A1"


@cell("the untrusted policy", "a resume in another process", "CLI", "web/AG-UI")
def the_rounds_after_a_resume_in_another_process_still_ask(shop: Shop, door: Door) -> None:
    shop.untrusted = True  # the lookup's result taints the run; its refund waits for a yes
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)
    assert paused.stop == "paused"
    second = call("refund_order", {"order_id": "A2"})  # what the model asks after the resume
    with ProviderSimulator([], rules=[rule(_refunded_a1, second), *shop_rules()]) as sim:
        shop.sim = sim  # the same shop's model, which goes on to refund A2 too
        if isinstance(door, CliDoor):
            terminal = door.at_terminal(LATER)  # the paused run goes on first, asking
            terminal.expect('approve refund_order(order_id="A1")?')
            terminal.send("y\r")
            shown = terminal.expect('approve refund_order(order_id="A2")?')
            terminal.send("n\r")
            status, shown = terminal.finish()
            assert status == 0, shown
            asked_again = shown[shown.index('order_id="A1")?') :]
        else:
            assert isinstance(door, WebDoor)
            told = door.approve()  # approved, posted to a fresh tooldeck web
            assert '"outcome":{"type":"interrupt"' in told.shown.replace(" ", ""), told.shown
            asked_again = told.shown
            assert len(sim.requests) == 1  # its one round after the resume: it asked again

    assert len(shop.refunds()) == 1  # A1, approved; A2 not without a yes
    assert "untrusted content" in asked_again  # why the second refund waits too
    assert "lookup_order" in asked_again


# --- budgets -------------------------------------------------------------------------


@cell("budgets", "SIGKILL after the model's turn", "library")
def a_run_going_on_after_a_kill_spends_what_its_budget_has_left(shop: Shop, door: Door) -> None:
    shop.max_requests = 2
    door.killed(PROMPT, "lookup")  # one request spent, in the process killed

    told = door.ask(PROMPT)  # the same run goes on: the budget's second request is its last

    assert told.recovered == ["continued"]
    assert len(shop.sim.requests) == 2  # the one the killed process spent counts
    assert told.stop == "budget"
    assert told.answer == ""
    assert shop.refunds() == []  # the turn that spent the budget: its calls do not run


@cell("budgets", "SIGKILL after the model's turn", "CLI", "web/AG-UI")
def a_run_going_on_after_a_kill_counts_the_killed_processs_spend(shop: Shop, door: Door) -> None:
    shop.max_cost = 15  # a dollar an output token: the lookup's turn costs 11, the refund's 11
    door.killed(PROMPT, "lookup")  # $11 spent, in the process killed

    told = door.ask(PROMPT, ok=False)  # the same run goes on: its second request reaches $22

    assert told.recovered == ["continued"]
    assert len(shop.sim.requests) == 2  # none after the limit, --on-limit final-answer or not
    assert shop.refunds() == []  # the turn that spent it: its calls do not run
    assert not told.answer  # no empty answer shown as one
    if isinstance(door, CliDoor):
        assert "$22; stop: max_cost" in told.shown  # the killed process's $11 in it
        assert "the run stopped without an answer: the run spent its cost limit" in told.shown
    else:
        assert '"stopReason":"max_cost"' in told.shown.replace(" ", "")
        assert "not run: the run spent $22.000000 (max_cost_usd=15.0)" in told.shown


@cell("budgets", "SIGKILL in a side-effect call", "CLI", "web/AG-UI")
def a_run_going_on_after_a_kill_in_the_refund_counts_what_was_spent(shop: Shop, door: Door) -> None:
    shop.max_cost = 24  # $11 the lookup's turn, $11 the refund's, $3 the answer
    door.killed(PROMPT, "refund")  # $22 spent, the refund made, in the process killed

    told = door.ask(PROMPT)  # $22 < $24: the last request may go; its answer counts whole

    assert told.recovered == ["continued"]
    assert told.answer == "Refunded."
    assert len(shop.sim.requests) == 3
    assert len(shop.refunds()) == 1
    assert "$25" in told.shown  # the run's cost, the killed process's $22 in it: overspent
    assert "$3" not in told.shown


@cell("budgets", "an agent tool", "CLI", "web/AG-UI")
def an_agent_tools_run_spends_what_the_outer_run_has_left(shop: Shop, door: Door) -> None:
    shop.agent_tool = True
    shop.max_cost = 30  # $11 the lookup's turn, $14 asking billing: $5 left for billing

    told = door.ask(PROMPT, ok=False)

    assert len(shop.sim.requests) == 3  # billing's first turn ($11) spent it: nothing after
    assert shop.refunds() == []  # that turn's refund did not run
    assert not told.answer
    if isinstance(door, CliDoor):
        assert "$36; stop: max_cost" in told.shown  # billing's turn counted in the run's cost
        assert "the run stopped without an answer: the run spent its cost limit" in told.shown
    else:
        assert '"stopReason":"max_cost"' in told.shown.replace(" ", "")
        assert "the agent 'ask_billing' stopped without an answer" in told.shown


@cell("budgets", "SIGKILL in a side-effect call", "library")
def a_shared_budget_counts_the_requests_of_a_process_killed_in_the_refund(
    shop: Shop, door: Door
) -> None:
    shop.max_requests = 3
    door.killed(PROMPT, "refund")  # two requests taken from the budget, the refund made

    told = door.ask(PROMPT)  # the same run goes on: the third request is its answer

    assert told.recovered == ["continued"]
    assert told.answer == "Refunded."
    assert len(shop.sim.requests) == 3
    later = door.ask(LATER)  # the budget is spent: not one request more
    assert later.stop == "budget"
    assert later.answer == ""
    assert len(shop.sim.requests) == 3
    assert len(shop.refunds()) == 1


@cell("budgets", "a resume in another process", "CLI", "web/AG-UI")
def a_run_approved_in_another_process_counts_what_it_spent_before_its_pause(
    shop: Shop, door: Door
) -> None:
    shop.approval = True
    shop.max_cost = 30
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)  # $22 spent before the refund waits
    assert paused.stop == "paused"
    shop.max_cost = 20  # the door that approves it gives the run $20

    approved = door.approve(ok=False)  # the approved refund runs; no request after it

    assert len(shop.refunds()) == 1
    assert len(shop.sim.requests) == 2  # the $22 spent before the pause counted: spent
    assert not approved.answer  # no empty answer shown as one
    if isinstance(door, CliDoor):
        assert f"answer to {PROMPT!r}" not in approved.shown
        assert "$22; stop: max_cost" in approved.shown
        assert "the run stopped without an answer: the run spent its cost limit" in approved.shown
        assert shop.times_asked(LATER) == 0  # the command stopped there, as at any stop
    else:
        assert '"stopReason":"max_cost"' in approved.shown.replace(" ", "")
        assert '<div class="muted small">$22</div>' in approved.shown  # its runs page


@cell("budgets", "another thread", "web/AG-UI")
def two_conversations_at_once_each_stop_at_their_own_limit(shop: Shop, door: Door) -> None:
    assert isinstance(door, WebDoor)
    shop.max_cost = 15

    first, second = door.two_threads(PROMPT)  # one server, two conversations at once

    for told in (first, second):
        assert told.answer is None
        assert '"stopReason":"max_cost"' in told.shown.replace(" ", "")
        assert "not run: the run spent $22" in told.shown  # each its own $22, not $44
    assert len(shop.sim.requests) == 4  # two each: none after either's limit
    assert shop.refunds() == []


# --- cancellation ----------------------------------------------------------------------


@cell("cancellation", "a handoff", "library")
def a_cancel_from_another_thread_reaches_the_tool_of_the_agent_handed_to(
    shop: Shop, door: Door
) -> None:
    shop.handoff = True

    async def cancelled_in_billing() -> RunResult[str]:
        handle = shop.agent_here().start(PROMPT)
        while not shop.hanging.exists():  # billing's refund runs, polling ctx.cancelled
            await asyncio.sleep(0.01)
        canceller = threading.Thread(target=handle.cancel, args=("the customer left",))
        canceller.start()
        canceller.join()
        try:
            return await handle.result()
        except RunStopped as stopped:
            if not isinstance(stopped.result, RunResult):
                raise
            return stopped.result

    with pytest.MonkeyPatch.context() as patch:
        for name, value in shop.env("refund-until-cancelled").items():
            patch.setenv(name, value)
        result = asyncio.run(cancelled_in_billing())

    assert result.stop_reason == "cancelled"
    assert result.agent == "billing"
    assert (shop.workdir / "effects.told").exists()  # billing's sync tool was told
    assert len(shop.refunds()) == 1


CTRL_C = (
    "error[cancelled]: the run was cancelled (interrupted by Ctrl-C) before this call finished"
    + MAY_HAVE_RUN
)


@cell("cancellation", "a handoff", "CLI")
def ctrl_c_reaches_the_sync_tool_of_the_agent_handed_to(shop: Shop, door: Door) -> None:
    assert isinstance(door, CliDoor)
    shop.handoff = True

    status, shown = door.ctrl_c(PROMPT, "refund-until-cancelled")  # in billing's refund

    assert (shop.workdir / "effects.told").exists()  # billing's sync tool was told
    assert status == 130, shown
    assert "stop: cancelled (interrupted by Ctrl-C)" in shown
    assert (
        "tooldeck: interrupted: the run was cancelled; conversation 'crash1' keeps what it did "
        "(refund_order answered as cancelled)"
    ) in shown
    door.ask(LATER)
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert ("tool", "Transferred to 'billing'.") in read
    assert read[-2:] == [("tool", CTRL_C), ("user", LATER)]
    assert len(shop.refunds()) == 1


@cell("cancellation", "an agent tool", "CLI")
def ctrl_c_reaches_the_sync_tool_inside_an_agent_tool(shop: Shop, door: Door) -> None:
    assert isinstance(door, CliDoor)
    shop.agent_tool = True

    status, shown = door.ctrl_c(PROMPT, "refund-until-cancelled")  # in billing's inner run

    assert (shop.workdir / "effects.told").exists()
    assert status == 130, shown
    assert "stop: cancelled (interrupted by Ctrl-C)" in shown
    assert "conversation 'crash1' keeps what it did (ask_billing answered as cancelled)" in shown
    door.ask(LATER)
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert read[2] == ("tool", "order A1: paid, not refunded")
    assert read[-2:] == [("tool", CTRL_C), ("user", LATER)]
    assert len(shop.refunds()) == 1


@cell("cancellation", "a handoff", "web/AG-UI")
def a_client_that_goes_away_tells_the_tool_of_the_agent_handed_to(shop: Shop, door: Door) -> None:
    assert isinstance(door, WebDoor)
    shop.handoff = True

    assert door.gone(PROMPT, "refund-until-cancelled")  # billing's refund was told

    told = door.ask(LATER)  # the run the page left stopped as it stood: nothing is lost
    assert told.recovered == ["closed"]
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert ("tool", "Transferred to 'billing'.") in read
    assert interrupted(read[-2])
    assert len(shop.refunds()) == 1


@cell("cancellation", "an agent tool", "web/AG-UI")
def a_client_that_goes_away_tells_the_tool_inside_an_agent_tool(shop: Shop, door: Door) -> None:
    assert isinstance(door, WebDoor)
    shop.agent_tool = True

    assert door.gone(PROMPT, "refund-until-cancelled")  # inside billing's inner run

    told = door.ask(LATER)
    assert told.recovered == ["closed"]
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert interrupted(read[4], side_effects=False)  # ask_billing, which may have acted
    assert "it may have acted through its tools" in str(read[4][1])
    assert len(shop.refunds()) == 1


@cell("cancellation", "a resume in another process", "web/AG-UI")
def a_client_that_goes_away_from_a_resume_tells_the_approved_tool(shop: Shop, door: Door) -> None:
    assert isinstance(door, WebDoor)
    shop.approval = True
    paused = LibraryDoor(shop, run_id="-").ask(PROMPT)
    assert paused.stop == "paused"

    assert door.gone("", "refund-until-cancelled", approving=True)  # in a fresh tooldeck web

    told = door.ask(LATER)
    assert told.recovered == ["closed"]
    read = shop.model_read()
    assert read[0] == ("user", PROMPT)
    assert interrupted(read[-2])
    assert len(shop.refunds()) == 1


# --- the cells proven by other files -------------------------------------------------

PROVEN_ELSEWHERE: dict[tuple[str, str, str], str] = {
    ("at most once", "durable", "SIGKILL in a side-effect call"):
        "tests/test_durable_safety.py::test_a_durable_run_recovered_after_a_kill_in_its_refund_refunds_once_and_loses_nothing",
    ("at most once", "durable", "SIGKILL after the model's turn"):
        "tests/test_durable_safety.py::test_a_durable_run_killed_while_its_model_answers_asks_again_and_refunds_once",
    ("at most once", "durable", "the same run after its commit"):
        "tests/test_durable_safety.py::test_a_committed_durable_run_started_again_asks_and_runs_nothing",
    ("at most once", "durable", "a handoff"):
        "tests/test_durable_safety.py::test_the_agent_a_durable_run_is_handed_to_refunds_once_after_a_kill_in_its_refund",
    ("at most once", "durable", "an agent tool"):
        "tests/test_durable_safety.py::test_an_agent_tool_of_a_durable_run_refunds_once_after_a_kill_inside_it",
    ("at most once", "durable", "a resume in another process"):
        "tests/test_durable_safety.py::test_a_durable_run_approved_in_another_process_runs_the_approved_refund_once",
    ("at most once", "durable", "another thread"):
        "tests/test_durable_safety.py::test_the_same_durable_run_started_from_two_threads_at_once_refunds_once",
    ("nothing lost", "durable", "SIGKILL in a side-effect call"):
        "tests/test_durable_safety.py::test_a_durable_run_recovered_after_a_kill_in_its_refund_refunds_once_and_loses_nothing",
    ("nothing lost", "durable", "SIGKILL after the model's turn"):
        "tests/test_durable_safety.py::test_a_durable_run_recovered_after_a_kill_in_its_lookup_keeps_its_turn_whole",
    ("nothing lost", "durable", "the same run after its commit"):
        "tests/test_durable_safety.py::test_a_committed_durable_run_started_again_asks_and_runs_nothing",
    ("nothing lost", "durable", "a handoff"):
        "tests/test_durable_safety.py::test_a_durable_run_paused_in_the_agent_handed_to_refunds_once_when_approved",
    ("nothing lost", "durable", "an agent tool"):
        "tests/test_durable_safety.py::test_an_agent_tool_of_a_durable_run_refunds_once_after_a_kill_inside_it",
    ("nothing lost", "durable", "a resume in another process"):
        "tests/test_durable_safety.py::test_an_approved_durable_run_keeps_its_turn_for_the_conversations_next_run",
    ("nothing lost", "durable", "another thread"):
        "tests/test_durable_sessions.py::test_a_run_that_finds_the_session_changed_raises_session_conflict",
    ("nothing lost", "library", "another thread"):
        "tests/test_cancel.py::test_a_cancelled_run_commits_to_its_session_and_the_next_run_goes_on",
    ("an approval binds its call", "durable", "a handoff"):
        "tests/test_durable_safety.py::test_a_durable_run_paused_in_the_agent_handed_to_refunds_once_when_approved",
    ("an approval binds its call", "durable", "an agent tool"):
        "tests/test_durable_safety.py::test_a_durable_run_paused_inside_an_agent_tool_refunds_once_when_approved",
    ("an approval binds its call", "durable", "a resume in another process"):
        "tests/test_durable_safety.py::test_a_durable_run_approved_in_another_process_runs_the_approved_refund_once",
    ("an approval binds its call", "web/AG-UI", "the same run after its commit"):
        "tests/test_agui.py::test_an_answer_to_an_interrupt_no_call_waits_for_is_refused",
    ("an approval binds its call", "web/AG-UI", "another thread"):
        "tests/test_agui.py::test_a_new_message_while_a_call_waits_is_refused_and_changes_nothing",
    ("guardrails", "MCP serve", "another thread"):
        "tests/test_mcp_serve_guardrails.py::test_guardrails_given_to_the_server_judge_every_served_call",
    ("guardrails", "durable", "a handoff"):
        "tests/test_durable_safety.py::test_the_starting_agents_output_guardrail_judges_the_agent_a_durable_run_is_handed_to",
    ("guardrails", "durable", "SIGKILL in a side-effect call"):
        "tests/test_durable_safety.py::test_a_durable_run_recovered_after_a_kill_in_its_refund_keeps_its_output_guardrail",
    ("guardrails", "durable", "SIGKILL after the model's turn"):
        "tests/test_durable_safety.py::test_a_durable_run_recovered_after_a_kill_in_its_lookup_keeps_its_output_guardrail",
    ("guardrails", "durable", "an agent tool"):
        "tests/test_durable_safety.py::test_a_durable_runs_output_guardrail_judges_an_agent_tool_recovered_after_a_kill",
    ("guardrails", "durable", "a resume in another process"):
        "tests/test_durable_safety.py::test_a_durable_run_approved_in_another_process_keeps_its_output_guardrail",
    ("the untrusted policy", "durable", "SIGKILL after the model's turn"):
        "tests/test_durable_safety.py::test_a_durable_run_recovered_after_a_kill_once_the_lookup_came_asks_before_refunding",
    ("the untrusted policy", "durable", "a handoff"):
        "tests/test_durable_safety.py::test_the_agent_a_durable_run_is_handed_to_asks_after_a_kill_and_recovery",
    ("the untrusted policy", "durable", "an agent tool"):
        "tests/test_durable_safety.py::test_an_agent_tool_of_a_durable_run_starts_tainted_after_a_kill_and_recovery",
    ("the untrusted policy", "durable", "a resume in another process"):
        "tests/test_durable_safety.py::test_a_durable_run_approved_in_another_process_still_asks_after_untrusted_content",
    ("the untrusted policy", "durable", "another thread"):
        "tests/test_durable_safety.py::test_the_next_durable_run_of_a_tainted_conversation_asks_on_another_worker",
    ("the untrusted policy", "library", "a resume in another process"):
        "tests/test_untrusted_content.py::test_a_run_approved_in_another_process_still_asks_after_untrusted_content",
    ("the untrusted policy", "library", "another thread"):
        "tests/test_untrusted_content.py::test_the_next_run_of_a_conversation_in_another_process_still_asks",
    ("the untrusted policy", "MCP serve", "another thread"):
        "tests/test_cli_doors.py::test_mcp_serve_and_eval_refuse_a_modules_untrusted_policy",
    ("budgets", "library", "an agent tool"):
        "tests/test_budget_nested.py::test_a_budget_spent_inside_an_agent_tool_stops_the_outer_run_too",
    ("budgets", "library", "a resume in another process"):
        "tests/test_budget_spent.py::test_a_resumed_run_past_its_token_limit_is_not_asked_for_a_last_answer",
    ("budgets", "library", "another thread"):
        "tests/test_budget.py::test_runs_in_threads_never_pass_a_request_budget",
    ("budgets", "durable", "an agent tool"):
        "tests/test_durable_run_control.py::test_an_agent_tools_inner_run_draws_on_the_durable_runs_budget",
    ("budgets", "durable", "another thread"):
        "tests/test_durable_run_control.py::test_a_durable_run_draws_on_a_named_budget_and_stops_when_it_is_spent",
    ("budgets", "durable", "SIGKILL in a side-effect call"):
        "tests/test_durable_run_control_promises.py::test_a_durable_run_recovered_after_a_kill_in_its_refund_counts_what_the_worker_spent",
    ("budgets", "durable", "SIGKILL after the model's turn"):
        "tests/test_durable_run_control_promises.py::test_a_durable_run_recovered_after_a_kill_once_the_turn_came_counts_that_request",
    ("budgets", "durable", "the same run after its commit"):
        "tests/test_durable_run_control_promises.py::test_the_same_durable_run_started_again_after_its_commit_asks_and_spends_nothing",
    ("budgets", "durable", "a resume in another process"):
        "tests/test_durable_run_control_promises.py::test_a_paused_durable_run_approved_from_another_process_keeps_drawing_on_its_budget",
    ("cancellation", "library", "an agent tool"):
        "tests/test_cancel_nested.py::test_a_sync_tool_two_agent_tools_deep_is_told_too",
    ("cancellation", "library", "another thread"):
        "tests/test_cancel_nested.py::test_a_cancel_from_another_thread_reaches_a_sync_tool_inside_an_agent_tool",
    ("cancellation", "library", "a resume in another process"):
        "tests/test_cancel.py::test_a_resumed_run_started_with_a_handle_is_cancelled_and_committed",
    ("cancellation", "CLI", "a resume in another process"):
        "tests/test_cli_ctrl_c.py::test_ctrl_c_after_an_approval_cancels_the_resumed_run_and_keeps_it",
    ("cancellation", "MCP serve", "an agent tool"):
        "tests/test_cancel_nested.py::test_an_mcp_call_inside_an_agent_tool_is_cancelled_at_the_server",
    ("cancellation", "MCP serve", "another thread"):
        "tests/test_mcp_serve_cli.py::test_a_client_that_cancels_a_call_tells_the_sync_tool_and_the_server_goes_on",
    ("cancellation", "durable", "another thread"):
        "tests/test_durable_run_control.py::test_a_durable_run_is_cancelled_in_its_call_and_its_workflow_ends_cancelled",
    ("cancellation", "web/AG-UI", "another thread"):
        "tests/test_agui_streaming.py::test_a_client_that_goes_away_stops_the_run_and_frees_the_thread",
    ("cancellation", "durable", "a handoff"):
        "tests/test_durable_run_control_promises.py::test_a_durable_run_is_cancelled_while_the_agent_handed_to_is_in_a_sync_tool",
    ("cancellation", "durable", "an agent tool"):
        "tests/test_durable_run_control_promises.py::test_a_durable_run_is_cancelled_while_an_agent_tools_inner_run_is_in_a_sync_tool",
    ("cancellation", "durable", "a resume in another process"):
        "tests/test_durable_run_control.py::test_a_durable_run_waiting_for_decisions_is_cancelled_and_nothing_runs",
}  # fmt: skip

# --- the cells that cannot apply, and why ------------------------------------------

MCP_SERVE = (
    "tooldeck mcp serve runs one tool call per request for the client's agent: the run, its "
    "conversation, its retries and its journal are the client's"
)
NO_RUN_ID_AT_THE_CLI = (
    "each tooldeck run command is a new run with a new id: there is no run id to give again "
    "(the same prompt again after a crash goes on with its run: the SIGKILL cells)"
)
ONE_PROCESS_ONE_RUN = (
    "tooldeck run runs one run in its process; two commands at once in one conversation are "
    "two processes, and the second is refused with SessionConflict before it asks anything "
    "(tests/test_session_processes.py::test_racing_runs_one_commits_the_others_get_a_conflict)"
)
BEFORE_A_PAUSE = (
    "a call waits for a decision only once its run paused and committed its checkpoint; a kill "
    "before that is a kill of a run in progress (the at-most-once and nothing-lost cells)"
)
RULES: list[tuple[tuple[str, str, str], Why]] = [
    (("*", "CLI", "the same run after its commit"), Why(NO_RUN_ID_AT_THE_CLI)),
    (("*", "CLI", "another thread"), Why(ONE_PROCESS_ONE_RUN)),
    (("an approval binds its call", "*", "SIGKILL after the model's turn"), Why(BEFORE_A_PAUSE)),
    (("an approval binds its call", "library", "the same run after its commit"), Why(
        "a resume claims its pause once: a resume again after its run committed finds no pause "
        "to decide on and is refused (CheckpointError), as the SIGKILL cell's first resume shows"
    )),
    (("an approval binds its call", "durable", "SIGKILL in a side-effect call"), Why(
        "an approved call of a durable run is a step of its workflow: a kill inside it is the "
        "durable at-most-once cell (the recovered workflow answers it from its record)"
    )),
    (("an approval binds its call", "durable", "the same run after its commit"), Why(
        "decisions reach a durable run as a message to its waiting workflow; once the workflow "
        "ended there is nothing to decide (tests/test_durable.py::test_a_message_for_another_"
        "pause_is_ignored_and_the_run_keeps_waiting)"
    )),
    (("an approval binds its call", "durable", "another thread"), Why(
        "a durable run's decisions are one message its own workflow reads once: there is no "
        "second claimant to race"
    )),
    (("*", "MCP serve", "SIGKILL*"), Why(MCP_SERVE)),
    (("*", "MCP serve", "the same run after its commit"), Why(MCP_SERVE)),
    (("*", "MCP serve", "a resume in another process"), Why(MCP_SERVE)),
    (("*", "MCP serve", "a handoff"), Why(
        "an MCP client calls tools one by one; no agent of tooldeck's holds a run to hand over"
    )),
    (("*", "MCP serve", "an agent tool"), Why(MCP_SERVE)),
    (("cancellation", "*", "SIGKILL*"), Why(
        "a killed process has nothing left in flight to cancel: what its calls became is the "
        "nothing-lost cells"
    )),
    (("cancellation", "*", "the same run after its commit"), Why(
        "a committed run has nothing in flight: sent again, nothing is asked or run (the "
        "at-most-once cells)"
    )),
    (("guardrails", "*", "the same run after its commit"), Why(
        "a run sent again after its commit is answered from the session as stored, nothing "
        "asked: its answer was judged when it ran (a tripped run stores no answer)"
    )),
    (("the untrusted policy", "*", "the same run after its commit"), Why(
        "a run sent again after its commit runs no call: nothing is there to ask about (the "
        "at-most-once cells)"
    )),
    (("the untrusted policy", "*", "SIGKILL in a side-effect call"), Why(
        "under the policy a side-effect call after untrusted content runs only once a person "
        "approved it: a kill inside it is the cell 'an approval binds its call × SIGKILL in a "
        "side-effect call'; with the policy off it is the at-most-once cell"
    )),
    (("guardrails", "*", "another thread"), Why(
        "guardrails judge the run they are given to, in any thread; a second run at once in "
        "one conversation is refused before anything is judged (the at-most-once cells)"
    )),
    (("the untrusted policy", "web/AG-UI", "another thread"), Why(
        "a second message while a run goes on is refused (thread_busy) before anything is read "
        "or run: the at-most-once × web/AG-UI × another thread cell"
    )),
    (("budgets", "*", "a handoff"), Why(
        "a handoff does not start a run: the agent handed to goes on with the run's counters "
        "and its budget (tests/test_handoffs.py::test_each_transfer_counts_as_a_tool_call); "
        "what a spent budget lets out is the same cell without a handoff"
    )),
    (("budgets", "MCP serve", "another thread"), Why(
        "tooldeck mcp serve asks no model: there is nothing for a budget to count"
    )),
    (("at most once", "MCP serve", "another thread"), Why(MCP_SERVE)),
    (("nothing lost", "MCP serve", "another thread"), Why(MCP_SERVE)),
    (("an approval binds its call", "MCP serve", "another thread"), Why(
        "tooldeck mcp serve does not serve tools that need approval unless allowed "
        "(tests/test_mcp_server.py::test_approval_tools_only_when_allowed_and_external_tools_never)"
    )),
]  # fmt: skip


NOT_YET = "not proven yet at this door under this fault"
OPEN: dict[tuple[str, str, str], Open] = {}
"""The cells that apply and are not proven yet — none now (33 when the matrix was written);
a promise, door or fault added later lists its unproven cells here, ``Open(NOT_YET)``."""


def cell_of(promise: str, door: str, fault: str) -> Cell | None:
    """The cell of the matrix: registered, or the first rule that covers it."""
    if (promise, door, fault) in CELLS:
        return CELLS[(promise, door, fault)]
    if (promise, door, fault) in PROVEN_ELSEWHERE:
        return Elsewhere(PROVEN_ELSEWHERE[(promise, door, fault)])
    if (promise, door, fault) in OPEN:
        return OPEN[(promise, door, fault)]
    for (p, d, f), why in RULES:
        if all(
            pattern == "*"
            or given == pattern
            or (pattern.endswith("*") and given.startswith(pattern[:-1]))
            for pattern, given in ((p, promise), (d, door), (f, fault))
        ):
            return why
    return None


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_every_cell_is_proven_or_says_why() -> None:
    missing = [
        f"{promise} × {door} × {fault}"
        for promise in PROMISES
        for door in DOORS
        for fault in FAULTS
        if cell_of(promise, door, fault) is None
    ]
    assert missing == [], "cells neither proven nor explained:\n" + "\n".join(missing)
    here = Path(__file__).parent
    every = [cell_of(p, d, f) for p in PROMISES for d in DOORS for f in FAULTS]
    for found in every:
        if isinstance(found, Elsewhere):
            file, _, name = found.test.partition("::")
            assert name in _tests_in(here.parent / file), f"{found.test} does not exist"
        if isinstance(found, Why):
            assert len(found.reason) > 40


def test_the_open_cells_are_the_ones_written_down() -> None:
    open_cells = [
        (p, d, f)
        for p in PROMISES
        for d in DOORS
        for f in FAULTS
        if isinstance(cell_of(p, d, f), Open)
    ]
    assert len(open_cells) == len(OPEN)  # none shadowed by a cell proven since: drop it here
    assert len(OPEN) == 0  # every cell is proven or says why; it was 33 when the matrix was written


def _here_cells() -> Iterator[Any]:
    for (promise, door, fault), found in CELLS.items():
        if isinstance(found, Here):
            yield pytest.param(found.test, door, id=f"{promise} | {door} | {fault}")


@pytest.mark.parametrize(("test", "door"), list(_here_cells()))
def test_the_promise_holds(
    test: Callable[[Shop, Door], None],
    door: str,
    tmp_path: Path,
    provider: Callable[..., ProviderSimulator],
) -> None:
    shop = Shop(tmp_path, provider([], rules=shop_rules()))
    test(shop, DOOR_MAKERS[door](shop))
