"""JSON Schema -> the OpenAPI 3.0 subset Gemini's function declarations take as ``parameters``.

Kept as they are: ``title``, ``description``, ``default``, ``example``, ``required``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, ``pattern``, ``minimum``/``maximum``,
``minProperties``/``maxProperties``, ``items`` and ``properties`` (converted in turn),
string ``enum``\\s, and the formats Gemini knows (``date-time`` and ``enum`` for strings,
``float``/``double``, ``int32``/``int64``).

Rewritten: type names in upper case (``STRING``, ``OBJECT``...); ``["T", "null"]``, an
``anyOf`` with a ``{"type": "null"}`` member and a ``null`` in an enum become
``nullable``; other type lists and ``oneOf`` become ``anyOf``; a string ``const`` becomes a
one-value ``enum``; ``$ref`` into ``$defs`` / ``definitions`` is inlined, and a recursive
reference is cut at its first repetition (an ``OBJECT`` described by the definition's name),
and a ``$ref`` to anything else is dropped like the keywords below;
``allOf`` of one schema is merged into its parent.

Dropped from the structure but written at the end of the description, so the model still
reads them: every other keyword (``exclusiveMinimum``, ``multipleOf``, ``uniqueItems``,
``additionalProperties`` as a schema, ``prefixItems``, ``not``, ``allOf`` of several schemas,
enums of numbers, other formats, ...). ``additionalProperties: false``, ``$schema``, ``$id``
and ``$comment`` are dropped silently. tooldeck validates every call against the full
schema either way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_TYPE_NAMES = {
    "string": "STRING",
    "number": "NUMBER",
    "integer": "INTEGER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
}
_KEPT = frozenset(
    {
        "title",
        "description",
        "default",
        "example",
        "required",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "minProperties",
        "maxProperties",
    }
)
_FORMATS = {
    "STRING": frozenset({"date-time", "enum"}),
    "NUMBER": frozenset({"float", "double"}),
    "INTEGER": frozenset({"int32", "int64"}),
}
_SILENT = frozenset({"$schema", "$id", "$comment", "$defs", "definitions"})
_STRUCTURAL = frozenset(
    {"type", "anyOf", "oneOf", "enum", "const", "format", "items", "properties"}
)


def to_gemini_schema(parameters: Mapping[str, Any]) -> dict[str, Any] | None:
    """A tool's JSON Schema as Gemini ``parameters``; None for an object without properties.

    Examples:
        >>> to_gemini_schema({"type": "object", "properties": {"n": {"type": ["integer", "null"],
        ...     "exclusiveMinimum": 0}}, "required": ["n"], "additionalProperties": False})
        {'type': 'OBJECT', 'properties': {'n': {'type': 'INTEGER', 'nullable': True, \
'description': 'JSON Schema constraints: {"exclusiveMinimum": 0}'}}, 'required': ['n']}
    """
    converted = _Converter(parameters).convert(parameters)
    if converted.get("type") == "OBJECT" and not converted.get("properties"):
        return None
    return converted


class _Converter:
    """Converts one tool's schema; remembers the root (for ``$ref``) and the refs being inlined."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root
        self._inlining: list[str] = []

    def convert(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._inline(ref, schema)
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            rest = {key: value for key, value in schema.items() if key != "allOf"}
            return {**self.convert(all_of[0]), **self.convert(rest)}
        out: dict[str, Any] = {}
        dropped: dict[str, Any] = {}
        self._convert_type(schema, out, dropped)
        for key, value in schema.items():
            if key in _KEPT:
                out[key] = value
            elif key == "format":
                self._convert_format(value, out, dropped)
            elif key == "items" and isinstance(value, Mapping):
                out["items"] = self.convert(value)
            elif key == "properties" and isinstance(value, Mapping):
                out["properties"] = {name: self.convert(sub) for name, sub in value.items()}
            elif key == "additionalProperties" and value is False:
                continue
            elif key not in _SILENT and key not in _STRUCTURAL:
                dropped[key] = value
        if dropped:
            out["description"] = _noted(out.get("description"), dropped)
        return out

    def _inline(self, ref: str, schema: Mapping[str, Any]) -> dict[str, Any]:
        """The referenced definition, with the referring schema's own keywords over it."""
        siblings = self.convert({key: value for key, value in schema.items() if key != "$ref"})
        definition = self._definition(ref)
        if definition is None:
            siblings["description"] = _noted(siblings.get("description"), {"$ref": ref})
            return siblings
        if ref in self._inlining:
            name = ref.rsplit("/", 1)[-1]
            return {"type": "OBJECT", "description": f"a {name} (recursive: as above)"}
        self._inlining.append(ref)
        try:
            return {**self.convert(definition), **siblings}
        finally:
            self._inlining.pop()

    def _definition(self, ref: str) -> Mapping[str, Any] | None:
        """A local definition (``#/$defs/X``, ``#/definitions/X``); None for any other ref."""
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                definitions = self._root.get(prefix[2:-1])
                found = definitions.get(ref[len(prefix) :]) if definitions else None
                return found if isinstance(found, Mapping) else None
        return None

    def _convert_type(
        self, schema: Mapping[str, Any], out: dict[str, Any], dropped: dict[str, Any]
    ) -> None:
        """``type``, ``anyOf``/``oneOf``, ``enum``/``const`` -> type, anyOf, enum and nullable."""
        nullable = False
        variants = schema.get("anyOf", schema.get("oneOf"))
        given = schema.get("type")
        if isinstance(given, list):
            names = [name for name in given if name != "null"]
            nullable = len(names) < len(given)
            if len(names) > 1:
                variants = [{"type": name} for name in names]
            given = names[0] if len(names) == 1 else None
        elif given == "null":
            nullable, given = True, None
        if isinstance(variants, list):
            nullable = self._convert_variants(variants, out) or nullable
        if isinstance(given, str):
            out["type"] = _TYPE_NAMES.get(given, given.upper())
        nullable = _convert_enum(schema, out, dropped) or nullable
        if nullable:
            out["nullable"] = True

    def _convert_variants(self, variants: list[Any], out: dict[str, Any]) -> bool:
        """One non-null variant is merged in; several become ``anyOf``. True if null was one."""
        converted = [self.convert(variant) for variant in variants]
        kept = [variant for variant in converted if variant != {"nullable": True}]
        if len(kept) == 1:
            out.update(kept[0])
        elif kept:
            out["anyOf"] = kept
        return len(kept) < len(converted)

    @staticmethod
    def _convert_format(value: Any, out: dict[str, Any], dropped: dict[str, Any]) -> None:
        if value in _FORMATS.get(str(out.get("type")), ()):
            out["format"] = value
        else:
            dropped["format"] = value


def _convert_enum(schema: Mapping[str, Any], out: dict[str, Any], dropped: dict[str, Any]) -> bool:
    """A string enum (or const) is kept, typed STRING; True when it allows null."""
    if "enum" in schema:
        key, values = "enum", schema["enum"]
    elif "const" in schema:
        key, values = "const", [schema["const"]]
    else:
        return False
    present = [value for value in values if value is not None]
    if all(isinstance(value, str) for value in present):
        out["enum"] = present
        out.setdefault("type", "STRING")
    else:
        dropped[key] = schema[key]
    return len(present) < len(values)


def _noted(description: str | None, dropped: Mapping[str, Any]) -> str:
    note = "JSON Schema constraints: " + json.dumps(dropped, ensure_ascii=False)
    return f"{description}\n\n{note}" if description else note
