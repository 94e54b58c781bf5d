"""Validation enforces every keyword of the schema the model is shown, for the whole table.

For each tool of the schema table (tests/test_schema_table.py), strict and non-strict, a
valid example of its arguments is built from the schema; then, for every keyword at every
place in the schema, the example is changed at that place so that it breaks that keyword
and nothing else there (``jsonschema`` is the referee: the changed value must be invalid
for the whole schema, and at its place only that keyword may fail), and the tool must
refuse it. Two documented leniencies are left out: an omitted optional argument (strict
form lists it as required, nullable) takes its default, and lax conversions such as
``"5"`` for an integer are accepted, so the wrong-type values used are ones no lax
conversion takes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from test_schema_table import LOOSE_TABLE, STRICT_TABLE
from tooldeck import FunctionTool
from tooldeck.errors import InvalidArguments

TABLE = [function_tool for function_tool, _ in STRICT_TABLE + LOOSE_TABLE]
NOT_CONSTRAINTS = frozenset(
    {"description", "default", "title", "$defs", "properties", "items", "prefixItems", "$ref"}
)
"""Annotations and applicators: they constrain nothing themselves (their subschemas do)."""
WRONG_TYPE: dict[str, Any] = {
    "string": [],
    "integer": "not a number",
    "number": "not a number",
    "boolean": "maybe",
    "array": "not a list",
    "object": "not an object",
}
"""Values of another type that no lax conversion accepts."""
OUTSIDE_ANY_OF: list[Any] = [[], "not-valid-here", {"not-valid-here": []}, 1.5]
Path = tuple[str | int, ...]
Violation = tuple[Path, str, Any]
"""Where, which keyword, and the whole arguments object that breaks it there."""


class Schema:
    """A tool's exposed schema with its definitions, and the referee built from it."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.definitions = root.get("$defs", {})
        self._whole = Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)
        self.root_example = example(self, root)
        """A valid arguments object; each violation changes one place of it."""

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        return self.definitions[ref.removeprefix("#/$defs/")] if ref else node

    def local_failures(self, node: dict[str, Any], value: Any) -> set[str]:
        """The keywords of ``node`` that ``value`` breaks (its subschemas' included)."""
        local = Draft202012Validator(
            {**node, "$defs": self.definitions}, format_checker=Draft202012Validator.FORMAT_CHECKER
        )
        return {error.validator for error in local.iter_errors(value)}

    def invalid(self, arguments: Any) -> bool:
        return not self._whole.is_valid(arguments)


def example(schema: Schema, node: dict[str, Any]) -> Any:
    """A valid value for ``node``: the first non-null branch, the smallest fitting size."""
    node = schema.resolve(node)
    if "anyOf" in node:
        branch = next(sub for sub in node["anyOf"] if sub.get("type") != "null")
        return example(schema, branch)
    if "enum" in node:
        return node["enum"][0]
    kind = node.get("type")
    if kind == "object":
        value = {name: example(schema, sub) for name, sub in node.get("properties", {}).items()}
        if isinstance(node.get("additionalProperties"), dict):
            value["key"] = example(schema, node["additionalProperties"])
        return value
    if kind == "array":
        items = [example(schema, sub) for sub in node.get("prefixItems", [])]
        if "items" in node:
            items += [example(schema, node["items"])] * max(node.get("minItems", 1), 1)
        return items
    if kind == "string":
        if node.get("format") == "date":
            return "2024-03-01"
        return "a" * max(node.get("minLength", 1), 1)
    if kind in ("integer", "number"):
        return next(n for n in (1, 2, 0.5, 3, 10) if not schema.local_failures(node, n))
    if kind == "boolean":
        return True
    raise AssertionError(f"no example for {node!r}")


def violations(schema: Schema, node: dict[str, Any], value: Any, path: Path) -> Iterator[Violation]:
    """Each keyword of ``node`` (and, inside it, of its subschemas) broken alone."""
    node = schema.resolve(node)
    if "anyOf" in node:
        yield from _broken(schema, node, path, "anyOf", OUTSIDE_ANY_OF)
        branch = next(sub for sub in node["anyOf"] if sub.get("type") != "null")
        yield from violations(schema, branch, value, path)
        return
    for keyword in node:
        if keyword == "type" and not path:
            continue  # the arguments are always an object (a ToolCall holds a dict)
        if keyword not in NOT_CONSTRAINTS and keyword != "required":
            yield from _broken(schema, node, path, keyword, _candidates(node, keyword, value))
    if isinstance(value, dict):
        yield from _object_violations(schema, node, value, path)
    if isinstance(value, list):
        for index, item in enumerate(value):
            prefix = node.get("prefixItems", [])
            sub = prefix[index] if index < len(prefix) else node.get("items")
            if sub is not None:
                yield from violations(schema, sub, item, (*path, index))


