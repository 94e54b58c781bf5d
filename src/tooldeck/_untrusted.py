"""What a model returns is untrusted: make it safe to keep, show, save and send back.

A broken or hostile model can send arguments nested 100,000 levels deep, strings of
megabytes, text that is not valid Unicode (lone surrogates, which no UTF-8 encoder accepts)
or the same call id twice. Each would later crash something that only meant to show, save
or echo the turn (a JSON encoder, a terminal, the next request). ``ToolCall.from_json``
applies these rules to argument text; the loop passes every model turn through
``tooldeck.run.untrusted.safe_output`` once, as it arrives. Arguments that break them are
kept as text and answered with ``invalid_json``, so the model reads why.

Imports nothing of tooldeck: every room may use these rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_ARGUMENT_DEPTH = 64
"""Arguments nested deeper than this are refused (``invalid_json``); real tools need a few."""
SHORT_JSON = 2 * MAX_ARGUMENT_DEPTH + 1
"""JSON text this short cannot nest past the limit: each level takes two characters."""
REPLACEMENT = "\ufffd"
_SCALARS = frozenset((int, float, bool, type(None)))
_SURROGATE = re.compile("[\ud800-\udfff]")
"""A Python string holds astral characters whole, so any surrogate in one is lone."""


def argument_problem(arguments: dict[str, Any]) -> str | None:
    """Why parsed arguments cannot be used as they are, or None when they can."""
    for key, item in arguments.items():  # the usual case first: flat, ASCII
        if type(key) is not str or not key.isascii():
            break
        if type(item) is str:
            if not item.isascii():
                break
        elif type(item) not in _SCALARS:
            break
    else:
        return None
    return _nested_problem(arguments)


def _nested_problem(arguments: dict[str, Any]) -> str | None:
    pending: list[tuple[Any, int]] = [(arguments, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            return f"are nested more than {MAX_ARGUMENT_DEPTH} levels deep; send a flatter object"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if (isinstance(key, str) and not valid_text(key)) or (
                isinstance(item, str) and not valid_text(item)
            ):
                return (
                    "contain text that is not valid Unicode (a lone surrogate such as "
                    "'\\ud800'); send valid UTF-8 text"
                )
            if isinstance(item, dict | list):
                pending.append((item, depth + 1))
    return None


def valid_text(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (has no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def repaired(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (unchanged when valid)."""
    if valid_text(text):
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def unusable_text(arguments: dict[str, Any]) -> str:
    """Arguments that break the rules, as JSON text to keep in their place (ASCII, so lone
    surrogates stay escapes); nesting past the limit is cut, as no encoder goes 100,000
    levels deep."""
    return json.dumps(_cut(arguments, MAX_ARGUMENT_DEPTH + 1), default=repr)


def _cut(value: Any, levels: int) -> Any:
    if not isinstance(value, dict | list):
        return value
    if levels <= 0:
        return "..."
    if isinstance(value, dict):
        return {key: _cut(item, levels - 1) for key, item in value.items()}
    return [_cut(item, levels - 1) for item in value]
