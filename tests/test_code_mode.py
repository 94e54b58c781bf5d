"""Code mode (issue 38): ``run_code`` runs the model's program in pydantic-monty, each call it
makes through the run's own call path (schema, guardrails, budgets and limits, approvals,
tracing), shown as the run's own call; failures are observations with their code and line.

Through the provider simulator (fresh call ids, as a hosted provider gives); the processes
of the resume in another process are tests/_code_child.py.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tooldeck import Agent, Approve, Reject, RunContext, tool
from tooldeck.cli.display import Console, RunDisplay
from tooldeck.code import CodeLimits, CodeMode
from tooldeck.observe import Instrumentation
from tooldeck.run.policy import Limits
from tooldeck.runlog import RunLog
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call
from tooldeck.tools.guardrails import GuardrailResult

Provider = Callable[..., ProviderSimulator]
CHILD = Path(__file__).with_name("_code_child.py")
ran: list[str] = []


@tool
def price(item: str) -> float:
    """The price of one unit of an item, in euros.

    Args:
        item: The item's name.
    """
    ran.append(f"price({item})")
    return {"apple": 0.5, "pear": 0.75, "fig": 2.0}[item]


@tool
def stock(item: str) -> int:
    """Units of an item in stock."""
    ran.append(f"stock({item})")
    return {"apple": 10, "pear": 4, "fig": 0}[item]


@tool
def customer(customer_id: str) -> dict[str, Any]:
    """A customer's record."""
    return {"id": customer_id, "name": "Ada", "orders": ["o1", "o2"]}


