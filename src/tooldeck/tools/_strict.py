"""The strict tool-schema form, and the way back from it when arguments arrive.

Strict form (what the OpenAI strict tool format accepts): every object is closed
(``additionalProperties: false``) and lists every property as required; a property that was
optional becomes nullable instead, and ``null`` means "use the default".
"""

from __future__ import annotations

from typing import Any

JsonSchema = dict[str, Any]

_NULL: JsonSchema = {"type": "null"}
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
    definitions: dict[str, JsonSchema] = schema.get("$defs", {})
    strict = _strict_node(schema, "", definitions)
    used = _used_definitions(strict, definitions)
    if used:
        strict["$defs"] = {
            name: _strict_node(definition, name, definitions)
            for name, definition in definitions.items()
            if name in used
        }
    return strict


def _used_definitions(root: JsonSchema, definitions: dict[str, JsonSchema]) -> set[str]:
    """The definitions ``root`` still refers to, directly or through other definitions."""
    used: set[str] = set()
    pending = [root]
    while pending:
        for ref in _refs(pending.pop()):
            name = ref.removeprefix("#/$defs/")
            if name in definitions and name not in used:
                used.add(name)
                pending.append(definitions[name])
    return used


def _refs(node: Any) -> list[str]:
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    if not isinstance(node, dict):
        return []
    own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
    return own + [ref for key, value in node.items() if key != "$defs" for ref in _refs(value)]


def _strict_node(node: JsonSchema, path: str, definitions: dict[str, JsonSchema]) -> JsonSchema:
    if not node:
        raise NotStrictError(path, "accepts any value; give it a type")
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1 and ref.startswith("#/$defs/"):
        target = definitions.get(ref.removeprefix("#/$defs/"), {})
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    out = {
        key: value
        for key, value in node.items()
        if key != "$defs" and not (key == "default" and value is None)
    }
    if _is_object(node):
        _close_object(node, out, path, definitions)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if key in node:
            out[key] = [_strict_node(sub, path, definitions) for sub in node[key]]
    if isinstance(node.get("items"), dict):
        out["items"] = _strict_node(node["items"], f"{path}[]", definitions)
    return out


def _close_object(
    node: JsonSchema, out: JsonSchema, path: str, definitions: dict[str, JsonSchema]
) -> None:
    extra = node.get("additionalProperties")
    properties: dict[str, JsonSchema] = node.get("properties", {})
    if extra not in (None, False) or (not properties and extra is None):
        raise NotStrictError(
            path,
            "is an object with free-form keys (like dict[str, ...]), which strict mode forbids",
        )
    required = set(node.get("required", ()))
    out["properties"] = {
        name: _strict_node(sub, _join(path, name), definitions)
        if name in required
        else _nullable(_strict_node(sub, _join(path, name), definitions))
        for name, sub in properties.items()
    }
    out["required"] = list(properties)
    out["additionalProperties"] = False


def _nullable(node: JsonSchema) -> JsonSchema:
    if admits_null(node):
        return node
    if "anyOf" in node:
        return {**node, "anyOf": [*node["anyOf"], _NULL]}
    annotations = {key: node[key] for key in _ANNOTATIONS if key in node}
    inner = {key: value for key, value in node.items() if key not in _ANNOTATIONS}
    return {"anyOf": [inner, _NULL], **annotations}


def admits_null(node: JsonSchema) -> bool:
    """Whether ``null`` is a valid value for ``node`` (looking into anyOf/oneOf)."""
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in node:
        return None in node["enum"]
    return any(admits_null(sub) for key in ("anyOf", "oneOf") for sub in node.get(key, ()))


def _is_object(node: JsonSchema) -> bool:
    return node.get("type") == "object" or "properties" in node


def _is_array(node: JsonSchema) -> bool:
    return isinstance(node.get("items"), dict) or isinstance(node.get("prefixItems"), list)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class NullDefaults:
    """Turns strict-form ``null`` back into "absent" where the original schema has a default.

    Built once per tool from its original (non-strict) schema; ``apply`` runs per call and
    copies only the objects it changes.
    """

    def __init__(self, schema: JsonSchema) -> None:
        self._defs: dict[str, JsonSchema] = schema.get("$defs", {})
        self._root = schema
        self.needed = self._has_defaulted(schema, set())
        """False when no optional property refuses null: ``apply`` would change nothing."""

    def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if not self.needed or "properties" not in self._root:
            return arguments
        return self._walk_object(arguments, self._root, 0)

    def _walk(self, value: Any, node: JsonSchema, depth: int) -> Any:
        node = self._resolve(node)
        if depth > 64:
            return value
        if isinstance(value, dict) and "properties" in node:
            return self._walk_object(value, node, depth)
        if isinstance(value, list) and _is_array(node):
            return self._walk_array(value, node, depth)
        branches = [self._resolve(sub) for sub in node.get("anyOf", ()) if sub]
        objects = [sub for sub in branches if "properties" in sub]
        if isinstance(value, dict) and len(objects) == 1:
            return self._walk_object(value, objects[0], depth)
        arrays = [sub for sub in branches if _is_array(sub)]
        if isinstance(value, list) and len(arrays) == 1:  # e.g. ``list[Model] | None``
            return self._walk_array(value, arrays[0], depth)
        return value

    def _walk_array(self, value: list[Any], node: JsonSchema, depth: int) -> list[Any]:
        """Walk each item with its schema: ``prefixItems`` (tuples) first, then ``items``."""
        prefix: list[JsonSchema] = node.get("prefixItems", [])
        out = []
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else node.get("items")
            out.append(self._walk(item, sub, depth + 1) if isinstance(sub, dict) else item)
        return out

    def _walk_object(self, value: dict[str, Any], node: JsonSchema, depth: int) -> dict[str, Any]:
        properties: dict[str, JsonSchema] = node["properties"]
        required = node.get("required", ())
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                out[key] = item
            elif item is None:
                if key in required or admits_null(self._resolve(sub)):
                    out[key] = item
            else:
                out[key] = self._walk(item, sub, depth + 1)
        return out

    def _resolve(self, node: JsonSchema) -> JsonSchema:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return self._defs.get(ref.removeprefix("#/$defs/"), node)
        return node

    def _has_defaulted(self, node: JsonSchema, seen: set[str]) -> bool:
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                return False
            seen.add(ref)
            return self._has_defaulted(self._resolve(node), seen)
        properties: dict[str, JsonSchema] = node.get("properties", {})
        required = node.get("required", ())
        for name, sub in properties.items():
            if name not in required and not admits_null(self._resolve(sub)):
                return True
        children = list(properties.values())
        children += [sub for key in ("anyOf", "oneOf", "allOf") for sub in node.get(key, ())]
        if isinstance(node.get("items"), dict):
            children.append(node["items"])
        children += node.get("prefixItems", [])
        return any(self._has_defaulted(child, seen) for child in children)
