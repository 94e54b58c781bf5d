"""The frozen data contract: invariants, constructors and what they refuse."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tooldeck import (
    Agent,
    AssistantOutput,
    Message,
    RunResult,
    ScriptedModel,
    ToolCall,
    ToolResult,
    tool,
)
from tooldeck.messages import Usage
from tooldeck.results import RecordedError


def test_tool_result_success_has_no_error_code() -> None:
    result = ToolResult.success("5")
    assert (result.ok, result.output, result.error_code) == (True, "5", None)


def test_tool_result_failure_text_starts_with_its_code() -> None:
    result = ToolResult.failure("tool_error", "it broke")
    assert result.ok is False
    assert result.error_code == "tool_error"
    assert result.output == "error[tool_error]: it broke"


def test_tool_result_rejects_ok_with_error_code() -> None:
    with pytest.raises(ValidationError, match="a successful result has no error_code"):
        ToolResult(ok=True, output="x", error_code="tool_error")


def test_tool_result_rejects_failure_without_code() -> None:
    with pytest.raises(ValidationError, match="a failed result needs an error_code"):
        ToolResult(ok=False, output="x")


def test_failure_constructor_refuses_empty_code() -> None:
    with pytest.raises(ValueError, match="needs an error_code"):
        ToolResult.failure("", "x")


def test_contract_models_are_frozen() -> None:
    call = ToolCall(id="c1", name="add", arguments={"a": 1})
    with pytest.raises(ValidationError, match="frozen"):
        call.name = "other"  # type: ignore[misc]


def test_tool_call_from_json_parses_an_object() -> None:
    call = ToolCall.from_json("c1", "add", '{"left": 2, "right": 3}')
    assert call.arguments == {"left": 2, "right": 3}
    assert call.raw_arguments is None


@pytest.mark.parametrize("text", ['{"left": 2,', "[1, 2]", '"just text"', "null"])
def test_tool_call_from_json_keeps_text_that_is_not_an_object(text: str) -> None:
    call = ToolCall.from_json("c1", "add", text)
    assert call.arguments == {}
    assert call.raw_arguments == text
    assert call.arguments_json == text


@pytest.mark.parametrize("text", [None, "", "   "])
def test_tool_call_from_json_reads_empty_text_as_no_arguments(text: str | None) -> None:
    call = ToolCall.from_json("c1", "ping", text)
    assert (call.arguments, call.raw_arguments) == ({}, None)


def test_usage_adds_up() -> None:
    total = Usage(input_tokens=10, output_tokens=2, requests=1) + Usage(
        input_tokens=5, output_tokens=3, requests=1
    )
    assert (total.input_tokens, total.output_tokens, total.requests) == (15, 5, 2)
    assert total.total_tokens == 20


def test_an_assistant_message_keeps_all_the_model_returned_through_json() -> None:
    calls = (
        ToolCall(id="a", name="x", arguments={"n": [1, {"deep": None}]}),
        ToolCall.from_json("b", "y", '{"broken": '),
    )
    items = ({"type": "reasoning", "id": "rs_1", "summary": []},)
    output = AssistantOutput(content="Let me check.", tool_calls=calls, provider_items=items)
    message = Message.assistant(output)
    assert (message.content, message.tool_calls, message.provider_items) == (
        "Let me check.",
        calls,
        items,
    )
    assert Message.model_validate_json(message.model_dump_json()) == message


def test_message_role_is_checked() -> None:
    with pytest.raises(ValidationError, match="role"):
        Message(role="system", content="x")  # type: ignore[arg-type]


def test_a_run_result_with_a_tool_error_saves_and_loads_back() -> None:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        raise KeyError(key)

    call = ToolCall(id="c1", name="lookup", arguments={"key": "k"})
    model = ScriptedModel(
        [AssistantOutput(tool_calls=(call,)), AssistantOutput(content="not found")]
    )
    result = Agent(model, [lookup]).run_sync("find k")
    assert isinstance(result.tool_trace[0].error, KeyError)

    loaded = RunResult.model_validate_json(result.model_dump_json())
    error = loaded.tool_trace[0].error
    assert isinstance(error, RecordedError)
    assert (error.type_name, str(error)) == ("KeyError", "'k'")
    assert loaded.model_dump(exclude={"tool_trace"}) == result.model_dump(exclude={"tool_trace"})
    assert loaded.tool_trace[0].result == result.tool_trace[0].result
    assert loaded.model_dump_json() == result.model_dump_json()
