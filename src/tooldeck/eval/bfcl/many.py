"""``bfcl:many_tools``: BFCL's questions asked against one registry of every BFCL function.

Each question of BFCL's ``simple_python`` and ``multiple`` categories is asked with the
same registry: every function the shipped BFCL data defines, one tool per tool name —
1,842 tools (the data holds 1,853 function names, a few the same tool name with ``.`` or
``_``, in 3,258 definitions). Where a name is defined more than once, the registry holds
the first definition met (``simple_python``, then ``multiple``, then the other categories
in the data's order), and a case sees its own definition of its own functions in its
place, so it is scored exactly as BFCL scores it. The registry is shown one of three ways
(``tools``):

- ``search`` (the default): every tool deferred; the model is shown ``search_tools``
  (``tooldeck.search.ToolSearch``, BM25) and may search up to ``SEARCHES`` times; its first
  turn that calls another tool is the one scored, and the run stops there (the call waits,
  as one needing approval does: nothing runs after it);
- ``all``: every tool shown in every request, where the model's context can hold them
  (``check_context`` refuses, naming the context's size, where it cannot);
- ``own``: only the case's own tools, as ``bfcl:simple_python`` and ``bfcl:multiple`` ask.

Scores are BFCL's (``tooldeck.eval.scoring``); each result counts its model requests, so the
report gives input tokens per request. ``search_recall`` measures the search on its own,
without a model: whether the case's expected tool is among the five the search returns for
the case's question.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from tooldeck.eval.bfcl import FILES, bfcl_case, bfcl_records, records
from tooldeck.eval.bfcl.dialect import bfcl_tool_name, bfcl_tools
from tooldeck.eval.cases import EvalCase
from tooldeck.messages import AssistantOutput, ToolCall
from tooldeck.models.base import Model
from tooldeck.models.scripted import ScriptedModel
from tooldeck.run.agent import Agent
from tooldeck.search import SEARCH_TOOL, ToolSearch
from tooldeck.tools.registry import ToolEntry, ToolView, deferred

SUITE = "many_tools"
CATEGORIES = ("simple_python", "multiple")
"""The BFCL categories whose questions the suite asks."""
TOOL_MODES = ("search", "all", "own")
"""How the registry is shown: deferred behind ``search_tools``, all of it, the case's own."""
SEARCHES = 3
"""Searches a case may make before its call (its run may take this many rounds and one)."""
CHARS_PER_TOKEN = 4
"""How ``check_context`` estimates a request's tokens from its tools' JSON (a tokenizer
averages 3-4 characters a token on such text)."""


@dataclass(frozen=True, slots=True)
class Registry:
    """Every BFCL function as a tool: one entry per tool name, in the order met."""

    entries: tuple[ToolEntry, ...]
    deferred: tuple[ToolEntry, ...]
    """The same entries, each deferred (``defer_loading``)."""
    names: Mapping[str, str]
    """Tool name -> the BFCL name it came from."""
    functions: Mapping[str, str]
    """Tool name -> its definition (JSON, keys sorted)."""
    definitions: int
    """Function definitions in the data (a name may be defined several times)."""

    def __len__(self) -> int:
        return len(self.entries)


def _stub(**arguments: Any) -> str:
    return "ok"


def _in_order() -> Iterable[Mapping[str, Any]]:
    """Every record, the suite's categories first (so their definitions are the registry's)."""
    everything = [record for name in FILES for record in records(name)]
    yield from (r for c in CATEGORIES for r in everything if r["category"] == c)
    yield from (r for r in everything if r["category"] not in CATEGORIES)


def _definition(function: Mapping[str, Any]) -> str:
    return json.dumps(function, sort_keys=True)


@cache
def registry() -> Registry:
    """The registry every case of the suite is asked against (built once per process)."""
    functions: dict[str, Mapping[str, Any]] = {}
    definitions: set[str] = set()
    for record in _in_order():
        for function in record["functions"]:
            definitions.add(_definition(function))
            functions.setdefault(bfcl_tool_name(function["name"]), function)
    chosen = list(functions.values())
    toolset = bfcl_tools(chosen, {f["name"]: _stub for f in chosen})
    entries = tuple(ToolEntry.of(item) for item in toolset.tools)
    return Registry(
        entries,
        tuple(map(deferred, entries)),
        dict(toolset.original_names),
        {name: _definition(function) for name, function in functions.items()},
        len(definitions),
    )


