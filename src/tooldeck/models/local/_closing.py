"""Every call a local model writes closes: the tokens a call needs, and finishing one in time.

The grammar bounds every value (``_bounds``): a string without ``maxLength`` holds 256
characters, a number 16 digits each side of its point, a list 16 items, a turn 8 calls.
Those bounds are in characters, and the token limit is in tokens: a small model repeating a
character (``"2023-03-04 01:00:00:0000…"``, ``"1000000…"``) writes about one token per
character, so a 256-character string alone fills a 256-token turn and the call is cut.

So the engine also budgets from the tokens left. Each turn reserves the tokens of its tools'
longest *shortest call* (``reserve``): the call head, every required property at its
shortest value, the closing braces, and ``SLACK`` — counted in characters, an upper bound in
tokens, since a token writes at least one character. No call is begun with fewer tokens
left; once a call's head is written its reserve is that tool's shortest arguments. When only
the reserve is left and a call is open, the engine finishes that call: at each token it
writes a closing token (inside a string ``"``, outside ``}``, ``]``, or a comma before a
required property: ``STRING_CLOSERS``, ``VALUE_CLOSERS``) whenever the grammar allows one,
else the model's best allowed token, and the turn ends when the call's line closes. A call
repeating itself (``looping``) is finished the same way at once, whatever the limit.
Nothing shorter than the limit is cut: a long value the tokens allow is the model's own, and
the character bounds above still hold for it. A limit smaller than a tool's shortest call
cannot hold a call at all: that turn is a ``ModelError`` saying so, never a cut call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tooldeck.messages import ToolSpec
from tooldeck.models.local._grammar import CALL_PREFIX, call_head

SLACK = 8
"""Tokens reserved beyond the shortest call: the rest of an escape or a number being
written when the reserve is reached, and a space the grammar allows between tokens."""
PATTERN_SLACK = 16
"""Characters counted for a string with a ``pattern`` (its shortest match is not computed)."""
STRING_CLOSERS = ('"}}', '"}', '"]}', '"]', '"')
"""Texts the engine prefers while finishing a call inside a string, in this order (the ones
that are one token in the model's vocabulary): close the string, and what holds it."""
VALUE_CLOSERS = ("}}", "]}", "}", "]", ",")
"""The same outside a string: close the list, the object; a comma only when the grammar
wants a required property next (inside a string these are only characters)."""
LOOP_TOKENS = 32
"""A call whose last tokens are one short stretch (1 to ``LOOP_UNIT`` tokens) written again
and again over at least this many tokens is finished at once (``looping``): the model is
repeating itself (``"0000…"``, ``"2023-04-22 2023-04-22 …"``) and would only write more of it
until the token limit. 32 tokens leave room for values that legitimately repeat (sixteen
zeros in a list, a long number)."""
LOOP_UNIT = 16
"""The longest stretch ``looping`` looks for (a date is 10 tokens: Gemma writes digits one
by one)."""
_DEPTH = 8
"""How deep ``$ref`` chains are followed before a value counts as ``PATTERN_SLACK`` long."""


@dataclass(frozen=True, slots=True)
class Reserve:
    """The tokens a turn keeps for closing a call."""

    most: int
    """Before a call's head is written: the longest shortest call of the tools, + ``SLACK``."""
    arguments: Mapping[str, int]
    """Once the head of a call of a tool is written: that tool's shortest arguments and the
    closing brace, + ``SLACK`` (the model keeps the tokens its head took)."""

    def needed(self, turn: str) -> int | None:
        """The tokens to keep at this point of a call turn (without its lead); None while a
        call's head is being written (it is the grammar's literal: nothing to finish early;
        ``most`` decides whether a call is begun)."""
        line = turn.rpartition("\n")[2]
        opening = CALL_PREFIX + '{"name": '
        if not line.startswith(opening):
            return None
        try:
            name, _ = json.JSONDecoder().raw_decode(line, len(opening))
        except ValueError:
            return None
        if not isinstance(name, str) or not line.startswith(call_head(name)):
            return None
        return self.arguments.get(name, self.most)


def reserve(tools: tuple[ToolSpec, ...]) -> Reserve:
    """The tokens a turn of calls of ``tools`` keeps for closing its call."""
    most = max((shortest_call_length(spec) for spec in tools), default=0) + SLACK
    arguments = {
        spec.name: shortest_call_length(spec) - len(call_head(spec.name)) + SLACK for spec in tools
    }
    return Reserve(most, arguments)


def shortest_call_length(spec: ToolSpec) -> int:
    """Characters of the shortest call line of ``spec`` the grammar allows (at most)."""
    arguments = shortest_value(spec.parameters, spec.parameters.get("$defs", {}))
    extra = _pattern_count(spec.parameters, spec.parameters.get("$defs", {})) * PATTERN_SLACK
    return len(call_head(spec.name)) + len(json.dumps(arguments)) + len("}") + extra


def shortest_value(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> Any:
    """A shortest JSON value ``schema`` accepts (best effort: a string's ``pattern`` and
    ``format`` are not followed; the reserve counts ``PATTERN_SLACK`` for each pattern)."""
    if not isinstance(schema, dict) or depth > _DEPTH:
        return 0
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return min(schema["enum"], key=lambda value: len(json.dumps(value)))
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return shortest_value(defs.get(ref.removeprefix("#/$defs/")), defs, depth + 1)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        values = [shortest_value(option, defs, depth + 1) for option in options]
        return min(values, key=lambda value: len(json.dumps(value)))
    kind = schema.get("type")
    if isinstance(kind, list):
        values = [shortest_value({**schema, "type": one}, defs, depth) for one in kind]
        return min(values, key=lambda value: len(json.dumps(value)))
    return _shortest_of_type(kind, schema, defs, depth)


def _shortest_of_type(
    kind: Any, schema: dict[str, Any], defs: Mapping[str, Any], depth: int
) -> Any:
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {
            name: shortest_value(properties.get(name, {}), defs, depth + 1)
            for name in schema.get("required", ())
        }
    if kind == "array":
        items = schema.get("prefixItems") or [schema.get("items", {})] * schema.get("minItems", 0)
        return [shortest_value(item, defs, depth + 1) for item in items]
    if kind == "string":
        return "x" * schema.get("minLength", 0)
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if low is not None and low > 0:
            return int(low) + 1 if kind == "integer" else low + 1
        if high is not None and high < 0:
            return int(high) - 1 if kind == "integer" else high - 1
        return 0
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return 0


def _pattern_count(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> int:
    if depth > _DEPTH:
        return 1
    if isinstance(schema, dict):
        own = 1 if "pattern" in schema or "format" in schema else 0
        return own + sum(_pattern_count(value, defs, depth + 1) for value in schema.values())
    if isinstance(schema, list):
        return sum(_pattern_count(value, defs, depth + 1) for value in schema)
    return 0


def in_call(turn: str) -> bool:
    """Whether ``turn`` (without its lead) is a turn of calls."""
    return turn.startswith(CALL_PREFIX)


def line_closed(turn: str, end_of_calls: str = "") -> bool:
    """Whether the last line of a call turn is whole: empty, (the start of) the text that
    ends the calls, or a call whose braces close."""
    line = turn.rpartition("\n")[2]
    if not line or end_of_calls.rpartition("\n")[2].startswith(line):
        return True
    depth, opened, quoted = _scan(line)
    return opened and depth == 0 and not quoted


def in_string(turn: str) -> bool:
    """Whether a call turn stops inside a JSON string."""
    return _scan(turn.rpartition("\n")[2])[2]


def _scan(line: str) -> tuple[int, bool, bool]:
    """The nesting depth at the end of ``line``, whether it opened a brace, whether it ends
    inside a string."""
    depth = 0
    opened = quoted = escaped = False
    for char in line:
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "{[":
            depth += 1
            opened = True
        elif char in "}]":
            depth -= 1
    return depth, opened, quoted


def looping(tokens: Sequence[int]) -> bool:
    """Whether ``tokens`` end with one stretch of 1 to ``LOOP_UNIT`` tokens repeated over
    ``LOOP_TOKENS`` tokens or more (at least three times)."""
    for unit in range(1, LOOP_UNIT + 1):
        span = max(LOOP_TOKENS, 3 * unit)
        span -= span % unit
        if len(tokens) >= span + unit:
            tail = tokens[-span - unit :]
            if all(tail[i] == tail[i + unit] for i in range(span)):
                return True
    return False
