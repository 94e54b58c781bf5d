"""What an agent tool's run shows at the front doors (issue 38), called by the model or by a
code-mode program.

The CLI shows the run inside the call — its turns, the words beside its calls, its calls and
their results — in lines indented under the call and named after the agent tool, at a real
pty and with stdout redirected; ``--json`` gives each agent-tool call's ``inner`` calls. Over
AG-UI the run is a subagent: ``SUBAGENT_STARTED`` (tied to the call), each of its events
carrying its ``subagentRunId``, ``SUBAGENT_FINISHED`` with its answer before the call's
result; a pause inside it suspends the subagent, naming the interrupt it raised, and the run
that goes on after the decision starts it again. The model is the provider simulator (fresh
call ids), one script for the outer model and the agent tool's in turn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from _agui import approve, new_input, of_type, post
from _pty import Terminal
from test_cli_doors import MODEL
from tooldeck import Agent, tool
from tooldeck.code import CodeMode
from tooldeck.serve.agui import app
from tooldeck.testing import ProviderSimulator, call, reply

Provider = Callable[..., ProviderSimulator]

CLERK = textwrap.dedent(
    '''
    from tooldeck import Agent, ToolRegistry, tool
    from tooldeck.code import CodeMode


    @tool
    def price(item: str) -> float:
        """The price of an item."""
        return {"fig": 2.0}[item]


    clerk = Agent("openai-chat:gpt-4.1-mini", [price], name="clerk").as_tool(
        name="clerk", description="Answers questions about prices."
    )
    tools = ToolRegistry([clerk])
    capabilities = [CodeMode()] if IN_A_PROGRAM else []
    '''
)
DIRECT = call("clerk", {"input": "fig?"})
PROGRAM = call("run_code", {"code": 'said = await clerk(input="fig?")\nsaid'})
INSIDE = [
    "    clerk: round 1: 1 tool call (",
    "    clerk: Looking it up.",
    '    clerk: → price(item="fig")',
    "    clerk: ← 2.0  (",
    "    clerk: round 2: answer (",
]
"""The clerk's lines, in order, under its call."""


def clerk_script(first: Any) -> list[Any]:
    """The outer model's ``first`` turn (it calls the clerk), the clerk's two turns, the
    outer model's answer."""
    looked_up = call("price", {"item": "fig"}, text="Looking it up.")
    return [first, looked_up, reply("A fig costs 2.0."), reply("Figs are 2.0.")]


def command(tmp_path: Path, sim: ProviderSimulator, program: bool, *options: str) -> list[str]:
    """``tooldeck run`` of the clerk module (the clerk called in a program with ``program``)."""
    module = CLERK.replace("IN_A_PROGRAM", repr(program))
    (tmp_path / "shop.py").write_text(module, encoding="utf-8")
    run = [sys.executable, "-m", "tooldeck.cli", "run", "What does a fig cost?"]
    return [*run, "-t", "shop.py:tools", "--model", MODEL, "--base-url", sim.base_url, *options]


