"""BFCL records as tooldeck test cases: the data, ground-truth calls, and mutated calls.

Used by tests/test_bfcl_conformance.py. The data is the copy shipped in the package
(tooldeck/eval/bfcl/data: BFCL, Apache-2.0; see COPIED.txt there).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from tooldeck.eval.bfcl import DATA as BFCL_DATA

DATA = BFCL_DATA
KNOWN_ISSUES = Path(__file__).parent / "bfcl_known_issues.json"
VARIANT_BOUND = 64
"""Ground-truth combinations checked per call: all of them up to this many, else a sample
in which every acceptable value of every argument appears at least once."""

_OMIT = object()
EXTRA = "not_a_parameter"
"""The name the extra-argument mutation adds (no BFCL function has a parameter of this name)."""


def bench_module(name: str) -> ModuleType:
    """Import ``bench/<name>.py`` (bench/ is not a package; its modules import each other)."""
    if name in sys.modules:
        return sys.modules[name]
    bench = Path(__file__).resolve().parents[1] / "bench"
    spec = importlib.util.spec_from_file_location(name, bench / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(bench))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(bench))
    return module


@cache
def records(name: str = "bfcl_tools.jsonl") -> tuple[dict[str, Any], ...]:
    with (DATA / name).open(encoding="utf-8") as lines:
        return tuple(json.loads(line) for line in lines)


def standardize(text: str) -> str:
    """BFCL's string normalisation: drop `` ,./-_*^``, lower-case, ``'`` -> ``"``."""
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def kinds(node: Mapping[str, Any]) -> list[str]:
    kind = node.get("type")
    return list(kind) if isinstance(kind, list) else [kind] if isinstance(kind, str) else []


@dataclass(frozen=True)
class Variants:
    """The concrete calls one ground-truth call stands for."""

    total: int
    """How many value combinations the ground truth allows."""
    calls: list[dict[str, Any]]
    """The combinations checked (all, or a sample when there are more than VARIANT_BOUND)."""


def call_variants(answer: Mapping[str, list[Any]], schema: Mapping[str, Any]) -> Variants:
    """Concrete argument dicts for one ground-truth call, read by the README's rules.

    ``""`` means "may be omitted" for an optional parameter; for a required one the only way
    to satisfy it is the literal empty string (BFCL fails a missing required parameter).
    A dict value maps keys to acceptable values (expanded the same way); so do the dicts of
    a list of dicts. Other values are literals. A string that is not in the parameter's enum
    but equals one member after BFCL's normalisation becomes that member (what a correct
    model writes; BFCL compares normalised strings).
    """
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    options: list[list[tuple[str, Any]]] = []
    for name, alternatives in answer.items():
        node = properties.get(name, {})
        choices: list[tuple[str, Any]] = []
        for value in alternatives:
            if value == "" and name not in required:
                choices.append((name, _OMIT))
            else:
                choices.extend((name, item) for item in _value_variants(value, node))
        options.append(choices)
    total = math.prod(len(choices) for choices in options)
    if total <= VARIANT_BOUND:
        combos = list(itertools.product(*options))
    else:
        width = max(len(choices) for choices in options)
        combos = [tuple(choices[i % len(choices)] for choices in options) for i in range(width)]
    calls = [{name: value for name, value in combo if value is not _OMIT} for combo in combos]
    return Variants(total, calls)


def _value_variants(value: Any, node: Mapping[str, Any]) -> list[Any]:
    if isinstance(value, dict) and "object" in kinds(node):
        required = node.get("required", [])
        per_key = []
        for key, alternatives in value.items():
            listed = alternatives if isinstance(alternatives, list) else [alternatives]
            per_key.append(
                [(key, _OMIT if item == "" and key not in required else item) for item in listed]
            )
        return [
            {key: item for key, item in combo if item is not _OMIT}
            for combo in itertools.product(*per_key)
        ]
    if (
        isinstance(value, list)
        and "array" in kinds(node)
        and any(isinstance(v, dict) for v in value)
    ):
        items = node.get("items", {})
        per_item = [_value_variants(v, items) if isinstance(v, dict) else [v] for v in value]
        return [list(combo) for combo in itertools.product(*per_item)]
    return [_enum_member(value, node)]


