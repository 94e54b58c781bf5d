"""Tool definitions written in BFCL's format, turned into tooldeck tools.

It serves the evaluation (``tooldeck.eval.bfcl`` builds each case's tools with it), so it
lives beside BFCL's data; ``tooldeck.tools.dialects``, its path before, still imports (with a
DeprecationWarning).

BFCL (the Berkeley Function Calling Leaderboard) writes functions as
``{"name", "description", "parameters"}`` where ``parameters`` is JSON-Schema-like but uses
its own type names. ``bfcl_schema`` converts one ``parameters`` object to standard JSON
Schema, ``bfcl_tools`` turns a list of functions into ``FunctionTool`` objects.

The conversion rules, in order of application to every schema node:

- **Type names.** ``dict``/``HashMap``/``Hashtable`` -> ``object``; ``float``/``double``/
  ``number`` -> ``number``; ``integer``/``long``/``short``/``byte``/``Bigint`` ->
  ``integer``; ``tuple``/``list``/``Array``/``ArrayList``/``Queue``/``Stack`` -> ``array``
  (``Set`` adds ``uniqueItems``); ``String`` -> ``string``; ``char`` -> a one-character
  string; ``bool``/``Boolean`` -> ``boolean``; ``any``/``Any`` -> ``string`` (BFCL's own
  rule: its checker expects a string). A missing or empty type is ``string`` too, as BFCL
  does; any other unknown name is an error naming the path.
- **Objects.** An object with ``properties`` is closed (``additionalProperties: false``):
  BFCL refuses a parameter outside the schema. ``required`` keeps only the names listed in
  ``properties``. An object without ``properties`` stays free-form (any keys).
- **``optional``** (not standard): ``optional: true`` on a property, or a list of names at
  the object level, takes those names out of ``required``; the key itself is dropped.
- **``enum`` that contradicts the type.** On an ``array`` whose enum lists scalars, the
  enum constrains the items (BFCL's meaning). Elsewhere, when the enum's values do not fit
  the declared type (``boolean`` with ``["True", "False", "dontcare"]``), the enum wins and
  the type becomes the JSON type of its values; taken literally no value would be valid.
- **``default: null``** makes the node accept ``null`` (``type: [T, "null"]``), so the
  documented default is itself a valid value.
- Everything else (``description``, ``default``, ``format``, ``maximum``, ``minItems``,
  ...) is kept as it is.

Tool names: OpenAI-style tool names must match ``^[a-zA-Z0-9_-]{1,64}$`` and BFCL names
contain dots (``math.factorial``). ``bfcl_tool_name`` replaces every other character with
``_``; ``BfclToolset.original_names`` maps each tool name back to the BFCL name, so calls
can be scored against the original names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tooldeck.errors import ToolDefinitionError
from tooldeck.tools.function import TOOL_NAME, FunctionTool
from tooldeck.tools.schema._walk import JsonSchema, rebuild

BFCL_TYPES: Mapping[str, str] = {
    "string": "string",
    "String": "string",
    "char": "string",
    "any": "string",
    "Any": "string",
    "integer": "integer",
    "int": "integer",
    "long": "integer",
    "short": "integer",
    "byte": "integer",
    "Bigint": "integer",
    "float": "number",
    "double": "number",
    "number": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "Boolean": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "Array": "array",
    "ArrayList": "array",
    "Queue": "array",
    "Stack": "array",
    "Set": "array",
    "dict": "object",
    "object": "object",
    "HashMap": "object",
    "Hashtable": "object",
    "null": "null",
}
"""BFCL type name -> JSON Schema type (BFCL's ``GORILLA_TO_OPENAPI`` plus ``Boolean`` and
``Set``, which its Java/JavaScript categories use)."""


_JSON_TYPES: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("boolean", bool),
    ("integer", int),
    ("number", float),
    ("string", str),
    ("null", type(None)),
    ("array", list),
    ("object", dict),
)
_TRUE_WORDS = frozenset({"true", "yes", "1"})


def bfcl_schema(parameters: Mapping[str, Any]) -> JsonSchema:
    """Convert a BFCL ``parameters`` object (or any node of one) to standard JSON Schema.

    Args:
        parameters: The function's ``parameters`` as BFCL writes them (root type ``dict``).

    Returns:
        A new JSON Schema dict; the input is not changed.

    Raises:
        ToolDefinitionError: A type name the converter does not know, with its path.

    Examples:
        >>> schema = bfcl_schema({"type": "dict", "properties": {"n": {"type": "float"}}})
        >>> schema["type"], schema["properties"], schema["additionalProperties"]
        ('object', {'n': {'type': 'number'}}, False)
    """
    return rebuild(dict(parameters), before=_node_keywords, after=_node_values)


def _node_keywords(node: JsonSchema, path: str) -> JsonSchema:
    """A node's type and object keywords, read before its subschemas are converted (their
    ``optional`` flags decide ``required`` here)."""
    out: JsonSchema = {key: value for key, value in node.items() if key != "optional"}
    bfcl_type = node.get("type") or "string"
    kind = BFCL_TYPES.get(bfcl_type) if isinstance(bfcl_type, str) else None
    if kind is None:
        known = ", ".join(sorted(BFCL_TYPES))
        raise ToolDefinitionError(
            f"{path or 'parameters'}: unknown BFCL type {bfcl_type!r} (known: {known})"
        )
    out["type"] = kind
    if bfcl_type == "char":
        out.update(minLength=1, maxLength=1)
    if bfcl_type == "Set":
        out["uniqueItems"] = True
    properties = node.get("properties")
    if isinstance(properties, Mapping) and kind == "object":
        optional = _optional_names(node, properties)
        if "required" in node:
            out["required"] = [
                name for name in node["required"] if name in properties and name not in optional
            ]
        out["additionalProperties"] = False
    return out


def _node_values(out: JsonSchema, path: str) -> JsonSchema:
    """A node's enum and null default, once its items are converted."""
    if "enum" in out:
        _enum(out, path)
    if "default" in out and out["default"] is None:
        _nullable(out)
    return out


