"""GBNF for bounded JSON values: integers and numbers in a range, strings of a length.

llama.cpp's JSON Schema converter ignores ``minimum``/``maximum`` and nests a bounded
repetition one level per character, so ``_grammar`` writes these leaves itself. Every
value a local model writes is bounded, so a call closes even when a small model starts
repeating a digit: numbers have at most ``MAX_DIGITS`` digits before and after the point,
and a string without ``maxLength`` at most ``MAX_OPEN_STRING`` characters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_DIGITS = 16
"""Digits a number may have before its point, and after it (llama.cpp's own bound)."""
MAX_OPEN_STRING = 256
"""Characters a string without its own ``maxLength`` may have in a local model's call."""
MAX_OPEN_ITEMS = 16
"""Items an array (or members an object) without its own bound may have in a local model's
call: small models repeat list items until the token budget runs out."""

JSON_CHAR = '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})'
"""One character of a JSON string: control characters only escaped (a raw newline would end
the call line and is not JSON)."""
PRIMITIVES = {
    "char": "json-char",
    "dot": "json-char",
    "string": f'"\\"" json-char{{0,{MAX_OPEN_STRING}}} "\\"" space',
    "array": f'"[" space ( value ("," space value){{0,{MAX_OPEN_ITEMS - 1}}} )? "]" space',
    "object": (
        '"{" space ( string ":" space value '
        f'("," space string ":" space value){{0,{MAX_OPEN_ITEMS - 1}}} )? "}}" space'
    ),
}
"""Bounded bodies for the JSON primitives of llama.cpp's converter, by rule name (a string in a
pattern's ``.`` and in free-form values included)."""

_LARGEST = 10**MAX_DIGITS - 1
_NOT_LEAVES = frozenset(("enum", "const", "pattern", "format", "anyOf", "oneOf", "allOf", "$ref"))


def integer_range(minimum: int, maximum: int) -> str:
    """GBNF for the JSON integers from ``minimum`` to ``maximum`` (both included).

    >>> integer_range(1, 50)
    '([1-9] | [1-4] [0-9]{1} | "5" ("0"))'
    >>> integer_range(-3, 3)
    '"-" ([1-3]) | ([0-3])'
    """
    low, high = max(minimum, -_LARGEST), min(maximum, _LARGEST)
    if low > high:
        raise ValueError(f"empty integer range: {minimum!r} to {maximum!r}")
    branches = []
    if low < 0:
        branches.append(f'"-" ({_naturals(max(1, -high), -low)})')
    if high >= 0:
        branches.append(f"({_naturals(max(0, low), high)})")
    return " | ".join(branches)


def number_range(minimum: float | None, maximum: float | None) -> str:
    """GBNF for JSON numbers whose integral part fits ``minimum``..``maximum``.

    The integral part is held exactly; the fraction is free (``le=1`` admits ``1.5``, which
    validation then refuses). No exponent: every number is written out in digits.
    """
    low = -_LARGEST if minimum is None else max(math.floor(minimum), -_LARGEST)
    high = _LARGEST if maximum is None else min(math.floor(maximum), _LARGEST)
    if low > high:
        raise ValueError(f"empty number range: {minimum!r} to {maximum!r}")
    fraction = f'("." [0-9]{{1,{MAX_DIGITS}}})?'
    branches = []
    if minimum is None or minimum < 0:
        magnitude_low = 0 if maximum is None or maximum >= 0 else math.floor(-maximum)
        magnitude_high = _LARGEST if minimum is None else min(math.floor(-minimum), _LARGEST)
        branches.append(f'"-" ({_naturals(magnitude_low, magnitude_high)}) {fraction}')
    if high >= 0:
        branches.append(f"({_naturals(max(0, low), high)}) {fraction}")
    return " | ".join(branches)


def string_length(minimum: int, maximum: int) -> str:
    """GBNF for a JSON string of ``minimum`` to ``maximum`` characters."""
    if minimum > maximum:
        raise ValueError(f"empty length range: {minimum!r} to {maximum!r}")
    return f'"\\"" json-char{{{minimum},{maximum}}} "\\""'


def leaf_rule(schema: Mapping[str, Any]) -> str | None:
    """GBNF for a bounded integer, number or string schema; None when it has no bounds here."""
    kind = schema.get("type")
    if _NOT_LEAVES & schema.keys():
        return None
    if kind == "integer" and _has_range(schema):
        return integer_range(*_integer_bounds(schema))
    if kind == "number" and _has_range(schema):
        return number_range(*_number_bounds(schema))
    if kind == "string" and {"minLength", "maxLength"} & schema.keys():
        maximum = schema.get("maxLength", MAX_OPEN_STRING)
        return string_length(schema.get("minLength", 0), max(maximum, schema.get("minLength", 0)))
    return None


def _has_range(schema: Mapping[str, Any]) -> bool:
    keys = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    return bool(keys & schema.keys())


def _integer_bounds(schema: Mapping[str, Any]) -> tuple[int, int]:
    low, high = -_LARGEST, _LARGEST
    if "minimum" in schema:
        low = max(low, math.ceil(schema["minimum"]))
    if "exclusiveMinimum" in schema:
        low = max(low, math.floor(schema["exclusiveMinimum"]) + 1)
    if "maximum" in schema:
        high = min(high, math.floor(schema["maximum"]))
    if "exclusiveMaximum" in schema:
        high = min(high, math.ceil(schema["exclusiveMaximum"]) - 1)
    return low, high


def _number_bounds(schema: Mapping[str, Any]) -> tuple[float | None, float | None]:
    lows = [schema[key] for key in ("minimum", "exclusiveMinimum") if key in schema]
    highs = [schema[key] for key in ("maximum", "exclusiveMaximum") if key in schema]
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _naturals(low: int, high: int) -> str:
    """Alternatives for the integers ``low``..``high`` (0 <= low <= high), no leading zeros."""
    parts = []
    for digits in range(len(str(low)), len(str(high)) + 1):
        first = max(low, 10 ** (digits - 1) if digits > 1 else 0)
        last = min(high, 10**digits - 1)
        parts.append(_same_length(str(first), str(last)))
    return " | ".join(parts)


def _same_length(low: str, high: str) -> str:
    """Alternatives for the digit strings from ``low`` to ``high``, both of one length."""
    rest = len(low) - 1
    if low[0] == high[0]:
        return f'"{low[0]}"' + (f" ({_same_length(low[1:], high[1:])})" if rest else "")
    zeros, nines = "0" * rest, "9" * rest
    first, last = low[0], high[0]
    head = tail = ""
    if low[1:] != zeros:
        head = f'"{low[0]}" ({_same_length(low[1:], nines)})'
        first = chr(ord(first) + 1)
    if high[1:] != nines:
        tail = f'"{high[0]}" ({_same_length(zeros, high[1:])})'
        last = chr(ord(last) - 1)
    middle = ""
    if first <= last:
        digit = f"[{first}]" if first == last else f"[{first}-{last}]"
        middle = digit + (f" [0-9]{{{rest}}}" if rest else "")
    return " | ".join(part for part in (head, middle, tail) if part)