def parse_modes(tools: str | Sequence[str]) -> tuple[str, ...]:
    """``"search"``, ``"search,own"`` or a list of modes -> the modes, checked.

    Raises:
        ValueError: A mode that is not one of ``TOOL_MODES`` (the message lists them).
    """
    given = tools.split(",") if isinstance(tools, str) else list(tools)
    modes = tuple(dict.fromkeys(mode.strip() for mode in given if mode.strip()))
    wrong = [mode for mode in modes if mode not in TOOL_MODES]
    if wrong or not modes:
        raise ValueError(
            f"bfcl:{SUITE} --tools {','.join(given)!r}: a mode is one of "
            f"{', '.join(TOOL_MODES)} (several comma-separated, e.g. search,own)"
        )
    return modes


def many_tools_suite(
    start: int = 0,
    limit: int | None = None,
    ids: Sequence[str] = (),
    tools: str | Sequence[str] = "search",
) -> list[EvalCase]:
    """The suite's cases: for each mode of ``tools``, ``limit`` questions from ``start`` of
    each category (or those whose BFCL id is in ``ids``). A case's id and category name its
    mode: ``search/simple_python_0`` in ``search/simple_python``.

    Raises:
        ValueError: A mode that is not one of ``TOOL_MODES``.
    """
    modes = parse_modes(tools)
    chosen = [r for c in CATEGORIES for r in bfcl_records(c, start, limit, ids)]
    if not chosen:
        return []
    shared = registry() if set(modes) != {"own"} else None  # "own" needs no registry
    return [_asked(bfcl_case(record), shared, mode) for mode in modes for record in chosen]


def _asked(case: EvalCase, shared: Registry | None, mode: str) -> EvalCase:
    """``case`` asked against the registry in ``mode`` (None: only its own tools)."""
    named = replace(
        case, suite=f"bfcl:{SUITE}", id=f"{mode}/{case.id}", category=f"{mode}/{case.category}"
    )
    if mode == "own" or shared is None:
        return named
    own = {  # the case's own definitions where the registry holds another
        entry.name: entry
        for entry, function in zip(case.tools, case.functions, strict=True)
        if shared.functions[entry.name] != _definition(function)
    }
    names = {**shared.names, **case.names}
    if mode == "all":
        entries = tuple(own.get(e.name, e) for e in shared.entries) if own else shared.entries
        return replace(named, tools=entries, names=names)
    held = shared.deferred
    if own:  # else the registry's own tuple: cases without their own definitions share it
        held = tuple(deferred(own[e.name]) if e.name in own else e for e in held)
    return replace(named, tools=held, names=names, tool_search=True)


def shown_tokens(case: EvalCase) -> int:
    """About how many tokens the tools ``case`` shows in its first request take (their
    JSON's characters / ``CHARS_PER_TOKEN``); a deferred tool is not shown."""
    chars = sum(
        len(json.dumps({"name": e.name, "description": e.spec.description}))
        + len(json.dumps(e.spec.parameters))
        for e in case.tools
        if not e.options.defer_loading
    )
    return chars // CHARS_PER_TOKEN


def check_context(cases: Sequence[EvalCase], models: Iterable[Model]) -> None:
    """Refuse, before anything runs, this suite's cases whose tools cannot fit a model's
    context: for a model that states its context (a local model's ``n_ctx``), the case that
    shows the most tools. A model that does not state it (a server) is asked, and its own
    error is the case's; other suites' cases are left to the model's own check.

    Raises:
        ValueError: The tools' estimated tokens and the context's size, and what to do.
    """
    cases = [case for case in cases if case.suite == f"bfcl:{SUITE}"]
    stated = [(model, size) for model in models if (size := _context_of(model)) is not None]
    if not cases or not stated:
        return
    largest = max(cases, key=lambda case: sum(not e.options.defer_loading for e in case.tools))
    needed = shown_tokens(largest)
    for model, size in stated:
        if needed >= size:
            shown = sum(not e.options.defer_loading for e in largest.tools)
            raise ValueError(
                f"case {largest.id!r} shows {shown:,} tools, about {needed:,} tokens a request; "
                f"the model {model.name!r} has a context of {size:,} tokens (n_ctx): ask "
                f"with tool search (--tools search) or the case's own tools (--tools own)"
            )


