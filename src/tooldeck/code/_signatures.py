"""The tools a program may call, as the model reads them: typed Python async functions with
their docstrings; and the values their calls give the program (typed when the tool declares
its return type, JSON-shaped otherwise)."""

from __future__ import annotations

import functools
import json
import keyword
import typing
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from tooldeck.tools.function import FunctionTool
from tooldeck.tools.registry import ToolEntry

_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}
_NO_RETURN = object()


def signature(entry: ToolEntry) -> str:
    """``async def name(a: int, b: str = ...) -> T:`` with the tool's docstring under it."""
    schema = entry.spec.parameters
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    params = [
        f"{name}: {_type_of(spec)}" + ("" if name in required else " = ...")
        for name, spec in sorted(properties.items(), key=lambda item: item[0] not in required)
    ]
    shown = ", ".join(["*", *params]) if params else ""
    returns = return_type(entry)
    head = f"async def {entry.name}({shown}) -> {_shown_type(returns)}:"
    doc = entry.spec.description.strip() or "(no description)"
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    return f'{head}\n    """\n{body}\n    """'


def callable_name(name: str) -> bool:
    """Whether a program can call the tool ``name`` by its name."""
    return name.isidentifier() and not keyword.iskeyword(name)


def described(entries: Iterable[ToolEntry]) -> str:
    """The signatures of ``entries``, one after another."""
    return "\n\n".join(signature(entry) for entry in entries)


def stubs(entries: Iterable[ToolEntry]) -> str:
    """The signatures of ``entries`` as a stub the type checker reads."""
    bodies = "\n\n".join(f"{signature(entry)}\n    ..." for entry in entries)
    return f"from typing import Any, Literal\n\n{bodies}\n"


def return_type(entry: ToolEntry) -> Any:
    """The return type a function tool declares (``_NO_RETURN`` when none is known)."""
    handler = entry.handler
    if not isinstance(handler, FunctionTool) or handler.fn is None:
        return _NO_RETURN
    return _declared(handler.fn)


@functools.lru_cache(maxsize=1024)
def _declared(function: Callable[..., Any]) -> Any:
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # an annotation that does not resolve: JSON-shaped values
        return _NO_RETURN
    return hints.get("return", _NO_RETURN)


@functools.lru_cache(maxsize=1024)
def _adapter(declared: Any) -> TypeAdapter[Any]:
    return TypeAdapter(declared)


def value_of(entry: ToolEntry, output: str) -> Any:
    """What a call's output gives the program: text for a tool that returns ``str``; a value
    of the declared type (checked) read from its JSON; otherwise the JSON read as it is (or
    the text, when it is not JSON)."""
    declared = return_type(entry)
    if declared is str:
        return output
    if declared is _NO_RETURN or declared is Any:
        try:
            return json.loads(output)
        except ValueError:
            return output
    try:
        value = _adapter(declared).validate_json(output or "null")
    except ValidationError as error:
        raise TypeError(
            f"{entry.name!r} returned a value that is not its declared type "
            f"{_shown_type(declared)}: {error.errors()[0]['msg']}"
        ) from None
    return to_jsonable_python(value)


def _type_of(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if "enum" in spec:
        return "Literal[" + ", ".join(json.dumps(value) for value in spec["enum"]) + "]"
    if isinstance(kind, list):
        return " | ".join(_type_of({**spec, "type": each}) for each in kind)
    if kind == "array":
        items = spec.get("items")
        return f"list[{_type_of(items)}]" if isinstance(items, dict) else "list"
    if kind == "object":
        return "dict"
    if isinstance(kind, str) and kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    options = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(options, list):
        return " | ".join(_type_of(option) for option in options if isinstance(option, dict))
    return "Any"


def _shown_type(declared: Any) -> str:
    if declared is _NO_RETURN:
        return "Any"
    if declared is None or declared is type(None):
        return "None"
    if isinstance(declared, type):
        return declared.__name__ if declared.__module__ == "builtins" else "dict"
    return str(declared).replace("typing.", "")
