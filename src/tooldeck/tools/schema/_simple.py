"""JSON Schema for simple parameter types, written directly (no pydantic model needed).

Most tools take strings, numbers, booleans, literals and lists of those. Building a pydantic
model just to read its schema costs ~1 ms per tool; this module writes the same schema
pydantic would (tests hold the two equal) in a few microseconds, and the argument model is
built on the tool's first call instead. Anything else returns None and goes to pydantic.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from tooldeck.tools.schema._walk import JsonSchema

_SCALARS: dict[Any, JsonSchema] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}
_LITERAL_TYPES: dict[type, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}
_ARRAYS: dict[Any, bool] = {list: False, set: True, frozenset: True}
"""Collection origin -> whether pydantic marks it ``uniqueItems``."""
_DEFAULT_TYPES = (str, int, float, bool, type(None))


def simple_schema(annotation: Any) -> JsonSchema | None:
    """The schema pydantic would give ``annotation``, or None when it is not a simple type."""
    scalar = _SCALARS.get(annotation)
    if scalar is not None:
        return dict(scalar)
    origin = get_origin(annotation)
    if origin is Literal:
        return _literal(get_args(annotation))
    if origin is Union or origin is types.UnionType:
        members = [simple_schema(member) for member in get_args(annotation)]
        if any(member is None for member in members):
            return None
        return {"anyOf": members}
    if origin in _ARRAYS or origin is tuple:
        return _array(origin, get_args(annotation))
    return None


def simple_default(value: Any) -> bool:
    """Whether a default can be written into the schema as is (a JSON scalar)."""
    return type(value) in _DEFAULT_TYPES


def _literal(values: tuple[Any, ...]) -> JsonSchema | None:
    kinds = {type(value) for value in values}
    if not kinds <= set(_LITERAL_TYPES):
        return None  # None, enums, bytes...: pydantic's own rules
    schema: JsonSchema = {"const": values[0]} if len(values) == 1 else {"enum": list(values)}
    if len(kinds) == 1:
        schema["type"] = _LITERAL_TYPES[kinds.pop()]
    return schema


def _array(origin: Any, arguments: tuple[Any, ...]) -> JsonSchema | None:
    if origin is tuple:
        if len(arguments) != 2 or arguments[1] is not Ellipsis:
            return None  # fixed-length tuples use prefixItems: pydantic's job
        arguments = arguments[:1]
    if len(arguments) != 1:
        return None
    items = simple_schema(arguments[0])
    if items is None:
        return None
    schema: JsonSchema = {"items": items, "type": "array"}
    if _ARRAYS.get(origin, False):
        schema["uniqueItems"] = True
    return schema
