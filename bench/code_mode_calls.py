"""Code mode against plain tool calls (issue 38), the mechanics only: model requests, tool
calls and input tokens for tasks that chain or repeat calls, through the provider simulator
(its usage is estimated from the text, about four characters a token).

    PYTHONPATH=src python bench/code_mode_calls.py

The model's turns are scripted, each mode as a model would do the task at best: ``plain,
one a turn`` (a call, its result read, the next call), ``plain, parallel`` (every call that
does not need an earlier result in one turn) and ``code`` (one ``run_code``). Accuracy is not
measured here (a scripted model is always right): what a real model does with code mode is
the evaluation left to do.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tooldeck import Agent, Limits, tool
from tooldeck.code import CodeMode
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call

ITEMS = [f"item{n}" for n in range(10)]
FLIGHTS = [f"F{n:03d}" for n in range(10)]
ORDERS = [f"o{n}" for n in range(5)]


@tool
def price(item: str) -> float:
    """The price of one unit of an item, in euros."""
    return 1.0 + ITEMS.index(item) / 4


@tool
def fare(flight: str) -> float:
    """A flight's fare, in euros."""
    return 300.0 - 7 * (FLIGHTS.index(flight) % 4)


@tool
def orders_of(customer: str) -> list[str]:
    """The ids of a customer's orders."""
    return ORDERS


@tool
def order(order_id: str) -> dict[str, Any]:
    """One order: its total and status."""
    return {"id": order_id, "total": 10.0, "status": "shipped"}


def one_a_turn(name: str, key: str, values: list[str]) -> list[Any]:
    return [sim_call(name, {key: value}) for value in values]


def parallel(name: str, key: str, values: list[str]) -> list[Any]:
    return [sim_call(*((name, {key: value}) for value in values))]


TASKS: dict[str, dict[str, Any]] = {
    "sum a cart of 10 prices": {
        "tools": [price],
        "plain, one a turn": one_a_turn("price", "item", ITEMS),
        "plain, parallel": parallel("price", "item", ITEMS),
        "code": f"sum([await price(item=i) for i in {ITEMS!r}])",
    },
    "the cheapest of 10 flights": {
        "tools": [fare],
        "plain, one a turn": one_a_turn("fare", "flight", FLIGHTS),
        "plain, parallel": parallel("fare", "flight", FLIGHTS),
        "code": f"min([(await fare(flight=f), f) for f in {FLIGHTS!r}])",
    },
    "every order of a customer": {
        "tools": [orders_of, order],
        "plain, one a turn": [
            sim_call("orders_of", {"customer": "ada"}),
            *one_a_turn("order", "order_id", ORDERS),
        ],
        "plain, parallel": [
            sim_call("orders_of", {"customer": "ada"}),
            *parallel("order", "order_id", ORDERS),
        ],
        "code": "[await order(order_id=o) for o in await orders_of(customer='ada')]",
    },
}


def steps_for(task: dict[str, Any], mode: str) -> tuple[list[Any], list[Any]]:
    if mode == "code":
        return [sim_call("run_code", {"code": task["code"]})], [CodeMode()]
    return list(task[mode]), []


async def measure(task: dict[str, Any], mode: str) -> tuple[int, int, int]:
    steps, capabilities = steps_for(task, mode)
    with ProviderSimulator([*steps, reply("done")]) as sim:
        agent = Agent(
            sim.model(),
            tools=task["tools"],
            capabilities=capabilities,
            limits=Limits(max_rounds=20),
        )
        result = await agent.run("do the task")
    calls = sum(1 + len(trace.inner_trace or ()) for trace in result.tool_trace)
    calls -= sum(1 for trace in result.tool_trace if trace.call.name == "run_code")
    return result.usage.requests, calls, result.usage.input_tokens


async def main() -> None:
    print("| task | mode | model requests | tool calls | input tokens |")
    print("|---|---|---:|---:|---:|")
    for name, task in TASKS.items():
        for mode in ("plain, one a turn", "plain, parallel", "code"):
            requests, calls, tokens = await measure(task, mode)
            print(f"| {name} | {mode} | {requests} | {calls} | {tokens:,} |")


if __name__ == "__main__":
    asyncio.run(main())