def _enum_member(value: Any, node: Mapping[str, Any]) -> Any:
    enum = node.get("enum")
    if isinstance(node.get("items"), Mapping) and isinstance(value, list):
        return [_enum_member(item, node["items"]) for item in value]
    if not isinstance(value, str) or not enum or value in enum:
        return value
    same = [member for member in enum if isinstance(member, str)]
    matches = [member for member in same if standardize(member) == standardize(value)]
    return matches[0] if len(matches) == 1 else value


# -- mutated calls ------------------------------------------------------------------------


def example_value(node: Mapping[str, Any]) -> Any:
    """A value the (converted) schema node accepts."""
    if node.get("enum"):
        return next((v for v in node["enum"] if v is not None), node["enum"][0])
    kind = next((k for k in kinds(node) if k != "null"), "null")
    if kind == "string":
        if node.get("format") == "date":
            return "2024-01-15"
        return "x" if node.get("maxLength") == 1 else "text"
    if kind in ("integer", "number"):
        base = 1 if kind == "integer" else 1.5
        return min(base, node["maximum"]) if "maximum" in node else base
    if kind == "boolean":
        return True
    if kind == "array":
        items = node.get("items", {})
        return [example_value(items) for _ in range(node.get("minItems", 0))]
    if kind == "object":
        properties = node.get("properties", {})
        return {name: example_value(properties.get(name, {})) for name in node.get("required", [])}
    return None


def base_call(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter with a valid value."""
    return {name: example_value(sub) for name, sub in schema.get("properties", {}).items()}


def wrong_type_value(node: Mapping[str, Any]) -> Any:
    """A non-null value whose JSON type the node does not accept."""
    accepted = set(kinds(node))
    if "number" in accepted:
        accepted.add("integer")
    candidates = (("string", "wrong"), ("integer", 12345), ("boolean", True), ("array", []))
    return next(value for kind, value in candidates if kind not in accepted)


def outside_enum_value(enum: list[Any]) -> Any:
    """A value of the enum's own type that is not one of its members."""
    sample = next(v for v in enum if v is not None)
    if isinstance(sample, bool):
        return next((flag for flag in (True, False) if flag not in enum), None)
    if isinstance(sample, int | float):
        return max(v for v in enum if isinstance(v, int | float)) + 1000
    return "not-a-listed-value"


@dataclass(frozen=True)
class Mutation:
    kind: str
    """``wrong_type``, ``missing_required``, ``extra_argument`` or ``outside_enum``."""
    field: str
    """The parameter the refusal must name."""
    arguments: dict[str, Any]


def mutations(schema: Mapping[str, Any]) -> Iterator[Mutation]:
    """Calls each parameter of ``schema`` must refuse, starting from a valid call."""
    base = base_call(schema)
    properties: Mapping[str, Any] = schema.get("properties", {})
    for name, node in properties.items():
        yield Mutation("wrong_type", name, {**base, name: wrong_type_value(node)})
        enum_at, enum = _enum_of(node)
        if enum:
            bad = outside_enum_value(enum)
            value = [bad] if enum_at == "items" else bad
            if bad is not None:
                yield Mutation("outside_enum", name, {**base, name: value})
    for name in schema.get("required", []):
        yield Mutation("missing_required", name, {k: v for k, v in base.items() if k != name})
    yield Mutation("extra_argument", EXTRA, {**base, EXTRA: 1})


def _enum_of(node: Mapping[str, Any]) -> tuple[str, list[Any]]:
    if node.get("enum"):
        return "self", list(node["enum"])
    items = node.get("items")
    if isinstance(items, Mapping) and items.get("enum"):
        return "items", list(items["enum"])
    return "", []