def _context_of(model: Model) -> int | None:
    if "tooldeck.models.local" not in sys.modules:  # no local model was made
        return None
    from tooldeck.models.local import LocalModel

    return model.n_ctx if isinstance(model, LocalModel) else None


@dataclass(frozen=True, slots=True)
class Recall:
    """The search on its own: for each case, where ``search_tools`` ranks the case's
    expected tool among the ``depth`` it returns for the case's question."""

    depth: int
    registry: int
    """Tools in the registry searched."""
    ranks: tuple[tuple[str, str, int | None], ...]
    """(case id, category, rank from 1; None: not among the ``depth`` returned)."""

    def rows(self) -> list[dict[str, Any]]:
        """Per category, then over all cases: cases, recall@1 and recall@``depth``."""
        categories = list(dict.fromkeys(category for _, category, _ in self.ranks))
        groups = [(c, [r for _, cat, r in self.ranks if cat == c]) for c in categories]
        if len(groups) > 1:
            groups.append(("all", [rank for _, _, rank in self.ranks]))
        return [
            {
                "category": category,
                "cases": len(ranks),
                "recall@1": sum(rank == 1 for rank in ranks) / len(ranks),
                f"recall@{self.depth}": sum(rank is not None for rank in ranks) / len(ranks),
            }
            for category, ranks in groups
        ]

    def to_json(self) -> dict[str, Any]:
        """The rows and each case's rank, as JSON values."""
        return {
            "depth": self.depth,
            "registry": self.registry,
            "summary": self.rows(),
            "cases": [{"id": i, "category": c, "rank": r} for i, c, r in self.ranks],
        }

    def markdown(self) -> str:
        """The rows as a Markdown table."""
        lines = [
            f"| category | cases | recall@1 | recall@{self.depth} |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| {row['category']} | {row['cases']} | {row['recall@1']:.1%} | "
            f"{row[f'recall@{self.depth}']:.1%} |"
            for row in self.rows()
        ]
        return "\n".join(lines)


async def search_recall(cases: Sequence[EvalCase], depth: int = 5) -> Recall:
    """Ask ``search_tools`` each case's question, as a model would (a scripted one: no model
    runs), and find the case's expected tools among the ``depth`` it returns. Cases whose
    tools are not found by search (``own``, ``all``) are passed over; cases that share a
    registry share its index (built once).

    Raises:
        ImportError: The bm25s library is missing (``pip install 'tooldeck[search]'``).
    """
    searched = [case for case in cases if case.tool_search]
    groups: dict[int, list[EvalCase]] = {}
    for case in searched:
        groups.setdefault(id(case.tools), []).append(case)
    ranks: dict[str, int | None] = {}
    for group in groups.values():
        view, search = ToolView.of(group[0].tools), ToolSearch()
        for case in group:
            ranks[case.id] = await _rank(case, view, search, depth)
    return Recall(
        depth,
        len(searched[0].tools) if searched else 0,
        tuple((case.id, case.category, ranks[case.id]) for case in searched),
    )


async def _rank(case: EvalCase, view: ToolView, search: ToolSearch, depth: int) -> int | None:
    """The rank of the case's last expected tool among those the search returns."""
    question = case.messages[-1].content
    asked = ToolCall(id="search", name=SEARCH_TOOL, arguments={"query": question, "limit": depth})
    model = ScriptedModel([AssistantOutput(tool_calls=(asked,)), AssistantOutput(content="done")])
    result = await Agent(model, view, capabilities=[search]).run(question)
    states = result.capability_states or {}
    found: list[str] = states[search.state_key]["revealed"]
    expected = {bfcl_tool_name(name) for call in case.expected_calls() for name in call}
    places = [found.index(name) + 1 for name in expected if name in found]
    return max(places) if places and len(places) == len(expected) else None
