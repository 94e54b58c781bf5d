"""A function's type hints, as ``typing.get_type_hints(fn, include_extras=True)`` gives
them, with the text of each string annotation compiled once per process.

Under ``from __future__ import annotations`` every annotation is text, and
``get_type_hints`` compiles each one again for every function (a fresh ``ForwardRef`` each
time): a third of ``@tool``'s cost on a five-parameter function (W4). The same text always
compiles to the same code, so the code is kept; it is evaluated in the function's own
namespaces as ``get_type_hints`` would. What this cannot decide alone — a wrapped function,
a hint that still holds a forward reference inside it — is left to ``get_type_hints``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import CodeType
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

_COMPILED: dict[str, CodeType] = {}
"""Annotation text -> its compiled expression (bounded by the texts a program writes)."""
_MAX_KEPT = 4096


def type_hints(target: Any, localns: Mapping[str, Any] | None) -> dict[str, Any]:
    """``get_type_hints(target, localns=..., include_extras=True)``, faster for the usual
    function whose annotations are plain names and generics."""
    annotations = getattr(target, "__annotations__", None)
    globalns = getattr(target, "__globals__", None)
    if (
        not isinstance(annotations, dict)
        or not isinstance(globalns, dict)
        or hasattr(target, "__wrapped__")
    ):
        return _slow(target, localns)
    local = dict(localns or {})
    hints: dict[str, Any] = {}
    for key, value in annotations.items():
        if isinstance(value, str):
            value = eval(_code(value), globalns, local)
        if value is None:
            value = type(None)
        if not _resolved(value):
            return _slow(target, localns)
        hints[key] = value
    return hints


def _slow(target: Any, localns: Mapping[str, Any] | None) -> dict[str, Any]:
    return get_type_hints(target, localns=dict(localns or {}), include_extras=True)


def _code(text: str) -> CodeType:
    code = _COMPILED.get(text)
    if code is None:
        if len(_COMPILED) >= _MAX_KEPT:
            _COMPILED.clear()
        code = _COMPILED[text] = compile(text, "<annotation>", "eval")
    return code


def _resolved(value: Any) -> bool:
    """A class, or a generic of resolved hints (``Literal``'s values and ``Annotated``'s
    metadata as they are): anything else — text, a forward reference, a special form — is
    left to ``get_type_hints``, which checks it as it always has."""
    if isinstance(value, type):
        return True
    origin = get_origin(value)
    if origin is None:
        return value is Any
    arguments = get_args(value)
    if origin is Literal:
        return True
    if origin is Annotated:
        return _resolved(arguments[0])
    return all(_resolved(argument) for argument in arguments)
