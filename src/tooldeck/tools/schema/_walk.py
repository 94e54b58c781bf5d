"""Walking JSON Schemas: where subschemas live, one walker that rebuilds, one ``$ref`` resolver.

Everything in tooldeck that reads or rewrites a schema (titles stripped, objects closed, the
strict form, BFCL's dialect, null-means-default, the argument checks) goes through here, so
they all agree on which keywords hold subschemas and on what a local ``$ref`` points to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, overload

JsonSchema = dict[str, Any]
Subschema = JsonSchema | bool
"""Where a schema holds a schema: ``true`` (any value) and ``false`` (none) are schemas too."""
Visit = Callable[[JsonSchema, str], JsonSchema]
"""Rewrites one schema node; gets the node and its path (``line.start``, ``points[]``)."""

_ONE = frozenset(
    {"additionalProperties", "not", "contains", "if", "then", "else", "propertyNames"}
    | {"additionalItems", "unevaluatedItems", "unevaluatedProperties"}
)
"""Keywords whose value is one subschema (``items`` too, when it is an object)."""
_MANY = frozenset(("anyOf", "oneOf", "allOf", "prefixItems"))
"""Keywords whose value is a list of subschemas (``items`` too, in drafts before 2020-12)."""
_NAMED = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"))
"""Keywords whose value maps names to subschemas."""
_ITEM_KEYWORDS = frozenset(("items", "prefixItems", "additionalItems", "unevaluatedItems"))
_DEFINITIONS = ("$defs", "definitions")

Slot = tuple[str, str | int | None]
"""Where a subschema sits in its parent: (keyword, property name / list index / None)."""


def children(node: JsonSchema, path: str = "") -> Iterator[tuple[Slot, JsonSchema, str]]:
    """Each direct subschema of ``node``: where it sits, the subschema, and its path."""
    for key, value in node.items():
        if (key == "items" or key in _ONE) and isinstance(value, dict):
            yield (key, None), value, _child_path(path, key, None)
        elif (key in _MANY or key == "items") and isinstance(value, list):
            for index, sub in enumerate(value):
                if isinstance(sub, dict):
                    yield (key, index), sub, _child_path(path, key, index)
        elif key in _NAMED and isinstance(value, dict):
            for name, sub in value.items():
                if isinstance(sub, dict):
                    yield (key, name), sub, _child_path(path, key, name)


def _child_path(path: str, key: str, at: str | int | None) -> str:
    if key in _DEFINITIONS:
        return str(at)
    if key == "properties":
        return f"{path}.{at}" if path else str(at)
    if key in _ITEM_KEYWORDS:
        return f"{path}[]"
    return path


def rebuild(
    node: JsonSchema,
    *,
    before: Visit | None = None,
    after: Visit | None = None,
    path: str = "",
) -> JsonSchema:
    """A new schema, node by node: ``before`` rewrites a node on the way down (its subschemas
    not yet rebuilt), then each subschema of what it returned is rebuilt the same way, then
    ``after`` sees the node with its rebuilt subschemas. The input is not changed."""
    if before is not None:
        node = before(node, path)
    out = dict(node)
    copied: set[str] = set()
    for (key, at), child, child_path in children(node, path):
        value = rebuild(child, before=before, after=after, path=child_path)
        if at is None:
            out[key] = value
            continue
        if key not in copied:
            out[key] = list(out[key]) if isinstance(out[key], list) else dict(out[key])
            copied.add(key)
        out[key][at] = value
    return after(out, path) if after is not None else out


def false_spelled_out(schema: JsonSchema) -> JsonSchema:
    """The same schema with each ``false`` property, item or branch written ``{"not": {}}``
    (which means the same): ``jsonschema`` reports a value refused by ``false`` without its
    path, by ``not`` with it."""

    def spelled(value: Any) -> Any:
        return {"not": {}} if value is False else value

    def before(node: JsonSchema, path: str) -> JsonSchema:
        out = dict(node)
        for key, value in node.items():
            if key in _NAMED and isinstance(value, dict):
                out[key] = {name: spelled(sub) for name, sub in value.items()}
            elif (key in _MANY or key == "items") and isinstance(value, list):
                out[key] = [spelled(sub) for sub in value]
            elif key == "items":
                out[key] = spelled(value)
        return out

    return rebuild(schema, before=before)


def walk(schema: JsonSchema) -> Iterator[JsonSchema]:
    """Every node of ``schema``, itself first, definitions included (not following ``$ref``)."""
    pending = [schema]
    while pending:
        node = pending.pop()
        yield node
        pending.extend(child for _, child, _ in children(node))


Definitions = dict[str, JsonSchema]
"""A schema's local definitions by the ``$ref`` that names them (``#/$defs/Point``)."""


def definitions_of(root: JsonSchema) -> Definitions:
    """The local definitions of ``root`` (``$defs`` and draft-7 ``definitions``)."""
    found: Definitions = {}
    for key in _DEFINITIONS:
        table = root.get(key)
        if isinstance(table, dict):
            for name, sub in table.items():
                if isinstance(sub, dict):
                    found[f"#/{key}/{name}"] = sub
    return found


@overload
def resolve(node: JsonSchema, definitions: Definitions) -> JsonSchema: ...
@overload
def resolve(node: bool, definitions: Definitions) -> bool: ...
def resolve(node: Subschema, definitions: Definitions) -> Subschema:
    """The definition a local ``$ref`` in ``node`` points to; ``node`` itself otherwise."""
    if isinstance(node, bool):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        return definitions.get(ref, node)
    return node
