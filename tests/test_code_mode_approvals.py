"""Approvals of a code-mode program's calls at every front door (issue 38).

A call a program makes inside ``run_code`` is the run's own: it is asked about with the same
choices as a call the model makes (``[a]lways in this run``, ``[s]ession``; the scope
buttons; ``"scope"`` in the AG-UI resume), after the program's line that makes it; approved
"always in this run", the program's later calls of that tool, and those of the run's later
programs, run without pausing. A ``run_code`` approved as a whole (``approval="whole"``)
names the tools its program may call. The model is the provider simulator (fresh call ids
in every response, over loopback); the CLI runs in a real process at a pty.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _pty import Terminal
from test_cli_doors import MODEL
from tooldeck import Agent, Approve, tool
from tooldeck.code import CodeMode
from tooldeck.run.events import ToolCallStarted
from tooldeck.testing import ProviderSimulator, call, reply

Provider = Callable[..., ProviderSimulator]

TWO_PAYMENTS = 'print("paying")\nfirst = await pay(amount=1)\nawait pay(amount=2)\n"paid"'
"""A program whose first call waits for a person, at its second line."""
ONE_MORE = "await pay(amount=3)"
"""The run's next program: it calls the same tool again."""
CHOICES = "[y]es / [n]o / [a]lways in this run / [s]ession / [e]dit"


def payments() -> tuple[list[int], Any]:
    paid: list[int] = []

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    return paid, pay


def two_programs() -> list[Any]:
    return [call("run_code", {"code": TWO_PAYMENTS}), call("run_code", {"code": ONE_MORE})]


async def test_always_in_this_run_covers_the_programs_later_calls_and_later_programs(
    provider: Provider,
) -> None:
    paid, pay = payments()
    sim = provider([*two_programs(), reply("done")])
    agent = Agent(sim.model(), [pay], capabilities=[CodeMode()])
    first = await agent.run("pay 1, 2 and 3 in programs")
    (waiting,) = first.pending
    assert (waiting.path, waiting.own) == (("run_code",), True)
    assert waiting.where == "line 2: first = await pay(amount=1)"

    started = []
    decision = {waiting.id: Approve(scope="run", by="ann")}
    async for event in agent.resume_stream(first.checkpoint, decision):
        if isinstance(event, ToolCallStarted) and event.call.name == "pay":
            remembered = event.remembered
            started.append((event.call.arguments["amount"], remembered and remembered.scope))

    assert paid == [1, 2, 3]  # neither the program's second call nor the next program paused
    assert started == [(1, None), (2, "run"), (3, "run")]
    assert len(sim.requests) == 3  # the model was asked for no round twice


async def test_a_call_in_a_function_an_earlier_program_defined_names_no_line(
    provider: Provider,
) -> None:
    paid, pay = payments()
    defines = "async def settle():\n    return await pay(amount=4)\n"
    sim = provider(
        [call("run_code", {"code": defines}), call("run_code", {"code": "await settle()"})]
    )
    agent = Agent(sim.model(), [pay], capabilities=[CodeMode(repl=True)])
    first = await agent.run("define, then settle")
    (waiting,) = first.pending

    assert (waiting.call.name, waiting.path, waiting.own) == ("pay", ("run_code",), True)
    assert waiting.where == ""  # the call is not on a line of the program that waits
    assert paid == []


IN_A_HELPER = "async def settle(amount):\n    return await pay(amount=amount)\n\nawait settle(1)"
"""A program that calls the tool inside a function it defines (a tool is no value a program
can name otherwise: ``f = pay`` is a NameError in the sandbox)."""
TWICE_IN_A_HELPER = f"{IN_A_HELPER}\nawait settle(2)"
"""The same, twice: the second call waits after a resume."""


async def test_a_call_in_a_helper_names_its_line(provider: Provider) -> None:
    paid, pay = payments()
    sim = provider([call("run_code", {"code": IN_A_HELPER})])
    agent = Agent(sim.model(), [pay], capabilities=[CodeMode()])
    first = await agent.run("pay in a program")
    (waiting,) = first.pending

    assert (waiting.call.name, waiting.where) == ("pay", "line 2: return await pay(amount=amount)")
    assert paid == []


