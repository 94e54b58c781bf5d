"""The BFCL suites shipped with tooldeck: ``bfcl:simple_python``, ``bfcl:irrelevance``, ...

The data is BFCL v4's (Berkeley Function Calling Leaderboard, Apache-2.0; the licence and
its notes are in ``data/`` beside this module). Each record becomes an ``EvalCase``: its
functions become tools (``dialect.bfcl_tools``, beside this module, with stub handlers), its
ground truth the expected calls (any order in the ``parallel*`` categories, which also ask
the model for parallel calls), and an irrelevance record expects no call (a
``live_relevance`` record any call). Please credit BFCL where results are reported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from tooldeck.eval.bfcl.dialect import bfcl_tools
from tooldeck.eval.cases import EvalCase, ExpectCalls, ExpectDecision
from tooldeck.eval.errors import UnknownSuite
from tooldeck.messages import Message
from tooldeck.tools.registry import ToolEntry

DATA = Path(__file__).resolve().parent / "data"
FILES = ("bfcl_tools.jsonl", "bfcl_irrelevance.jsonl")


@cache
def records(name: str) -> tuple[dict[str, Any], ...]:
    """The records of one data file, parsed once per process."""
    with (DATA / name).open(encoding="utf-8") as lines:
        return tuple(json.loads(line) for line in lines)


@cache
def categories() -> tuple[str, ...]:
    """Every BFCL category shipped, in the data's order."""
    names = (record["category"] for name in FILES for record in records(name))
    return tuple(dict.fromkeys(names))


def bfcl_records(
    category: str, start: int = 0, limit: int | None = None, ids: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The records of ``category``: ``limit`` of them from ``start``, or those in ``ids``.

    Raises:
        UnknownSuite: No such category (the message lists them).
    """
    if category not in categories():
        raise UnknownSuite(
            f"no BFCL category {category!r}; the categories are: {', '.join(categories())} "
            "(and bfcl:many_tools, a suite of its own)"
        )
    chosen = [r for name in FILES for r in records(name) if r["category"] == category]
    if ids:
        wanted = set(ids)
        return [r for r in chosen if r["id"] in wanted]
    return chosen[start : None if limit is None else start + limit]


def bfcl_suite(
    category: str, start: int = 0, limit: int | None = None, ids: Sequence[str] = ()
) -> list[EvalCase]:
    """The cases of a BFCL category (see ``bfcl_records`` for the selection)."""
    return [bfcl_case(record) for record in bfcl_records(category, start, limit, ids)]


def _stub(**arguments: Any) -> str:
    return "ok"


def bfcl_case(record: Mapping[str, Any]) -> EvalCase:
    """One BFCL record as a case."""
    functions = record["functions"]
    toolset = bfcl_tools(functions, {f["name"]: _stub for f in functions})
    system, messages = conversation(record)
    truth = record.get("ground_truth")
    parallel = "parallel" in record["category"]
    expect = (
        ExpectDecision(bool(record.get("expect_call")))
        if truth is None
        else ExpectCalls(tuple(truth), any_order=parallel)
    )
    return EvalCase(
        id=record["id"],
        suite=f"bfcl:{record['category']}",
        category=record["category"],
        messages=messages,
        tools=tuple(ToolEntry.of(tool) for tool in toolset.tools),
        expect=expect,
        instructions=system,
        functions=tuple(functions),
        names=dict(toolset.original_names),
        parallel=True if parallel else None,
    )


def conversation(record: Mapping[str, Any]) -> tuple[str, tuple[Message, ...]]:
    """(system text, the conversation) of a record; the last message is the user's."""
    turns = record.get("messages") or [{"role": "user", "content": record["question"]}]
    system = "\n".join(t["content"] for t in turns if t["role"] == "system") or (
        record.get("system") or ""
    )
    chat = [t for t in turns if t["role"] != "system"]
    earlier = [
        Message(role="assistant" if t["role"] == "assistant" else "user", content=t["content"])
        for t in chat[:-1]
    ]
    return system, (*earlier, Message(role="user", content=chat[-1]["content"]))
