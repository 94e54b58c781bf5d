"""The loop's own records, made without a second validation, are the records validation makes."""

from __future__ import annotations

import pytest

from tooldeck.errors import ErrorCode
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult, Usage
from tooldeck.results import ToolTrace
from tooldeck.run._engine import records

CALL = ToolCall(id="c1", name="add", arguments={"left": 1})
OUTPUTS = [
    AssistantOutput(content="hi"),
    AssistantOutput(tool_calls=(CALL,), usage=Usage(input_tokens=3), provider_items=({"a": 1},)),
]


def same(fast: object, validated: object) -> None:
    assert fast == validated
    assert type(fast) is type(validated)
    assert fast.model_dump_json() == validated.model_dump_json()  # type: ignore[attr-defined]
    assert fast.model_fields_set == validated.model_fields_set  # type: ignore[attr-defined]
    assert repr(fast) == repr(validated)


def test_a_tool_message_is_the_validated_one() -> None:
    same(records.tool_message("c1", "4"), Message.tool("c1", "4"))


@pytest.mark.parametrize("output", OUTPUTS)
def test_an_assistant_message_is_the_validated_one(output: AssistantOutput) -> None:
    same(records.assistant_message(output), Message.assistant(output))


def test_a_success_is_the_validated_one() -> None:
    same(records.succeeded("done"), ToolResult.success("done"))


@pytest.mark.parametrize("error", [None, KeyError("x")])
def test_a_trace_is_the_validated_one(error: BaseException | None) -> None:
    result = ToolResult.failure(ErrorCode.TOOL_ERROR, "boom")
    fast = records.traced(CALL, result, 0.5, error)
    validated = ToolTrace(call=CALL, result=result, duration_s=0.5, error=error)
    same(fast, validated)


def test_every_field_of_each_record_is_set() -> None:
    made = [
        records.tool_message("c1", "4"),
        records.assistant_message(OUTPUTS[1]),
        records.succeeded("x"),
        records.traced(CALL, ToolResult.success("x"), 0.0, None),
    ]
    for record in made:
        assert set(type(record).model_fields) == set(record.__dict__), type(record).__name__


def test_a_copy_of_a_fast_record_can_change() -> None:
    message = records.tool_message("c1", "4")
    changed = message.model_copy(update={"content": "5"})
    assert (changed.content, message.content) == ("5", "4")
    assert "content" in changed.model_fields_set