def _optional_names(node: Mapping[str, Any], properties: Mapping[str, Any]) -> set[str]:
    listed = node.get("optional")
    names = (
        {name for name in listed if isinstance(name, str)} if isinstance(listed, list) else set()
    )
    for name, sub in properties.items():
        flag = sub.get("optional") if isinstance(sub, Mapping) else None
        if flag is True or (isinstance(flag, str) and flag.lower() in _TRUE_WORDS):
            names.add(name)
    return names


def _enum(out: JsonSchema, path: str) -> None:
    values: list[Any] = list(out["enum"])
    kind = out["type"]
    if kind == "array" and values and not any(isinstance(v, list | dict) for v in values):
        items: JsonSchema = dict(out.get("items") or {})
        items["enum"] = values
        if "type" in items and not all(_fits(v, items["type"]) for v in values):
            items["type"] = _types_of(values)
        out["items"] = items
        del out["enum"]
    elif not all(_fits(value, kind) for value in values):
        out["type"] = _types_of(values)


def _nullable(out: JsonSchema) -> None:
    kind = out["type"]
    kinds = kind if isinstance(kind, list) else [kind]
    if "null" not in kinds:
        out["type"] = [*kinds, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]


def _fits(value: Any, kind: str | list[str]) -> bool:
    kinds = kind if isinstance(kind, list) else [kind]
    return _json_type(value) in kinds or (_json_type(value) == "integer" and "number" in kinds)


def _json_type(value: Any) -> str:
    for name, python_type in _JSON_TYPES:
        if isinstance(value, python_type):
            return name
    return "string"


def _types_of(values: Iterable[Any]) -> str | list[str]:
    kinds = sorted({_json_type(value) for value in values})
    return kinds[0] if len(kinds) == 1 else kinds


def bfcl_tool_name(name: str) -> str:
    """The tool name the model sees for a BFCL name: ``math.factorial`` -> ``math_factorial``.

    Raises:
        ToolDefinitionError: The name is empty or longer than 64 characters.
    """
    mapped = re.sub(r"[^a-zA-Z0-9_-]", "_", name)
    if not TOOL_NAME.match(mapped):
        raise ToolDefinitionError(
            f"BFCL function {name!r} cannot be a tool name: {mapped!r} must match "
            f"{TOOL_NAME.pattern}"
        )
    return mapped


