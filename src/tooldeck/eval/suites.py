"""Suite names -> cases: ``bfcl:CATEGORY`` (the shipped BFCL data) or a case file's path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tooldeck.eval.bfcl import bfcl_suite, categories
from tooldeck.eval.casefile import load_case_file
from tooldeck.eval.cases import EvalCase
from tooldeck.eval.errors import UnknownSuite

CASE_FILE_SUFFIXES = (".jsonl", ".yaml", ".yml")


def load_suite(
    name: str, start: int = 0, limit: int | None = None, ids: Sequence[str] = ()
) -> list[EvalCase]:
    """The cases of ``name``: ``limit`` of them from ``start`` (per BFCL category), or only
    those whose id is in ``ids``.

    Raises:
        UnknownSuite: Neither a BFCL category nor a case file (the message says what is).
        CaseFileError: The case file has a mistake (its line and field).
    """
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
        f"unknown suite {name!r}: write bfcl:CATEGORY (one of {', '.join(categories())}) "
        f"or a case file ({', '.join(CASE_FILE_SUFFIXES)})"
    )
