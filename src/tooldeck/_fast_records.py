"""Records made faster than pydantic's front door: the one place tooldeck goes past it.

The loop makes several records a round (W1a: four of them from values it has already
checked), and pydantic's own constructors cost more than the rest of the round's work on
them. Two ways round that, and nothing else in tooldeck reaches past pydantic's public API:

- ``build(cls, fields)``: ``cls(**fields)``, validated the same, through the model's
  pydantic-core validator directly (``__pydantic_validator__``), which skips
  ``BaseModel.__init__``'s Python layer.
- ``trusted(cls, fields, given)``: a record of values already validated, made without
  validating them again by writing the instance's ``__dict__`` and pydantic's own slots
  (``__pydantic_fields_set__``, ``__pydantic_extra__``, ``__pydantic_private__``) through
  their descriptors: what ``model_construct`` does, without its Python loop over the fields.

What they rely on (those three slots on ``BaseModel``, ``__dict__`` holding every field, the
validator attribute) is pydantic's layout, not its promise, so it is held by
``tests/test_fast_records.py`` within ``VERIFIED_PYDANTIC``: the test fails when the range
in pyproject.toml moves past what was verified, or when a record made here differs from the
one ``model_validate`` makes (fields, ``model_fields_set``, equality, dump).

Measured on 2026-12-07 (callgrind, bench/README's W1a recipe: 300 runs of 10 rounds minus
0, instructions per round, pydantic 2.14, mean of seeds 0-2): 239.5k with ``trusted``;
266.8k validating the four records again with ``build`` (seed 0), 367.8k with pydantic's own
``model_construct``. It buys a tenth of the round: kept, and fenced here.

May import: pydantic only (layer 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

VERIFIED_PYDANTIC = ((2, 12), (3, 0))
"""The pydantic releases these were verified for: from 2.12 up to, not including, 3.0 (the
bound in pyproject.toml; a test holds the two equal and the installed pydantic inside)."""

RecordT = TypeVar("RecordT", bound=BaseModel)


def build(cls: type[RecordT], fields: dict[str, Any]) -> RecordT:
    """``cls(**fields)``, validated the same, through pydantic-core's validator directly:
    the loop makes several records a round, and this skips ``BaseModel.__init__``'s Python
    layer (about half a microsecond each)."""
    record: RecordT = cls.__pydantic_validator__.validate_python(fields)
    return record


_new = object.__new__
_set = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted(cls: type[RecordT], fields: dict[str, Any], given: Iterable[str]) -> RecordT:
    """A record of values already checked (text the loop made, records it holds), made
    without validating them again: what pydantic's ``model_construct`` does, without its
    Python loop over the fields (half the time of ``build``; the loop makes four a round).

    ``fields`` holds every field, defaults included; ``given`` names those the caller set
    (``model_fields_set``). Only for the loop's own records (``tooldeck.run._engine.records``)
    and a call whose arguments ``ToolCall.from_json`` has checked; tests/test_records.py and
    tests/test_fast_records.py hold each equal to the record made with validation.
    """
    record = _new(cls)
    _set(record, "__dict__", fields)
    _set_fields_set(record, set(given))  # the slots' own setters: a frozen model refuses
    _set_extra(record, None)  # setattr, and object.__setattr__ looks the name up each time
    _set_private(record, None)
    return record
