"""Suite names -> cases: ``bfcl:CATEGORY`` (the shipped BFCL data), ``bfcl:many_tools`` (its
questions against one registry of every BFCL function), or a case file's path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tooldeck.eval.bfcl import bfcl_suite, categories
from tooldeck.eval.bfcl.many import SUITE, many_tools_suite
from tooldeck.eval.casefile import load_case_file
from tooldeck.eval.cases import EvalCase
from tooldeck.eval.errors import UnknownSuite

CASE_FILE_SUFFIXES = (".jsonl", ".yaml", ".yml")


def load_suite(
    name: str,
    start: int = 0,
    limit: int | None = None,
    ids: Sequence[str] = (),
    *,
    tools: str | Sequence[str] | None = None,
) -> list[EvalCase]:
    """The cases of ``name``: ``limit`` of them from ``start`` (per BFCL category), or only
    those whose id is in ``ids``. ``tools`` says how ``bfcl:many_tools`` shows its registry
    (``search``, the default, ``all`` or ``own``; several comma-separated); other suites
    take no such option.

    Raises:
        UnknownSuite: Neither a BFCL category nor a case file (the message says what is).
        CaseFileError: The case file has a mistake (its line and field).
        ValueError: ``tools`` given for another suite, or a mode there is not.
    """
    if tools is not None and name != f"bfcl:{SUITE}":
        raise ValueError(
            f"--tools {tools if isinstance(tools, str) else ','.join(tools)!r} is an option "
            f"of bfcl:{SUITE} (how its registry is shown), not of {name!r}"
        )
    if name == f"bfcl:{SUITE}":
        return many_tools_suite(start, limit, ids, "search" if tools is None else tools)
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
        f"bfcl:{SUITE} or a case file ({', '.join(CASE_FILE_SUFFIXES)})"
    )
