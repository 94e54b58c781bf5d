"""Tool search on 10,000 deferred tools (issue 37): what it adds to a request's preparation,
and what one search costs, on one core.

    PYTHONPATH=src python bench/tool_search.py [--tools 10000] [--repeat 2000]

The tools are BFCL's functions (the package's data), each copied under numbered names until
there are ``--tools`` of them, all deferred. Figures (best of five rounds, per operation):

- ``prepare, none``: the tools of a request without any capability (``ToolSource``'s cached
  view), the baseline;
- ``prepare, search``: the same plus what the loop adds before each request when a
  capability shows tools (a ``RunView`` and ``ToolSearch.show_tools`` through the
  hooks), with no tool revealed and with five revealed (the view cached per tool set and
  reveals);
- once per tool set: the view of 10,000 entries, the first ``show_tools`` (the search tool
  bound to the set; the first in a process also imports the docstring parser), the BM25
  index (built at the first search, in a worker thread);
- ``search``: one ``search_tools`` call: BM25 (BFCL questions), and regex for four kinds of
  pattern (a word of a question, a word no tool has, words with wildcards or anchors, a
  pattern with no word that matches nothing: the slowest, a scan of every text).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from statistics import median
from typing import Any

from tooldeck.eval.bfcl.dialect import bfcl_tools
from tooldeck.run._engine.hooks import Hooks
from tooldeck.run.capabilities import RunView
from tooldeck.search import ToolSearch
from tooldeck.tools.context import RunContext
from tooldeck.tools.registry import ToolEntry, ToolSource, ToolView, deferred

DATA = Path(__file__).resolve().parents[1] / "src/tooldeck/eval/bfcl/data/bfcl_tools.jsonl"


def functions(count: int) -> tuple[list[dict[str, Any]], list[str]]:
    """``count`` BFCL functions under distinct names, and the questions of the cases."""
    seen: dict[str, dict[str, Any]] = {}
    questions: list[str] = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        questions.append(case["question"] if isinstance(case["question"], str) else "weather")
        for function in case["functions"]:
            seen.setdefault(function["name"].replace(".", "_")[:56], function)
    unique = list(seen.values())
    made = []
    for index in range(count):
        function = unique[index % len(unique)]
        copy = index // len(unique)
        name = function["name"].replace(".", "_")[:56] + (f"_{copy}" if copy else "")
        made.append({**function, "name": name})
    return made, questions


def best(seconds: list[float]) -> float:
    return min(seconds)


def timed(action: Any, repeat: int) -> float:
    rounds = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            action()
        rounds.append((time.perf_counter() - started) / repeat)
    return best(rounds)


async def atimed(action: Any, queries: list[str]) -> tuple[float, float]:
    rounds = []
    for query in queries:
        started = time.perf_counter()
        await action(query)
        rounds.append(time.perf_counter() - started)
    return median(rounds), max(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2_000)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    made, questions = functions(args.tools)
    started = time.perf_counter()
    entries = [deferred(ToolEntry.of(item)) for item in bfcl_tools(made, strict=False).tools]
    print(f"{len(entries)} deferred tools built in {time.perf_counter() - started:.2f} s")

    started = time.perf_counter()
    source = ToolSource(ToolView.of(entries))
    print(f"once: the view of {len(entries)} entries    {_ms(time.perf_counter() - started)}")
    view = source.current
    search = ToolSearch()
    states: dict[str, Any] = {search.state_key: search.initial_state()}
    seen = RunView("run", "agent", 1, None, (), states)

    started = time.perf_counter()
    search.show_tools(view, seen)
    print(f"once: the first show_tools (search tool)  {_ms(time.perf_counter() - started)}")

    hooks = Hooks.of([search])
    assert hooks is not None

    def prepared() -> ToolView:  # as the loop does: the source's view, then the hook's
        current = source.unchanged() or view
        return hooks.shown(current, RunView("run", "agent", 1, None, (), states))

    none = timed(lambda: source.unchanged(), args.repeat)
    shown = timed(prepared, args.repeat)
    print(f"prepare, none:                 {_us(none)}")
    print(f"prepare, search (0 revealed):  {_us(shown)}  (+{_us(shown - none)})")

    index = search._indexes[-1][1]
    context = RunContext("c1", "search_tools", None, states=states)
    started = time.perf_counter()
    asyncio.run(index.search(context, "weather forecast", 5))
    print(f"once: the BM25 index + first search      {_ms(time.perf_counter() - started)}")
    revealed = timed(prepared, args.repeat)
    count = len(states[search.state_key]["revealed"])
    print(f"prepare, search ({count} revealed):  {_us(revealed)}  (+{_us(revealed - none)})")

    queries = [" ".join(q.split()[:12]) for q in questions[:300]]

    async def bm25(query: str) -> None:
        states[search.state_key]["revealed"].clear()
        await index.search(context, query, 5)

    middle, worst = asyncio.run(atimed(bm25, queries))
    print(f"search, bm25 ({len(queries)} queries):  median {_ms(middle)}, max {_ms(worst)}")

    regex = ToolSearch(strategy="regex")
    regex_states = {regex.state_key: regex.initial_state()}
    regex.show_tools(view, RunView("run", "agent", 1, None, (), regex_states))
    regex_index = regex._indexes[-1][1]
    regex_context = RunContext("c1", "search_tools", None, states=regex_states)

    async def by_pattern(query: str) -> None:
        regex_states[regex.state_key]["revealed"].clear()
        await regex_index.search(regex_context, query, 5)

    started = time.perf_counter()
    asyncio.run(by_pattern("warm"))  # the regex index (joined texts), built at the first search
    print(f"once: the regex index + first search     {_ms(time.perf_counter() - started)}")
    words = [q.split()[0] for q in queries if q.split()[0].isalpha()][:100]
    for kind, patterns in (
        ("a word of a question", words),
        ("a word no tool has", ["zzqxj", "refundable", "kubernetes", "xylophone"] * 5),
        ("words and wildcards", ["temp.*unit", r"\bcity\b", "^get_", "rain|snow"] * 5),
        ("no word, matching nothing", [r"\d{9}q", r"[xq]{4}", r"\W{6}z"] * 5),
    ):
        middle, worst = asyncio.run(atimed(by_pattern, patterns))
        print(f"search, regex, {kind}:  median {_ms(middle)}, max {_ms(worst)}")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:8.2f} µs"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms"


if __name__ == "__main__":
    main()
