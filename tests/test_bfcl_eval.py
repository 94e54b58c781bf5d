"""The BFCL evaluation harness (bench/bfcl_eval.py) without a model: ScriptedModel turns."""

from __future__ import annotations

from typing import Any

from bfcl_cases import bench_module, records
from tooldeck import AssistantOutput, ScriptedModel, ToolCall

evaluation = bench_module("bfcl_eval")


def case(case_id: str) -> dict[str, Any]:
    found = [r for r in records() + records("bfcl_irrelevance.jsonl") if r["id"] == case_id]
    return found[0]


def first_turn(*calls: ToolCall, text: str = "") -> ScriptedModel:
    return ScriptedModel([AssistantOutput(content=text, tool_calls=calls)])


async def test_a_right_call_with_strict_nulls_scores_correct() -> None:
    # simple_python_0: calculate_triangle_area(base=10, height=5, unit optional)
    call = ToolCall(
        id="1", name="calculate_triangle_area", arguments={"base": 10, "height": 5, "unit": None}
    )
    model = first_turn(call)
    result = await evaluation.run_tooldeck(model, case("simple_python_0"), None)
    assert (result.correct, result.calls, result.valid_calls) == (True, 1, 1)
    assert model.requests[0].tool_names == ["calculate_triangle_area"]
    assert model.requests[0].tools[0].strict


async def test_dotted_names_are_scored_under_the_bfcl_name() -> None:
    call = ToolCall(id="1", name="math_factorial", arguments={"number": 5})
    result = await evaluation.run_tooldeck(first_turn(call), case("simple_python_1"), None)
    assert result.correct
    assert result.made == [{"name": "math_factorial", "arguments": {"number": 5}}]


async def test_a_schema_invalid_call_is_counted_and_wrong() -> None:
    call = ToolCall(id="1", name="math_factorial", arguments={"number": "5"})
    result = await evaluation.run_tooldeck(first_turn(call), case("simple_python_1"), None)
    assert (result.correct, result.calls, result.valid_calls) == (False, 1, 0)
    assert "'number': type str, expected integer" in result.reason


async def test_unparsed_arguments_are_wrong() -> None:
    call = ToolCall.from_json("1", "math_factorial", '{"number": 5')
    result = await evaluation.run_tooldeck(first_turn(call), case("simple_python_1"), None)
    assert (result.correct, result.strictly_correct, result.valid_calls, result.reason) == (
        False,
        False,
        0,
        "arguments did not parse",
    )


async def test_by_bfcls_rule_a_turn_whose_call_does_not_parse_made_no_call() -> None:
    # irrelevance_0 expects no call: BFCL cannot decode the turn, so it counts as no call;
    # the stricter figure counts the attempt.
    call = ToolCall.from_json("1", "calculate_triangle_area", '{"base": 10, "hei')
    result = await evaluation.run_tooldeck(first_turn(call), case("irrelevance_0"), None)
    assert (result.correct, result.strictly_correct, result.calls) == (True, False, 1)
    assert result.reason == "arguments did not parse"
    whole = ToolCall(id="1", name="calculate_triangle_area", arguments={"base": 10, "height": 5})
    result = await evaluation.run_tooldeck(first_turn(whole), case("irrelevance_0"), None)
    assert (result.correct, result.strictly_correct) == (False, False)


async def test_an_answer_is_right_for_irrelevance_and_wrong_for_simple() -> None:
    model = first_turn(text="I cannot do that with these tools.")
    result = await evaluation.run_tooldeck(model, case("irrelevance_0"), None)
    assert (result.correct, result.calls, result.text) == (
        True,
        0,
        "I cannot do that with these tools.",
    )
    result = await evaluation.run_tooldeck(first_turn(text="120"), case("simple_python_1"), None)
    assert result.reason == "wrong number of calls: 0, expected 1"


async def test_a_chat_case_sends_its_history_and_system_text() -> None:
    model = first_turn(text="Hello Sara.")
    await evaluation.run_tooldeck(model, case("live_irrelevance_125-11-0"), None)
    request = model.requests[0]
    assert request.instructions.startswith("Don't make assumptions")
    assert [m.role for m in request.messages] == ["user", "assistant", "user"]


async def test_parallel_categories_ask_for_parallel_calls() -> None:
    model = first_turn(text="...")
    await evaluation.run_tooldeck(model, case("parallel_0"), 64)
    settings = model.requests[0].settings
    assert (settings.parallel_tool_calls, settings.max_tokens, settings.temperature) == (
        True,
        64,
        0.0,
    )


def test_the_summary_table() -> None:
    results = [
        evaluation.CaseResult("a", "irrelevance", "tooldeck", True, "", 1, 0, 2.0, strict=False),
        evaluation.CaseResult("b", "irrelevance", "tooldeck", True, "", 0, 0, 4.0),
        evaluation.CaseResult("c", "irrelevance", "tooldeck", False, "x", 2, 2, 6.0),
    ]
    (row,) = evaluation.summarize(results)
    assert (row["accuracy"], row["strict_accuracy"], row["calls"], row["schema_valid"]) == (
        2 / 3,
        1 / 3,
        3,
        2 / 3,
    )
    assert "| tooldeck | irrelevance | 3 | 66.7% | 33.3% | 3 | 66.7% | 4.00, 4.00 |" in (
        evaluation.markdown([row])
    )


def test_parallel_modes_of_the_harness() -> None:
    modes = evaluation.PARALLEL_MODES
    assert [evaluation.parallel_setting(m, "parallel_multiple") for m in modes] == [
        True,
        None,
        True,
        False,
    ]
    assert evaluation.parallel_setting("category", "simple_python") is None
