"""What a schema says that pydantic does not do by itself, applied to a call's arguments.

One walk over the model's arguments, guided by the schema it was shown, does up to three
things; each is switched on only when the schema needs it, so most tools skip the walk:

- **null means the default** (strict form only): an optional property is shown as nullable;
  ``null`` there is taken out so the default applies.
- **unique items**: ``uniqueItems: true`` (a ``set[str]``) refuses ``["a", "a"]``, where
  pydantic would quietly drop the duplicate.
- **unknown keys** in an object the schema closes, for schemas where pydantic cannot be told
  to forbid them everywhere (a nested model says ``extra="allow"``, so only some objects are
  open).
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Iterable
from typing import Any

from tooldeck._untrusted import MAX_ARGUMENT_DEPTH
from tooldeck.errors import ArgumentProblem
from tooldeck.tools.schema._strict import admits_null
from tooldeck.tools.schema._walk import (
    Definitions,
    JsonSchema,
    Subschema,
    definitions_of,
    resolve,
    walk,
)

MAX_DEPTH = MAX_ARGUMENT_DEPTH
"""Arguments nested deeper than this (in a recursive schema) are refused, not walked."""
_MAX_NAME = 60
"""A key longer than this is shortened in a path (the model may send any key)."""
_OBJECT = ("properties",)
_ARRAY = ("items", "prefixItems")
_SHOWN = reprlib.Repr()
"""Short and safe however big or deep the model's value: it is echoed back in an error."""
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 60, 60
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = 6


class ArgumentRules:
    """The walk for one tool's schema (built once; ``apply`` runs per call)."""

    def __init__(self, schema: JsonSchema, *, unique: bool = True, extras: bool = False) -> None:
        self._root = schema
        self.definitions = definitions_of(schema)
        self.nulls = _has_defaulted(schema, self.definitions)
        """Some optional property refuses null: strict-form ``null`` must be taken out."""
        self.unique = unique and any(node.get("uniqueItems") is True for node in walk(schema))
        """Some array must have unique items."""
        self.extras = extras
        """Report keys the schema does not list, in every object it closes."""

    def needed(self, *, closed: bool) -> bool:
        """Whether ``apply`` would do anything for a call in this form."""
        return self.unique or self.extras or (closed and self.nulls)

    def apply(
        self, arguments: dict[str, Any], *, closed: bool
    ) -> tuple[dict[str, Any], list[ArgumentProblem]]:
        """The arguments with strict-form nulls taken out (when ``closed``), and the problems
        found; objects are copied only where something changes."""
        walk = _Walk(self, nulls=closed and self.nulls)
        if "properties" not in self._root:
            return arguments, []
        return walk.object(arguments, self._root, (), 0), walk.problems


class _Walk:
    """One call's walk: the rules, and the problems found so far."""

    def __init__(self, rules: ArgumentRules, *, nulls: bool) -> None:
        self.rules = rules
        self.nulls = nulls
        self.problems: list[ArgumentProblem] = []

    def value(self, value: Any, given: Subschema, path: tuple[str | int, ...], depth: int) -> Any:
        node = resolve(given, self.rules.definitions)
        if isinstance(node, bool):  # true or false: nothing to walk into
            return value
        if depth > MAX_DEPTH:
            self.problems.append(
                ArgumentProblem(format_path(path), f"nested more than {MAX_DEPTH} levels deep")
            )
            return value
        if isinstance(value, dict):
            target = _only(node, _OBJECT, self.rules.definitions)
            return value if target is None else self.object(value, target, path, depth)
        if isinstance(value, list):
            target = _only(node, _ARRAY, self.rules.definitions)
            return value if target is None else self.array(value, target, path, depth)
        return value

    def array(
        self, value: list[Any], node: JsonSchema, path: tuple[str | int, ...], depth: int
    ) -> list[Any]:
        """Each item with its schema: ``prefixItems`` (tuples) first, then ``items``."""
        if self.rules.unique and node.get("uniqueItems") is True and _has_duplicates(value):
            self.problems.append(
                ArgumentProblem(
                    format_path(path),
                    f"has duplicate items (got {shown(value)}); every item must be different",
                )
            )
        prefix: list[JsonSchema] = node.get("prefixItems", [])
        out = []
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else node.get("items")
            walked = item
            if isinstance(sub, dict):
                walked = self.value(item, sub, (*path, index), depth + 1)
            out.append(walked)
        return out

    def object(
        self, value: dict[str, Any], node: JsonSchema, path: tuple[str | int, ...], depth: int
    ) -> dict[str, Any]:
        properties: dict[str, Subschema] = node.get("properties", {})
        required = node.get("required", ())
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                if self.rules.extras and node.get("additionalProperties") is False:
                    message = unexpected_text(tuple(properties), top_level=not path)
                    self.problems.append(ArgumentProblem(format_path((*path, key)), message))
                out[key] = item
            elif item is None and self.nulls:
                if key in required or admits_null(resolve(sub, self.rules.definitions)):
                    out[key] = item
            else:
                out[key] = self.value(item, sub, (*path, key), depth + 1)
        return out


def _only(
    node: JsonSchema, keywords: tuple[str, ...], definitions: Definitions
) -> JsonSchema | None:
    """The schema that applies to a value of the kind ``keywords`` describe: ``node`` itself,
    or its one ``anyOf`` branch of that kind (None when several are: pydantic's union picks)."""
    if any(keyword in node for keyword in keywords):
        return node
    branches = [resolve(sub, definitions) for sub in node.get("anyOf", ()) if isinstance(sub, dict)]
    matches = [sub for sub in branches if any(keyword in sub for keyword in keywords)]
    return matches[0] if len(matches) == 1 else None


def _has_duplicates(items: list[Any]) -> bool:
    seen: set[str] = set()
    for item in items:
        key = json.dumps(item, sort_keys=True, default=repr)
        if key in seen:
            return True
        seen.add(key)
    return False


def _has_defaulted(schema: JsonSchema, definitions: Definitions) -> bool:
    """Whether some optional property refuses null (its strict form adds ``null``)."""
    for node in walk(schema):
        required = node.get("required", ())
        properties: dict[str, Subschema] = node.get("properties", {})
        for name, sub in properties.items():
            if name not in required and not admits_null(resolve(sub, definitions)):
                return True
    return False


def unexpected_text(names: tuple[str, ...], *, top_level: bool) -> str:
    """What the model reads about a key the schema does not list."""
    listed = ", ".join(names)
    if top_level:
        return f"unexpected argument (the tool takes: {listed or 'no arguments'})"
    if names:
        return f"unexpected field (allowed here: {listed})"
    return "unexpected field (not in the schema)"


def format_path(location: Iterable[str | int]) -> str:
    """``('items', 0, 'name')`` -> ``items[0].name``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = part if len(part) <= _MAX_NAME else part[: _MAX_NAME - 3] + "..."
            text += f".{name}" if text else name
    return text


def shown(value: Any) -> str:
    """A short repr of a value the model sent, for error messages (bounded in length and
    depth, so a huge or deeply nested value cannot blow up the message)."""
    return _SHOWN.repr(value)