def _object_violations(
    schema: Schema, node: dict[str, Any], value: dict[str, Any], path: Path
) -> Iterator[Violation]:
    properties = node.get("properties", {})
    for name in node.get("required", ()):
        if schema.local_failures(properties[name], None):  # nullable: may be left out
            smaller = {key: item for key, item in value.items() if key != name}
            yield from _broken(schema, node, path, "required", [smaller])
    for name, item in value.items():
        sub = properties.get(name, node.get("additionalProperties"))
        if isinstance(sub, dict):
            yield from violations(schema, sub, item, (*path, name))


def _broken(
    schema: Schema, node: dict[str, Any], path: Path, keyword: str, candidates: list[Any]
) -> Iterator[Violation]:
    """The first candidate that breaks exactly ``keyword`` here and the whole schema."""
    for candidate in candidates:
        failures = schema.local_failures(node, candidate) - ({"enum", "const"} - {keyword})
        if failures == {keyword}:
            arguments = _replaced(schema.root_example, path, candidate)
            if schema.invalid(arguments):
                yield path, keyword, arguments
                return


def _candidates(node: dict[str, Any], keyword: str, value: Any) -> list[Any]:
    bound = node.get(keyword)
    match keyword:
        case "type":
            return [WRONG_TYPE[node["type"]]]
        case "enum" | "const":
            return ["not-listed", 12345]
        case "minimum" | "exclusiveMinimum":
            return [bound - 1, bound]
        case "maximum" | "exclusiveMaximum":
            return [bound + 1, bound]
        case "multipleOf":
            return [value + bound / 2, value - bound / 2]
        case "minLength" | "minItems":
            return [value[: bound - 1]]
        case "maxLength":
            return [value + value[-1:] * (bound - len(value) + 1)]
        case "maxItems":
            return [value + [value[-1]] * (bound - len(value) + 1)]
        case "pattern":
            return [
                text * len(value) for text in ("A", "-", "0", " ") if not re.search(bound, text)
            ]
        case "format":
            return ["not-a-date"]
        case "uniqueItems":
            return [[*value, value[0]]]
        case "additionalProperties":
            return [{**value, "not_in_the_schema": 1}]
    raise AssertionError(f"the test has no way to break {keyword!r} (in {node!r})")


def _replaced(root: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(root)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


def _violations_of(function_tool: FunctionTool[..., Any]) -> tuple[Any, list[Violation]]:
    schema = Schema(function_tool.spec.parameters)
    return schema.root_example, list(violations(schema, schema.root, schema.root_example, ()))


@pytest.mark.parametrize("function_tool", TABLE, ids=[t.name for t in TABLE])
def test_a_value_breaking_any_keyword_of_the_shown_schema_is_refused(
    function_tool: FunctionTool[..., Any],
) -> None:
    valid, broken = _violations_of(function_tool)
    function_tool.validate(valid)  # the example itself is accepted
    accepted = []
    for path, keyword, arguments in broken:
        try:
            function_tool.validate(arguments)
        except InvalidArguments:
            continue
        accepted.append(f"{keyword} at {list(path)}: {arguments!r}")
    assert accepted == []


def test_the_walk_breaks_every_constraint_keyword_the_table_uses() -> None:
    used: set[str] = set()
    checked: set[str] = set()
    for function_tool in TABLE:
        schema = function_tool.spec.parameters
        used |= _keywords(schema)
        checked |= {keyword for _, keyword, _ in _violations_of(function_tool)[1]}
    assert used - NOT_CONSTRAINTS - checked == set()
    assert {"uniqueItems", "additionalProperties", "pattern", "format", "anyOf"} <= checked


def _keywords(node: Any) -> set[str]:
    if isinstance(node, list):
        return {keyword for item in node for keyword in _keywords(item)}
    if not isinstance(node, dict):
        return set()
    found = set(node) - {"properties", "$defs"}
    for key, value in node.items():
        if key in ("properties", "$defs"):
            found |= {keyword for sub in value.values() for keyword in _keywords(sub)}
        elif key not in ("enum", "default", "const"):
            found |= _keywords(value)
    return found
