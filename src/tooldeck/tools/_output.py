"""A tool's return value -> the observation text the model reads."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json


def output_text(value: Any) -> str:
    """``str`` as is, ``None`` as empty, anything else as JSON (never a Python repr).

    Pydantic models, dataclasses, dicts, lists, numbers, enums, dates and UUIDs serialize as
    JSON; an object with no JSON form falls back to ``str(value)``.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return to_json(value, fallback=str).decode()
