"""The strict tool-schema form (``_argument_rules`` takes its nulls back out of arguments).

Strict form (what the OpenAI strict tool format accepts): every object is closed
(``additionalProperties: false``) and lists every property as required; a property that was
optional becomes nullable instead, and ``null`` means "use the default".
"""

from __future__ import annotations

from tooldeck.tools.schema._walk import (
    Definitions,
    JsonSchema,
    Subschema,
    definitions_of,
    rebuild,
    resolve,
    walk,
)

_NULL: JsonSchema = {"type": "null"}
_ANY_VALUE = "accepts any value; give it a type"
_ANNOTATIONS = ("description", "default")
"""Keywords about a property rather than its type: they stay outside a nullable wrapper."""


class NotStrictError(ValueError):
    """A schema the strict form cannot express; ``path`` says where."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path or 'the arguments'}: {reason}")
        self.path = path
        self.reason = reason


def to_strict(schema: JsonSchema) -> JsonSchema:
    """Return the strict form of ``schema``; raise NotStrictError where it has none.

    Defaults stay in the schema for the model to read (``null`` ones say nothing and go);
    a ``$ref`` with sibling keywords (a described model parameter) is inlined, as the
    strict format takes a ``$ref`` only on its own.
    """
    definitions = definitions_of(schema)

    def before(node: JsonSchema, path: str) -> JsonSchema:
        return _strict_keywords(node, path, definitions)

    strict = rebuild(schema, before=before, after=_close_object)
    used = _used_definitions(strict, definitions)
    if used:
        strict["$defs"] = {
            name: rebuild(definition, before=before, after=_close_object, path=name)
            for name, definition in schema["$defs"].items()
            if name in used
        }
    return strict


def _used_definitions(root: JsonSchema, definitions: Definitions) -> set[str]:
    """The ``$defs`` names ``root`` still refers to, directly or through other definitions."""
    used: set[str] = set()
    pending = [root]
    while pending:
        for node in walk(pending.pop()):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and ref in definitions:
                name = ref.removeprefix("#/$defs/")
                if name not in used:
                    used.add(name)
                    pending.append(definitions[ref])
    return used


def _strict_keywords(node: JsonSchema, path: str, definitions: Definitions) -> JsonSchema:
    """One node's own keywords in strict form (its subschemas are rewritten after)."""
    if not node:
        raise NotStrictError(path, _ANY_VALUE)
    if "$ref" in node and len(node) > 1:
        target = resolve(node, definitions)
        if target is not node:
            node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    if _is_object(node):
        extra = node.get("additionalProperties")
        if extra not in (None, False) or (not node.get("properties") and extra is None):
            raise NotStrictError(
                path,
                "is an object with free-form keys (like dict[str, ...]), which strict mode forbids",
            )
    return {
        key: value
        for key, value in node.items()
        if key != "$defs" and not (key == "default" and value is None)
    }


def _close_object(node: JsonSchema, path: str) -> JsonSchema:
    """An object node with its (already strict) properties all required, optional ones
    nullable, and no other keys allowed."""
    if not _is_object(node):
        return node
    properties: dict[str, Subschema] = node.get("properties", {})
    for name, sub in properties.items():
        if sub is True:  # a boolean schema: any value
            raise NotStrictError(f"{path}.{name}" if path else name, _ANY_VALUE)
    required = set(node.get("required", ()))
    node["properties"] = {
        name: sub if name in required else _nullable(sub) for name, sub in properties.items()
    }
    node["required"] = list(properties)
    node["additionalProperties"] = False
    return node


def _nullable(node: Subschema) -> Subschema:
    if admits_null(node):
        return node
    if isinstance(node, bool):  # false: no value may be given; null leaves it out
        return _NULL
    if "anyOf" in node:
        return {**node, "anyOf": [*node["anyOf"], _NULL]}
    annotations = {key: node[key] for key in _ANNOTATIONS if key in node}
    inner = {key: value for key, value in node.items() if key not in _ANNOTATIONS}
    return {"anyOf": [inner, _NULL], **annotations}


def admits_null(node: Subschema) -> bool:
    """Whether ``null`` is a valid value for ``node`` (looking into anyOf/oneOf)."""
    if isinstance(node, bool):
        return node
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in node:
        return None in node["enum"]
    return any(admits_null(sub) for key in ("anyOf", "oneOf") for sub in node.get(key, ()))


def _is_object(node: JsonSchema) -> bool:
    return node.get("type") == "object" or "properties" in node