async def test_the_line_is_named_again_when_the_resumed_program_waits_again(
    provider: Provider,
) -> None:
    paid, pay = payments()
    sim = provider([call("run_code", {"code": TWICE_IN_A_HELPER}), reply("done")])
    agent = Agent(sim.model(), [pay], capabilities=[CodeMode()])
    first = await agent.run("pay twice")
    (waiting,) = first.pending
    second = await agent.resume(first.checkpoint, {waiting.id: Approve()})
    (again,) = second.pending

    assert (waiting.where, again.where) == (  # the resumed program is the same feed
        "line 2: return await pay(amount=amount)",
        "line 2: return await pay(amount=amount)",
    )
    assert (waiting.call.arguments, again.call.arguments) == ({"amount": 1}, {"amount": 2})
    done = await agent.resume(second.checkpoint, {again.id: Approve()})
    assert (done.answer, paid) == ("done", [1, 2])


async def test_in_a_repl_a_later_programs_call_in_a_helper_names_its_line(
    provider: Provider,
) -> None:
    paid, pay = payments()
    later = "async def settle():\n    return await pay(amount=amount)\n\nawait settle()"
    sim = provider([call("run_code", {"code": "amount = 5"}), call("run_code", {"code": later})])
    agent = Agent(sim.model(), [pay], capabilities=[CodeMode(repl=True)])
    first = await agent.run("set the amount, then pay it")
    (waiting,) = first.pending

    assert (waiting.call.arguments, waiting.where) == (
        {"amount": 5},
        "line 2: return await pay(amount=amount)",  # monty names its source the 2nd feed
    )
    assert paid == []


async def test_a_programs_approval_whole_names_the_tools_it_may_call(provider: Provider) -> None:
    paid, pay = payments()
    sim = provider([call("run_code", {"code": ONE_MORE}), reply("done")])
    agent = Agent(sim.model(), [pay], capabilities=[CodeMode(approval="whole")])
    first = await agent.run("pay 3 in a program")
    (waiting,) = first.pending

    assert (waiting.call.name, waiting.reaches, waiting.where) == ("run_code", ("pay",), "")
    assert paid == []
    done = await agent.resume(first.checkpoint, {waiting.id: Approve()})
    assert (done.answer, paid) == ("done", [3])


