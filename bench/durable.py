"""What a durable run costs: tooldeck.durable against a bare DBOS step and a plain run.

The workload is the issue's: 4 model requests and 3 tool calls (a fake model that calls an
async ``add`` tool once a turn, three times, then answers). Every configuration runs in
this process on a fresh SQLite system database, one run at a time, interleaved over
rounds; figures are medians of per-run CPU time (``time.process_time``: every thread of the
process, DBOS's database threads included) and wall time. On a shared, loaded machine the
wall time is inflated by waiting for a core; the CPU time is what the work costs.

- ``plain``: ``agent.run`` (no DBOS);
- ``workflow+0`` / ``workflow+7``: a DBOS workflow with 0 / 7 bare no-op steps, so
  ``bare step = (workflow+7 - workflow+0) / 7``;
- ``durable``: ``DurableAgent.run``, where the 4 requests and 3 calls are 7 steps;
  tooldeck's own cost per step = ``(durable - plain - workflow+7) / 7``.

    .venv/bin/python bench/durable.py [--runs 40] [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dbos import DBOS

from tooldeck import Agent, AssistantOutput, ToolCall, tool
from tooldeck.durable import DurableAgent
from tooldeck.models.base import Model, ModelSettings

CALLS = 3


class LoopModel(Model):
    """Calls ``add`` once a turn, three times, then answers (from the conversation)."""

    name = "bench-loop"

    async def complete(
        self, messages: Any, tools: Any, settings: ModelSettings, instructions: str = ""
    ) -> AssistantOutput:
        results = [m.content for m in messages if m.role == "tool"]
        if len(results) >= CALLS:
            return AssistantOutput(content="done " + results[-1])
        previous = int(results[-1]) if results else 0
        call = ToolCall(id=f"c{len(results)}", name="add", arguments={"a": previous, "b": 1})
        return AssistantOutput(tool_calls=(call,))


_ADD_SLEEP_S = float(os.environ.get("BENCH_ADD_SLEEP_S", "0"))
"""Set by bench/durable_workers.py's recovery figure: a tool that is still running when its
worker is killed."""


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    if _ADD_SLEEP_S:
        await asyncio.sleep(_ADD_SLEEP_S)
    return a + b


@DBOS.step(name="bench.noop")
async def noop() -> int:
    return 1


@DBOS.workflow(name="bench.steps")
async def bare_steps(count: int) -> int:
    for _ in range(count):
        await noop()
    return count


async def timed(run: Callable[[], Awaitable[Any]], runs: int) -> tuple[float, float]:
    """Median CPU and wall ms per run."""
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(runs):
        c, w = time.process_time(), time.perf_counter()
        await run()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu) * 1e3, statistics.median(wall) * 1e3


async def bench(runs: int, rounds: int) -> dict[str, Any]:
    plain = Agent(LoopModel(), [add])
    durable = DurableAgent(Agent(LoopModel(), [add]), name="bench")
    DBOS.launch()

    async def workflow(count: int) -> None:
        handle = await DBOS.start_workflow_async(bare_steps, count)
        await handle.get_result()

    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "plain": lambda: plain.run("go"),
        "workflow+0": lambda: workflow(0),
        "workflow+7": lambda: workflow(7),
        "durable": lambda: durable.run("go"),
    }
    result = await durable.run("go")
    assert result.answer == "done 3", result.answer
    for run in cases.values():  # warm up every path
        await run()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            samples[name].append(await timed(run, runs))
    medians = {
        name: (statistics.median(c for c, _ in s), statistics.median(w for _, w in s))
        for name, s in samples.items()
    }
    return {"medians_ms": medians, **derived(medians)}


def derived(m: dict[str, tuple[float, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for index, kind in enumerate(("cpu", "wall")):
        bare = (m["workflow+7"][index] - m["workflow+0"][index]) / 7
        own = (m["durable"][index] - m["plain"][index] - m["workflow+7"][index]) / 7
        out[kind] = {
            "bare_step_ms": round(bare, 3),
            "added_per_step_ms": round((m["durable"][index] - m["plain"][index]) / 7, 3),
            "tooldeck_own_per_step_ms": round(own, 3),
            "own_vs_bare_pct": round(100 * own / bare, 1),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per case per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        url = f"sqlite:///{Path(root) / 'bench.sqlite'}"
        DBOS(config={"name": "tooldeck-bench", "system_database_url": url, "log_level": "ERROR"})
        try:
            figures = asyncio.run(bench(args.runs, args.rounds))
        finally:
            DBOS.destroy()
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
