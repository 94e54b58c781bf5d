"""Checking an explicit JSON Schema against its metaschema, once per distinct shape of node.

``jsonschema``'s own ``check_schema`` costs about a millisecond per schema (the 2020-12
metaschema is seven vocabularies joined by ``$dynamicRef``), which adds up when thousands of
tools are built (BFCL, MCP servers). The verdict is the same when each node is checked on
its own with its subschemas replaced by ``{}``: the metaschema applies itself to every
subschema and nothing else relates one node to another. And most of a node's text does not
matter to the metaschema: a description only has to be a string, a default can be anything,
property names are free. So each node is reduced to its *shape* (subschemas ``{}``,
annotations emptied, a ``required`` or ``enum`` list of distinct items shortened to one
item), and each shape is checked once per process. A schema that fails is checked again
whole, so the error is jsonschema's own.
"""

from __future__ import annotations

import json
from typing import Any

from tooldeck.tools.schema._walk import JsonSchema, children, walk

_TEXT_ANNOTATIONS = ("description", "title", "$comment")
"""Keywords the metaschema only requires to be strings."""
_ANY_VALUE = ("default", "const")
"""Keywords that may hold any value."""
_FREE_NAMES = frozenset(("properties", "$defs", "definitions", "dependentSchemas"))
"""Keywords mapping names the metaschema does not constrain to subschemas."""
_MAX_SHAPES = 10_000

_valid_shapes: set[tuple[str, str]] = set()
"""(metaschema id, shape as JSON) of the node shapes that passed."""


def check_schema(schema: JsonSchema) -> None:
    """Raise jsonschema's SchemaError if ``schema`` is not valid for its metaschema."""
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    meta_id = str(cls.META_SCHEMA.get("$id") or cls.META_SCHEMA.get("id", ""))
    meta = None
    for node in walk(schema):
        shape = _shape(node)
        key = (meta_id, json.dumps(shape, sort_keys=True, default=repr))
        if key in _valid_shapes:
            continue
        if meta is None:
            meta = cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
        if not meta.is_valid(shape):
            cls.check_schema(schema)  # raises jsonschema's own error for the whole schema
            return  # the whole schema passed after all: accept it, remember nothing
        if len(_valid_shapes) >= _MAX_SHAPES:
            _valid_shapes.clear()
        _valid_shapes.add(key)


def _shape(node: JsonSchema) -> JsonSchema:
    """What the metaschema sees of ``node`` alone (see the module docstring)."""
    out = dict(node)
    for (key, at), _, _ in children(node):
        if at is None:
            out[key] = {}
        elif isinstance(at, int):
            out[key] = [{} if isinstance(sub, dict) else sub for sub in node[key]]
        elif key in _FREE_NAMES and all(isinstance(sub, dict) for sub in node[key].values()):
            out[key] = {}
        else:
            table = node[key]
            out[key] = {name: {} if isinstance(sub, dict) else sub for name, sub in table.items()}
    for key in _TEXT_ANNOTATIONS:
        if isinstance(out.get(key), str):
            out[key] = ""
    for key in _ANY_VALUE:
        if key in out:
            out[key] = None
    if _distinct(out.get("enum")):
        out["enum"] = out["enum"][:1]
    required = out.get("required")
    if isinstance(required, list) and _distinct(required) and all(map(_is_text, required)):
        out["required"] = [""]
    if isinstance(out.get("examples"), list):
        out["examples"] = []
    return out


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _distinct(value: Any) -> bool:
    """A non-empty list of distinct items."""
    if not isinstance(value, list) or not value:
        return False
    texts = [json.dumps(item, sort_keys=True, default=repr) for item in value]
    return len(set(texts)) == len(texts)
