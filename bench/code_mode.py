"""Code mode (issue 38): what one ``run_code`` with one nested call costs beyond the tool
itself, once the pool of workers is warm.

    PYTHONPATH=src python bench/code_mode.py [--repeat 300]

Each round is a run of a scripted model whose one turn is ``run_code`` with the program
``await price(item="apple") * 2``; ``price`` returns a number at once. The figure is the
``run_code`` call's duration (its trace: a worker checked out, the program fed, its call
through the run's call path, the value read back) minus its nested call's own duration
(the tool, as its trace measures it). The first program of the process, which starts the
pool, is reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from statistics import median, quantiles

from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, tool
from tooldeck.code import CodeMode

PROGRAM = 'await price(item="apple") * 2'


@tool
def price(item: str) -> float:
    """The price of one unit of an item, in euros."""
    return 0.5


async def one_program(mode: CodeMode) -> tuple[float, float]:
    """(run_code's duration, its nested call's duration), in seconds."""
    turns = [
        AssistantOutput(
            tool_calls=[ToolCall(id="c1", name="run_code", arguments={"code": PROGRAM})]
        ),
        AssistantOutput(content="done"),
    ]
    result = await Agent(ScriptedModel(turns), tools=[price], capabilities=[mode]).run("go")
    (outer,) = result.tool_trace
    assert outer.result.output == "result: 1.0", outer.result.output
    (inner,) = outer.inner_trace or ()
    return outer.duration_s, inner.duration_s


async def main(repeat: int) -> None:
    mode = CodeMode()
    started = time.perf_counter()
    cold, _ = await one_program(mode)
    print(
        f"first program of the process (the pool starts): {cold * 1000:.1f} ms "
        f"({(time.perf_counter() - started) * 1000:.1f} ms with the run)"
    )
    for _ in range(20):  # warm
        await one_program(mode)
    beyond = []
    for _ in range(repeat):
        outer, inner = await one_program(mode)
        beyond.append((outer - inner) * 1000)
    cuts = quantiles(beyond, n=20)
    print(
        f"run_code with one nested call, beyond the tool ({repeat} programs): "
        f"median {median(beyond):.2f} ms, p95 {cuts[-1]:.2f} ms, max {max(beyond):.2f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=300)
    asyncio.run(main(parser.parse_args().repeat))