@tool(requires_approval=True, side_effects=True)
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order to the customer."""
    ran.append(f"refund({order_id}, {amount})")
    return f"refunded {amount:.2f} on {order_id}"


@pytest.fixture(autouse=True)
def _clean() -> None:
    ran.clear()


def run_code(code: str) -> Any:
    return sim_call("run_code", {"code": textwrap.dedent(code).strip()})


def read(request: dict[str, Any]) -> str:
    content: str = request["messages"][-1]["content"]
    return content


def names(request: dict[str, Any]) -> list[str]:
    return [item["function"]["name"] for item in request.get("tools", [])]


def description(request: dict[str, Any]) -> str:
    (found,) = [t["function"] for t in request["tools"] if t["function"]["name"] == "run_code"]
    text: str = found["description"]
    return text


async def read_after(provider: Provider, code: str, **options: Any) -> str:
    """What the model reads after its one ``run_code`` call (with ``Agent`` options)."""
    sim = provider([run_code(code), reply("done")])
    mode = options.pop("mode", None) or CodeMode()
    tools = options.pop("tools", [price, stock])
    result = await Agent(sim.model(), tools=tools, capabilities=[mode], **options).run("go")
    assert result.answer == "done"
    return read(sim.requests[1])


# -- one program, three calls, everywhere a call shows --------------------------------------


async def test_a_program_calls_three_tools_in_one_turn_and_every_record_shows_them(
    provider: Provider, tmp_path: Path
) -> None:
    code = """
        import asyncio
        apple = await price(item="apple")
        print("apple", apple)
        pear, left = await asyncio.gather(price(item="pear"), stock(item="pear"))
        apple + pear * left
    """
    sim = provider([run_code(code), reply("3.50 in all.")])
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    screen = io.StringIO()
    display = RunDisplay(Console(screen), "sim")
    with RunLog(tmp_path / "runs.db") as log:
        agent = Agent(
            sim.model(),
            tools=[price, stock],
            capabilities=[CodeMode()],
            run_log=log,
            instrument=Instrumentation(tracer),
        )
        events = [event async for event in agent.stream("What do an apple and the pears cost?")]
        for event in events:
            display.show(event)
        result = events[-1].result  # type: ignore[attr-defined]
        log.flush()
        logged = log.run(result.run_id).calls

    assert result.answer == "3.50 in all."
    assert names(sim.requests[0]) == ["run_code"]  # the tools hidden from direct calls
    assert "async def price(*, item: str) -> float:" in description(sim.requests[0])
    assert "The price of one unit of an item, in euros." in description(sim.requests[0])
    assert read(sim.requests[1]) == "apple 0.5\nresult: 3.5"
    (outer,) = result.tool_trace
    inner = [(t.call.name, t.call.arguments, t.result.output) for t in outer.inner_trace or ()]
    assert inner == [
        ("price", {"item": "apple"}, "0.5"),
        ("price", {"item": "pear"}, "0.75"),
        ("stock", {"item": "pear"}, "4"),
    ]
    run_code_id = outer.call.id
    nested_ids = [f"{run_code_id}.{n}" for n in (1, 2, 3)]
    assert sorted(c.call_id for c in logged) == sorted([run_code_id, *nested_ids])
    assert {c.call_id: c.result for c in logged}[nested_ids[2]] == "4"
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert sorted(s.name for s in spans) == sorted(
        ["execute_tool run_code", "execute_tool price", "execute_tool price", "execute_tool stock"]
    )
    lines = screen.getvalue().splitlines()
    assert sum(line.startswith("  → price") for line in lines) == 2
    assert sum(line.startswith("  → stock") for line in lines) == 1
    tracer.shutdown()


async def test_kept_tools_stay_offered_for_direct_calls(provider: Provider) -> None:
    sim = provider([reply("ok")])
    mode = CodeMode(["price"], keep=["price"])
    await Agent(sim.model(), tools=[price, stock], capabilities=[mode]).run("hi")
    assert names(sim.requests[0]) == ["price", "stock", "run_code"]
    assert "async def stock" not in description(sim.requests[0])


async def test_a_tool_without_a_declared_type_gives_json_values_and_dicts_stay_dicts(
    provider: Provider,
) -> None:
    code = """
        record = await customer(customer_id="c9")
        [record["name"], len(record["orders"])]
    """
    assert await read_after(provider, code, tools=[customer]) == 'result: ["Ada",2]'


# -- each nested call goes through the run's own checks -------------------------------------


async def test_a_nested_call_with_arguments_its_schema_refuses_raises_in_the_program(
    provider: Provider,
) -> None:
    code = """
        try:
            await price(item=3)
        except Exception as error:
            print("caught:", error)
        await stock(item="fig")
    """
    text = await read_after(provider, code)
    assert text.startswith("caught: price failed: error[invalid_arguments]: the arguments for")
    assert text.endswith("result: 0")
    assert ran == ["stock(fig)"]


async def test_each_nested_call_counts_against_max_tool_calls(provider: Provider) -> None:
    code = """
        total = 0
        for item in ["apple", "pear", "fig"]:
            total += await stock(item=item)
        total
    """
    text = await read_after(provider, code, limits=Limits(max_tool_calls=3))
    assert text.startswith("error[code_error]: the program raised: RuntimeError: stock failed: ")
    assert "error[call_limit]" in text
    assert "at line 3 (total += await stock(item=item))" in text
    assert ran == ["stock(apple)", "stock(pear)"]  # run_code was the run's first call


async def test_a_tool_guardrail_judges_each_nested_call(provider: Provider) -> None:
    def no_figs(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
        if arguments.get("item") == "fig":
            return GuardrailResult.refused("figs are not for sale")
        return GuardrailResult.passed()

    code = """
        try:
            await price(item="fig")
        except RuntimeError as error:
            print(error)
        await price(item="pear")
    """
    text = await read_after(provider, code, tool_guardrails=[no_figs])
    assert text == "price failed: error[refused]: figs are not for sale\nresult: 0.75"
    assert ran == ["price(pear)"]


async def test_a_program_stops_at_its_own_call_limit(provider: Provider) -> None:
    code = """
        for _ in range(10):
            await stock(item="apple")
    """
    mode = CodeMode(limits=CodeLimits(max_calls=3))
    text = await read_after(provider, code, mode=mode)
    assert text == "error[code_limit]: the program made more than 3 tool calls and was stopped"
    assert len(ran) == 3