async def test_the_agui_interrupt_of_a_programs_call_takes_a_scope_and_names_its_line(
    tmp_path: Path, provider: Provider
) -> None:
    import httpx
    from ag_ui.core import RunFinishedEvent, ToolCallResultEvent

    from _agui import approve, new_input, of_type, post
    from tooldeck.serve.agui import app

    paid, pay = payments()
    sim = provider([*two_programs(), reply("done")])
    agent = Agent(sim.model(), [pay], capabilities=[CodeMode()])
    transport = httpx.ASGITransport(app=app(agent, data_dir=tmp_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        events = await post(client, new_input("t1", "pay in programs"))
        (interrupt,) = events[-1].outcome.interrupts
        assert interrupt.message == (
            'Approve pay({"amount": 1}) (inside run_code)? '
            "The program makes it at line 2: first = await pay(amount=1)."
        )
        properties = interrupt.response_schema["properties"]
        assert properties["scope"]["enum"] == ["once", "run", "session"]
        shown = interrupt.metadata["tooldeck"]
        assert (shown["own"], shown["path"]) == (True, ["run_code"])

        answer = approve(interrupt.id, approved=True, scope="run")
        resumed = await post(client, new_input("t1", resume=[answer]))

    assert isinstance(resumed[-1], RunFinishedEvent)
    assert resumed[-1].outcome.type == "success"  # no second interrupt
    assert paid == [1, 2, 3]
    marked = {
        e.content: e.metadata["tooldeck"].get("decision")
        for e in of_type(resumed, ToolCallResultEvent)
        if e.content.startswith("paid")
    }
    assert marked == {"paid 1": None, "paid 2": "remembered:run", "paid 3": "remembered:run"}


async def test_the_agui_interrupt_of_a_whole_program_names_what_it_may_call(
    tmp_path: Path, provider: Provider
) -> None:
    import httpx

    from _agui import new_input, post
    from tooldeck.serve.agui import app

    _, pay = payments()
    sim = provider([call("run_code", {"code": ONE_MORE}), reply("done")])
    agent = Agent(sim.model(), [pay], capabilities=[CodeMode(approval="whole")])
    transport = httpx.ASGITransport(app=app(agent, data_dir=tmp_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        events = await post(client, new_input("t1", "pay in a program"))

    (interrupt,) = events[-1].outcome.interrupts
    assert interrupt.message.endswith("? The program may call pay.")
    assert interrupt.metadata["tooldeck"]["reaches"] == ["pay"]


PAYING = textwrap.dedent(
    '''
    from pathlib import Path

    from tooldeck import tool
    from tooldeck.code import CodeMode


    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount (the test reads the amounts paid in ./paid)."""
        record = Path("paid")
        before = record.read_text() if record.exists() else ""
        record.write_text(before + f"{amount}\\n")
        return f"paid {amount}"


    __all__ = ["pay"]
    capabilities = [CodeMode(approval=APPROVAL)]
    '''
)


def terminal_of(tmp_path: Path, sim: ProviderSimulator, approval: str, *command: str) -> Terminal:
    """``tooldeck <command>`` with the paying module, at a terminal."""
    module = PAYING.replace("APPROVAL", repr(approval))
    (tmp_path / "paying.py").write_text(module, encoding="utf-8")
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    env = {**base, "TOOLDECK_HOME": str(tmp_path / "home"), **sim.env}
    argv = [sys.executable, "-m", "tooldeck.cli", *command, "-t", "paying.py"]
    return Terminal([*argv, "--model", MODEL, "--base-url", sim.base_url], tmp_path, env)


def at_terminal(tmp_path: Path, sim: ProviderSimulator, approval: str, asked: str, key: str) -> str:
    """``tooldeck run`` of the paying module at a terminal: once ``asked`` shows, ``key``."""
    terminal = terminal_of(tmp_path, sim, approval, "run", "pay")
    terminal.expect(asked)
    terminal.send(f"{key}\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    return shown


def test_the_cli_asks_about_a_programs_call_with_its_line_and_every_scope(
    tmp_path: Path, provider: Provider
) -> None:
    sim = provider([*two_programs(), reply("done")])
    question = f"approve run_code: pay(amount=1)? {CHOICES}"

    shown = at_terminal(tmp_path, sim, "each", question, "a")

    assert "tooldeck: the program makes this call at line 2: first = await pay(amount=1)" in shown
    assert shown.count("approve ") == 1  # pay 2 (same program) and pay 3 (next one) not asked
    assert "✓ approved (remembered for the run) by cli: pay(amount=2)" in shown
    assert "✓ approved (remembered for the run) by cli: pay(amount=3)" in shown
    assert (tmp_path / "paid").read_text().split() == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("code", "approval", "about", "asked", "paid"),
    [
        (
            IN_A_HELPER,
            "each",
            "tooldeck: the program makes this call at line 2: return await pay(amount=amount)",
            "run_code: pay(amount=1)",
            ["1"],
        ),
        (
            ONE_MORE,
            "whole",
            "tooldeck: the program may call pay: approved, it calls them without asking",
            'run_code(code="await pay(amount=3)")',
            ["3"],
        ),
    ],
    ids=["the-line-of-a-call-in-a-helper", "the-tools-a-program-approved-whole-may-call"],
)
def test_the_cli_names_what_a_program_waits_on(
    tmp_path: Path,
    provider: Provider,
    code: str,
    approval: str,
    about: str,
    asked: str,
    paid: list[str],
) -> None:
    sim = provider([call("run_code", {"code": code}), reply("done")])

    shown = at_terminal(tmp_path, sim, approval, about, "y")

    assert f"approve {asked}? {CHOICES}" in shown
    assert (tmp_path / "paid").read_text().split() == paid


def test_chat_remembers_a_programs_call_approved_for_the_conversation(
    tmp_path: Path, provider: Provider
) -> None:
    later = [call("run_code", {"code": "await pay(amount=4)"}), reply("done again")]
    sim = provider([*two_programs(), reply("done"), *later])
    terminal = terminal_of(tmp_path, sim, "each", "chat")
    terminal.expect("> ")
    terminal.send("pay 1, 2 and 3\r")
    terminal.expect(f"approve run_code: pay(amount=1)? {CHOICES}")
    terminal.send("s\r")
    shown = terminal.expect("answer: done")
    terminal.expect("> ", after=shown.index("answer: done"))
    terminal.send("pay 4\r")  # the conversation's next run
    shown = terminal.expect("answer: done again")
    # Ctrl-D only once the prompt is back: typed while the run works, the line
    # discipline turns it into a NUL that readline, once it takes the terminal, ignores
    terminal.expect("> ", after=shown.index("answer: done again"))
    terminal.send("\x04")
    status, shown = terminal.finish()

    assert status == 0, shown
    assert shown.count("approve ") == 1
    assert "✓ approved (remembered for the session) by cli: pay(amount=4)" in shown
    assert (tmp_path / "paid").read_text().split() == ["1", "2", "3", "4"]
