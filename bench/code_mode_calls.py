"""Code mode against plain tool calls (issue 38), the mechanics only: accuracy, model
requests, tool calls and tokens on the 20 tasks of ``tasks:chained``, through the provider
simulator (its usage is estimated from the text, about four characters a token).

    PYTHONPATH=src python bench/code_mode_calls.py [--limit N] [--json]

The model's turns are scripted, each mode as a model would do the task at best, from the
suite's reference program (``tooldeck.eval.chained.REFERENCE``):

- ``code``: one ``run_code`` with the program, then an answer quoting its result;
- ``plain, one a turn``: the calls that program made, one a turn, then the same answer;
- ``plain, parallel``: the same calls, each in the first turn after the calls whose
  results hold one of its argument values (a cart's items, then their prices), then the
  answer.

Each case is scored by ``tooldeck.eval`` as ``tooldeck eval tasks:chained`` scores it.
Accuracy here checks the suite (its answers, tools and programs agree), not a model: what
a real model does is in bench/README.md ("code mode: a real model").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from tooldeck import Agent, ScriptedModel
from tooldeck.code import CodeMode
from tooldeck.eval import CaseResult, Contestant, EvalCase, EvalReport, EvalSettings, run_case
from tooldeck.eval.chained import REFERENCE, chained_suite
from tooldeck.eval.modes import in_modes
from tooldeck.messages import AssistantOutput, ToolCall
from tooldeck.results import ToolTrace
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call
from tooldeck.testing.request import SimRequest
from tooldeck.testing.steps import Reply, StepLike

MODES = ("plain, one a turn", "plain, parallel", "code")


def quoted_result(request: SimRequest) -> Reply:
    """The answer of a model that read a program's result: the value after ``result:``."""
    return reply(f"The answer is {result_of(request.trailing_results[-1].text)}.")


def result_of(read: str) -> str:
    found = re.search(r"^result: (.*)$", read, re.MULTILINE)
    return found.group(1) if found else read


async def reference_calls(case: EvalCase) -> tuple[list[ToolTrace], str]:
    """The calls the case's reference program makes, and an answer quoting its result."""
    program = ToolCall(id="program", name="run_code", arguments={"code": reference(case)})
    model = ScriptedModel([AssistantOutput(tool_calls=(program,)), AssistantOutput(content="")])
    agent = Agent(model, list(case.tools), capabilities=[CodeMode()])
    (run,) = (await agent.run(case.messages[-1].content)).tool_trace
    return list(run.inner_trace or ()), f"The answer is {result_of(run.result.output)}."


def reference(case: EvalCase) -> str:
    return REFERENCE[case.id.split("/", 1)[1]]


async def scored(case: EvalCase, steps: list[StepLike]) -> CaseResult:
    """The case run on a simulated model answering with ``steps``, scored."""
    with ProviderSimulator(steps) as simulator:
        model = simulator.model()
        try:
            contestant = Contestant(model, "simulator", priced=False)
            return await run_case(contestant, case, EvalSettings(max_rounds=30))
        finally:
            await model.aclose()


def leaves(value: Any) -> Iterable[str]:
    """Every string in a JSON value, the keys of its objects too."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    elif isinstance(value, str):
        yield value


def waves(calls: list[ToolTrace]) -> list[list[ToolTrace]]:
    """The calls in turns: each after the calls whose results hold one of its arguments."""
    wave_of: list[int] = []
    for n, trace in enumerate(calls):
        wanted = {value for value in trace.call.arguments.values() if isinstance(value, str)}
        after = [
            wave_of[m]
            for m, earlier in enumerate(calls[:n])
            if wanted & set(leaves(json.loads(earlier.result.output)))
        ]
        wave_of.append(1 + max(after) if after else 0)
    return [
        [c for c, w in zip(calls, wave_of, strict=True) if w == k] for k in sorted(set(wave_of))
    ]


def plain_steps(calls: list[ToolTrace], answer: str, parallel: bool) -> list[StepLike]:
    turns = waves(calls) if parallel else [[trace] for trace in calls]
    made = [sim_call(*((t.call.name, t.call.arguments) for t in turn)) for turn in turns]
    return [*made, reply(answer)]


async def measure(cases: list[EvalCase]) -> EvalReport:
    """Every case in every mode (``own/...`` cases asked twice: one a turn, parallel)."""
    results: list[CaseResult] = []
    for coded in (case for case in cases if case.code_mode):
        calls, answer = await reference_calls(coded)
        plain = next(case for case in cases if case.id == coded.id.replace("code/", "own/"))
        for mode, parallel in ((MODES[0], False), (MODES[1], True)):
            result = await scored(plain, plain_steps(calls, answer, parallel))
            results.append(replace(result, category=mode))
        in_code = await scored(
            coded, [sim_call("run_code", {"code": reference(coded)}), quoted_result]
        )
        results.append(replace(in_code, category=MODES[2]))
    return EvalReport(tuple(results))


def table(report: EvalReport) -> str:
    lines = [
        "| mode | cases | accuracy | requests/case | tool calls/case | input tokens/case "
        "| output tokens/case |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        rows = [r for r in report.results if r.category == mode]
        n = len(rows)
        figures = [sum(getattr(r, f) or 0 for r in rows) / n for f in FIGURES]
        lines.append(
            f"| {mode} | {n} | {sum(r.correct for r in rows) / n:.0%} | {figures[0]:.2f} | "
            f"{figures[1]:.2f} | {figures[2]:,.0f} | {figures[3]:,.0f} |"
        )
    return "\n".join(lines)


FIGURES = ("requests", "tool_calls", "input_tokens", "output_tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, help="only the first N tasks")
    parser.add_argument("--json", action="store_true", help="every case's figures as JSON")
    args = parser.parse_args()
    cases = in_modes(chained_suite(limit=args.limit), "tasks:chained", "own,code")
    report = asyncio.run(measure(cases))
    if args.json:
        print(json.dumps([r.to_json() for r in report.results], indent=1))
    else:
        print(table(report))


if __name__ == "__main__":
    main()
