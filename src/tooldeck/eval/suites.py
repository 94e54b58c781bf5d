"""Suite names -> cases: ``bfcl:CATEGORY`` (the shipped BFCL data), ``bfcl:many_tools`` (its
questions against one registry of every BFCL function), ``tasks:chained`` (tasks that take
chained or repeated calls) or a case file's path; each asked in the modes ``--tools`` gives."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tooldeck.eval import chained
from tooldeck.eval.bfcl import bfcl_suite, categories
from tooldeck.eval.bfcl.many import SUITE, many_tools_suite
from tooldeck.eval.casefile import load_case_file
from tooldeck.eval.cases import EvalCase
from tooldeck.eval.errors import UnknownSuite
from tooldeck.eval.modes import in_modes

CASE_FILE_SUFFIXES = (".jsonl", ".yaml", ".yml")
DEFAULT_MODES = {chained.SUITE: "own,code"}
"""Suites asked in several modes unless ``tools`` says otherwise (what they compare)."""


def load_suite(
    name: str,
    start: int = 0,
    limit: int | None = None,
    ids: Sequence[str] = (),
    *,
    tools: str | Sequence[str] | None = None,
) -> list[EvalCase]:
    """The cases of ``name``: ``limit`` of them from ``start`` (per BFCL category), or only
    those whose id is in ``ids``, in the modes of ``tools``. ``bfcl:many_tools`` has its
    own (``search``, the default, ``all`` or ``own``; ``tooldeck.eval.bfcl.many``); every
    other suite takes ``own`` (the case as it is) and ``code`` (its tools behind
    ``tooldeck.code.CodeMode``; ``tooldeck.eval.modes``), several comma-separated.
    ``tasks:chained`` is asked ``own,code`` by default, the others as they are.

    Raises:
        UnknownSuite: Neither a suite tooldeck ships nor a case file (the message says what is).
        CaseFileError: The case file has a mistake (its line and field).
        ValueError: A mode there is not, or ``code`` for a case scored on its first turn.
        ImportError: ``code`` without pydantic-monty installed.
    """
    if name == f"bfcl:{SUITE}":
        return many_tools_suite(start, limit, ids, "search" if tools is None else tools)
    cases = _cases(name, start, limit, ids)
    modes = DEFAULT_MODES.get(name) if tools is None else tools
    return cases if modes is None else in_modes(cases, name, modes)


def _cases(name: str, start: int, limit: int | None, ids: Sequence[str]) -> list[EvalCase]:
    if name == chained.SUITE:
        return chained.chained_suite(start, limit, ids)
    if name.startswith("bfcl:"):
        return [
            case
            for category in name.removeprefix("bfcl:").split(",")
            for case in bfcl_suite(category, start, limit, ids)
        ]
    if Path(name).suffix in CASE_FILE_SUFFIXES:
        cases = load_case_file(name)
        if ids:
            wanted = set(ids)
            return [case for case in cases if case.id in wanted]
        return cases[start : None if limit is None else start + limit]
    raise UnknownSuite(
        f"unknown suite {name!r}: write bfcl:CATEGORY (one of {', '.join(categories())}), "
        f"bfcl:{SUITE}, {chained.SUITE} or a case file ({', '.join(CASE_FILE_SUFFIXES)})"
    )