def environment(tmp_path: Path, sim: ProviderSimulator) -> dict[str, str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return {**base, **sim.env, "TOOLDECK_HOME": str(tmp_path / "home")}


def run_captured(
    tmp_path: Path, sim: ProviderSimulator, program: bool, *options: str
) -> subprocess.CompletedProcess[str]:
    """``tooldeck run`` in a process of its own, its output captured (no terminal)."""
    return subprocess.run(
        command(tmp_path, sim, program, *options),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment(tmp_path, sim),
        timeout=120,
        check=False,
    )


def in_order(shown: str, *starts: str) -> list[str]:
    """The lines of ``shown`` that start with ``starts``, found in this order."""
    lines, at, found = shown.splitlines(), 0, []
    for start in starts:
        hit = next((i for i in range(at, len(lines)) if lines[i].startswith(start)), None)
        assert hit is not None, f"no line starting {start!r} (in order) in:\n{shown}"
        found.append(lines[hit])
        at = hit + 1
    return found


@pytest.mark.parametrize("program", [False, True], ids=["direct", "in-a-program"])
def test_the_cli_shows_the_agent_tools_run_under_its_call_with_stdout_redirected(
    tmp_path: Path, provider: Provider, program: bool
) -> None:
    sim = provider(clerk_script(PROGRAM if program else DIRECT))
    done = run_captured(tmp_path, sim, program)

    assert done.returncode == 0, done.stderr
    calling = '  → run_code(code="said = await clerk' if program else '  → clerk(input="fig?")'
    in_order(done.stdout, calling, *INSIDE, "  ← A fig costs 2.0.", "answer: Figs are 2.0.")
    assert "clerk: A fig costs 2.0." not in done.stdout  # its answer is the call's result


def test_the_cli_shows_a_programs_agent_tool_run_at_a_terminal(
    tmp_path: Path, provider: Provider
) -> None:
    sim = provider(clerk_script(PROGRAM))
    terminal = Terminal(command(tmp_path, sim, True), tmp_path, environment(tmp_path, sim))

    status, shown = terminal.finish()

    assert status == 0, shown
    in_order(shown, '  → clerk(input="fig?")', *INSIDE, "  ← A fig costs 2.0.", "answer: ")


@pytest.mark.parametrize("program", [False, True], ids=["direct", "in-a-program"])
def test_json_gives_an_agent_tool_calls_inner_calls(
    tmp_path: Path, provider: Provider, program: bool
) -> None:
    sim = provider(clerk_script(PROGRAM if program else DIRECT))
    done = run_captured(tmp_path, sim, program, "--json")

    assert done.returncode == 0, done.stderr
    calls = json.loads(done.stdout)["calls"]
    if program:  # the program's calls are run_code's inner ones
        (run_code,) = calls
        assert run_code["name"] == "run_code"
        calls = run_code["inner"]
    (clerk,) = calls
    assert (clerk["id"], clerk["name"]) == (
        f"{sim.call_ids[0]}.1" if program else sim.call_ids[0],
        "clerk",
    )
    (inner,) = clerk["inner"]
    assert (inner["id"], inner["name"], inner["arguments"]) == (
        sim.call_ids[1],
        "price",
        {"item": "fig"},
    )
    assert (inner["ok"], inner["output"], "inner" in inner) == (True, "2.0", False)


@tool
def price(item: str) -> float:
    """The price of an item."""
    return {"fig": 2.0}[item]


refunded: list[str] = []


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    refunded.append(order_id)
    return f"refunded {order_id}"


def shop(outer: ProviderSimulator, inner: ProviderSimulator, program: bool) -> Agent:
    clerk = Agent(inner.model(), [price, refund], name="clerk")
    tools = [clerk.as_tool(name="clerk", description="Prices and refunds.")]
    return Agent(outer.model(), tools, capabilities=[CodeMode()] if program else [])


def of_subagent(events: list[BaseEvent], run_id: str | None) -> list[BaseEvent]:
    """The events attributed to the subagent ``run_id`` (None: the run's own)."""
    return [e for e in events if e.model_dump().get("subagent_run_id") == run_id]


@pytest.mark.parametrize("program", [False, True], ids=["direct", "in-a-program"])
async def test_agui_sends_the_agent_tools_run_as_a_subagent_tied_to_its_call(
    tmp_path: Path, provider: Provider, program: bool
) -> None:
    first = PROGRAM if program else DIRECT
    outer = provider([first, reply("Figs are 2.0.")])
    looked_up = call("price", {"item": "fig"}, text="Looking it up.")
    inner = provider([looked_up, reply("A fig costs 2.0.")])
    transport = httpx.ASGITransport(app=app(shop(outer, inner, program), data_dir=tmp_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        events = await post(client, new_input("t1", "What does a fig cost?"))  # sequence checked

    made = outer.call_ids[0]
    clerk_call = f"{made}.1" if program else made
    sub = f"{made}/{clerk_call}" if program else made  # as a pending call's id names it
    (started,) = of_type(events, SubagentStartedEvent)
    (start_of_made,) = [e for e in of_type(events, ToolCallStartEvent) if e.tool_call_id == made]
    assert (started.subagent_run_id, started.name) == (sub, "clerk")
    assert (started.parent_tool_call_id, started.parent_subagent_run_id) == (clerk_call, None)
    assert started.parent_message_id == start_of_made.parent_message_id
    its = of_subagent(events, sub)
    (inner_start,) = of_type(its, ToolCallStartEvent)
    assert (inner_start.tool_call_id, inner_start.tool_call_name) == (inner.call_ids[0], "price")
    assert inner_start.parent_message_id == f"{sub}:msg-1"  # its own conversation's
    said = [e.delta for e in of_type(its, TextMessageContentEvent)]
    assert said == ["Looking it up.", "A fig costs 2.0."]  # its answer once its call finished
    (inner_result,) = of_type(its, ToolCallResultEvent)
    assert (inner_result.tool_call_id, inner_result.content) == (inner.call_ids[0], "2.0")
    (finished,) = of_type(events, SubagentFinishedEvent)
    assert (finished.subagent_run_id, finished.result, finished.outcome) == (
        sub,
        "A fig costs 2.0.",
        None,
    )
    (clerk_result,) = [
        e for e in of_type(events, ToolCallResultEvent) if e.tool_call_id == clerk_call
    ]
    assert events.index(started) < events.index(inner_start) < events.index(finished)
    assert events.index(finished) < events.index(clerk_result)
    assert clerk_result.subagent_run_id is None  # the call is the run's own
    assert isinstance(events[-1], RunFinishedEvent)
    assert events[-1].result == "Figs are 2.0."


@pytest.mark.parametrize("program", [False, True], ids=["direct", "in-a-program"])
async def test_a_pause_inside_the_agent_tool_suspends_its_subagent_until_the_decision(
    tmp_path: Path, provider: Provider, program: bool
) -> None:
    refunded.clear()
    first = (
        call("run_code", {"code": 'await clerk(input="refund o1")'})
        if program
        else call("clerk", {"input": "refund o1"})
    )
    outer = provider([first, reply("Refunded.")])
    inner = provider([call("refund", {"order_id": "o1"}), reply("Done: o1 refunded.")])
    transport = httpx.ASGITransport(app=app(shop(outer, inner, program), data_dir=tmp_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        paused = await post(client, new_input("t1", "Refund o1."))
        (interrupt,) = paused[-1].outcome.interrupts
        refunded_while_paused = list(refunded)
        resumed = await post(client, new_input("t1", resume=[approve(interrupt.id, approved=True)]))

    made = outer.call_ids[0]
    sub = f"{made}/{made}.1" if program else made  # the subagent: where the pending call is
    (suspended,) = of_type(paused, SubagentFinishedEvent)
    assert suspended.subagent_run_id == sub
    assert suspended.outcome is not None
    assert suspended.outcome.type == "suspended"
    assert suspended.outcome.interrupt_ids == [interrupt.id]
    assert interrupt.metadata["tooldeck"]["id"] == f"{sub}/{inner.call_ids[0]}"  # the same ids
    assert interrupt.subagent_run_id == sub  # it raised it
    assert paused.index(suspended) == len(paused) - 4  # then the snapshots and RUN_FINISHED
    assert refunded_while_paused == []

    (again,) = of_type(resumed, SubagentStartedEvent)  # the same invocation goes on
    assert again.subagent_run_id == sub
    (refund_result,) = of_type(of_subagent(resumed, sub), ToolCallResultEvent)
    assert (refund_result.tool_call_id, refund_result.content) == (
        inner.call_ids[0],
        "refunded o1",
    )
    (done,) = of_type(resumed, SubagentFinishedEvent)
    assert (done.subagent_run_id, done.result) == (sub, "Done: o1 refunded.")
    assert isinstance(resumed[-1], RunFinishedEvent)
    assert (resumed[-1].result, refunded) == ("Refunded.", ["o1"])