@dataclass(frozen=True, slots=True)
class BfclToolset:
    """Tools built from BFCL functions, with what the conversion decided for each."""

    tools: tuple[FunctionTool[..., Any], ...]
    """One tool per function, in the given order; pass them to ``Agent(tools=...)``."""
    original_names: Mapping[str, str]
    """Tool name -> the BFCL function name it came from."""
    not_strict: Mapping[str, str] = field(default_factory=dict)
    """Tool name -> why its schema has no strict form (the tool is built with strict=False)."""

    def original_name(self, tool_name: str) -> str:
        """The BFCL name of a tool (a name not made here is returned unchanged)."""
        return self.original_names.get(tool_name, tool_name)

    def tool(self, bfcl_name: str) -> FunctionTool[..., Any]:
        """The tool built from the BFCL function ``bfcl_name``."""
        for item in self.tools:
            if self.original_names[item.name] == bfcl_name:
                return item
        raise KeyError(bfcl_name)


Handler = Callable[..., Any]


def bfcl_tools(
    functions: Iterable[Mapping[str, Any]],
    handlers: Mapping[str, Handler] | None = None,
    *,
    strict: bool = True,
) -> BfclToolset:
    """Build a FunctionTool for each BFCL function, with its schema converted by ``bfcl_schema``.

    Each tool gets the strict schema form when its schema has one; otherwise it is built
    with ``strict=False`` and ``not_strict`` says why (a free-form ``dict`` parameter is the
    usual reason). Either way tooldeck validates every call against the converted schema.

    Args:
        functions: BFCL function definitions (``name``, ``description``, ``parameters``).
        handlers: BFCL function name -> the callable that runs it (keyword arguments).
            A function without a handler is still shown to the model; calling it raises
            NotImplementedError, which the model reads as a ``tool_error``.
        strict: Try the strict form at all; False builds every tool non-strict.

    Raises:
        ToolDefinitionError: An unknown type name, a name that cannot be a tool name,
            or two functions whose tool names collide.

    Examples:
        >>> toolset = bfcl_tools([{"name": "math.factorial", "description": "n!",
        ...     "parameters": {"type": "dict", "properties": {"number": {"type": "integer"}},
        ...                    "required": ["number"]}}])
        >>> toolset.tools[0].name, toolset.original_name("math_factorial")
        ('math_factorial', 'math.factorial')
    """
    handlers = handlers or {}
    tools: list[FunctionTool[..., Any]] = []
    names: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for function in functions:
        bfcl_name = function["name"]
        name = bfcl_tool_name(bfcl_name)
        if name in names:
            raise ToolDefinitionError(
                f"BFCL functions {names[name]!r} and {bfcl_name!r} both map to tool name {name!r}"
            )
        names[name] = bfcl_name
        handler = handlers.get(bfcl_name) or _missing_handler(bfcl_name)
        built, reason = _build(name, function, handler, strict)
        tools.append(built)
        if reason is not None:
            reasons[name] = reason
    return BfclToolset(tuple(tools), names, reasons)


def _build(
    name: str, function: Mapping[str, Any], handler: Handler, strict: bool
) -> tuple[FunctionTool[..., Any], str | None]:
    schema = bfcl_schema(function.get("parameters") or {"type": "dict", "properties": {}})
    description = function.get("description") or ""
    if not strict:
        return FunctionTool(name, description, schema, handler, strict=False), "strict=False given"
    try:
        return FunctionTool(name, description, schema, handler, strict=True), None
    except ToolDefinitionError as error:
        return FunctionTool(name, description, schema, handler, strict=False), str(error)


def _missing_handler(bfcl_name: str) -> Handler:
    def missing(**arguments: Any) -> Any:
        raise NotImplementedError(f"no handler was given for BFCL function {bfcl_name!r}")

    return missing
