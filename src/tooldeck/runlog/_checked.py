"""Rows read back from the run log, checked against the records they become.

The database is a file anyone may edit (or another program write): each column must hold
the type its record's field declares, or reading stops with a RunLogError naming the table,
the run and the column. The expected types come from the records' own annotations, so a
field added to a record is checked with no change here.
"""

from __future__ import annotations

import json
import types
from collections.abc import Sequence
from dataclasses import fields
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from tooldeck.errors import RunLogError

Allowed = tuple[tuple[str, tuple[type, ...]], ...]
"""Per column: its field's name and the Python types SQLite may give back for it."""


@cache
def allowed_types(record: type) -> Allowed:
    """The columns of ``record`` (a dataclass) in order, with the types each accepts."""
    hints = get_type_hints(record)
    return tuple((field.name, _python_types(hints[field.name])) for field in fields(record))


def _python_types(hint: Any) -> tuple[type, ...]:
    if get_origin(hint) in (Union, types.UnionType):
        return tuple(kind for part in get_args(hint) for kind in _python_types(part))
    if hint is type(None):
        return (type(None),)
    if hint is float:
        return (float, int)  # SQLite gives back an integral REAL as it was stored
    if hint in (str, int):
        return (hint,)
    if hint is bool:
        return (int,)  # stored as 0 or 1 (the reader makes it a bool)
    return (str,)  # stored as JSON text (settings), parsed by the reader


def checked(row: Sequence[Any], record: type, table: str, run_id: object) -> list[Any]:
    """``row``'s values, each of its column's type; a RunLogError naming the first that is not."""
    values = list(row)
    for index, (name, kinds) in enumerate(allowed_types(record)[: len(values)]):
        value = values[index]
        if type(value) not in kinds:
            raise broken(table, run_id, name, _expected(kinds), value)
        if type(value) is int and float in kinds:
            values[index] = float(value)
    return values


def json_object(text: str, table: str, run_id: object, column: str) -> dict[str, Any]:
    """A column of JSON text that holds an object."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise broken(table, run_id, column, "a JSON object", text, f" ({error})") from None
    if not isinstance(value, dict):
        raise broken(table, run_id, column, "a JSON object", value)
    return value


def broken(
    table: str, run_id: object, column: str, expected: str, value: object, why: str = ""
) -> RunLogError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return RunLogError(
        f"a row of the run log's table {table!r} (run {run_id!r}) cannot be read: column "
        f"{column!r} holds {type(value).__name__} {shown}, expected {expected}{why}. The "
        "database was changed by something other than tooldeck"
    )


_NAMES = {str: "text", int: "an integer", float: "a number", type(None): "NULL"}


def _expected(kinds: tuple[type, ...]) -> str:
    shown = [kind for kind in kinds if not (kind is int and float in kinds)]
    return " or ".join(_NAMES[kind] for kind in shown)
