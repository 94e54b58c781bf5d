"""The fenced speed trick (``tooldeck._fast_records``) holds on the pydantic installed.

It writes pydantic's own slots to make records without validating them again: pydantic's
layout, not its promise. So the supported pydantic range is the one it was verified for, the
records it makes are the records ``model_validate`` makes, and no other module does it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pydantic
import pytest
from pydantic import BaseModel

from tooldeck._fast_records import VERIFIED_PYDANTIC, build, trusted
from tooldeck.errors import ErrorCode
from tooldeck.messages import Message, ToolCall, ToolResult, Usage
from tooldeck.results import ToolTrace

ROOT = Path(__file__).resolve().parents[1]
CALL = ToolCall(id="c1", name="add", arguments={"left": 1, "right": [2, {"x": None}]})


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def test_the_supported_pydantic_range_is_the_one_the_trick_was_verified_for() -> None:
    """Widening pyproject's pydantic bound means verifying the trick again (and saying so
    in ``VERIFIED_PYDANTIC``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (bound,) = [d for d in project["project"]["dependencies"] if re.match(r"pydantic\b", d)]
    lower = re.search(r">=\s*([\d.]+)", bound)
    upper = re.search(r"<\s*([\d.]+)", bound)
    assert lower is not None, bound
    assert upper is not None, bound
    assert (_version(lower.group(1)), _version(upper.group(1) + ".0")) == VERIFIED_PYDANTIC


def test_the_installed_pydantic_is_in_the_verified_range() -> None:
    low, high = VERIFIED_PYDANTIC
    assert low <= _version(pydantic.VERSION) < high, pydantic.VERSION


def test_the_slots_it_writes_are_where_it_writes_them() -> None:
    for slot in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
        assert slot in BaseModel.__slots__
        assert hasattr(BaseModel.__dict__[slot], "__set__")


CASES: list[tuple[type[BaseModel], dict[str, Any], tuple[str, ...]]] = [
    (ToolCall, {"id": "c1", "name": "add", "arguments": {"a": 1}, "raw_arguments": None},
     ("id", "name", "arguments")),
    (Message, {"role": "tool", "content": "4", "tool_calls": (), "tool_call_id": "c1",
               "provider_items": (), "untrusted": True},
     ("role", "content", "tool_call_id", "untrusted")),
    (Message, {"role": "assistant", "content": "", "tool_calls": (CALL,), "tool_call_id": None,
               "provider_items": ({"id": "r1"},), "untrusted": False},
     ("role", "content", "tool_calls", "provider_items")),
    (ToolResult, {"ok": True, "output": "done", "error_code": None}, ("ok", "output")),
    (ToolTrace, {"call": CALL, "result": ToolResult.failure(ErrorCode.TOOL_ERROR, "boom"),
                 "duration_s": 0.5, "error": KeyError("x"), "inner_trace": None,
                 "full_output": None, "untrusted": False},
     ("call", "result", "duration_s", "error")),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "fields", "given"), CASES)
def test_a_record_made_the_fast_way_is_the_validated_one(
    cls: type[BaseModel], fields: dict[str, Any], given: tuple[str, ...]
) -> None:
    validated = cls.model_validate({name: fields[name] for name in given})
    for fast in (trusted(cls, dict(fields), given), build(cls, {n: fields[n] for n in given})):
        assert type(fast) is cls
        assert fast == validated
        assert fast.__dict__ == validated.__dict__
        assert fast.model_fields_set == validated.model_fields_set == set(given)
        assert fast.model_dump() == validated.model_dump()
        assert fast.model_dump_json() == validated.model_dump_json()
        assert fast.__pydantic_extra__ is validated.__pydantic_extra__ is None
        assert fast.__pydantic_private__ is validated.__pydantic_private__ is None


def test_a_fast_record_stays_frozen() -> None:
    fast = trusted(ToolResult, {"ok": True, "output": "x", "error_code": None}, ("ok", "output"))
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        fast.output = "y"  # type: ignore[misc]


def test_build_validates_as_the_constructor_does() -> None:
    with pytest.raises(pydantic.ValidationError):
        build(Usage, {"input_tokens": "many"})


def test_no_other_module_goes_past_pydantics_public_api() -> None:
    """Pydantic's slots are written in ``_fast_records.py`` only."""
    private = re.compile(r"__pydantic_(fields_set|private)__|BaseModel\.__dict__\[")
    found = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "src" / "tooldeck").rglob("*.py"))
        if private.search(path.read_text(encoding="utf-8"))
    ]
    assert found == ["src/tooldeck/_fast_records.py"]
