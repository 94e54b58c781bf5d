"""BFCL cases through tooldeck.eval, without a model: ScriptedModel turns, scored by BFCL's rules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tooldeck import AssistantOutput, ScriptedModel, ToolCall
from tooldeck.eval import CaseResult, EvalReport, EvalSettings, bfcl_suite, load_suite, run_eval
from tooldeck.eval.bfcl import categories


def first_turn(*calls: ToolCall, text: str = "") -> ScriptedModel:
    return ScriptedModel([AssistantOutput(content=text, tool_calls=calls)])


async def run_one(
    model: ScriptedModel, case_id: str, settings: EvalSettings | None = None
) -> CaseResult:
    category = case_id.rsplit("_", 1)[0]
    (case,) = bfcl_suite(category, ids=[case_id])
    report = await run_eval([case], {"scripted": model}, settings)
    (result,) = report.results
    return result


async def test_a_right_call_with_strict_nulls_scores_correct() -> None:
    # simple_python_0: calculate_triangle_area(base=10, height=5, unit optional)
    call = ToolCall(
        id="1", name="calculate_triangle_area", arguments={"base": 10, "height": 5, "unit": None}
    )
    model = first_turn(call)
    result = await run_one(model, "simple_python_0")
    assert (result.correct, result.calls, result.valid_calls) == (True, 1, 1)
    assert (result.expected_call, result.made_call, result.decision_correct) == (True, True, True)
    assert model.requests[0].tool_names == ["calculate_triangle_area"]
    assert model.requests[0].tools[0].strict


async def test_dotted_names_are_scored_under_the_bfcl_name() -> None:
    call = ToolCall(id="1", name="math_factorial", arguments={"number": 5})
    result = await run_one(first_turn(call), "simple_python_1")
    assert result.correct
    assert result.made == [{"name": "math_factorial", "arguments": {"number": 5}}]
    assert result.expected == [{"math.factorial": {"number": [5]}}]


async def test_a_schema_invalid_call_is_counted_and_wrong() -> None:
    call = ToolCall(id="1", name="math_factorial", arguments={"number": "5"})
    result = await run_one(first_turn(call), "simple_python_1")
    assert (result.correct, result.calls, result.valid_calls) == (False, 1, 0)
    assert "'number': type str, expected integer" in result.reason


async def test_unparsed_arguments_are_wrong() -> None:
    call = ToolCall.from_json("1", "math_factorial", '{"number": 5')
    result = await run_one(first_turn(call), "simple_python_1")
    assert (result.correct, result.strictly_correct, result.valid_calls, result.reason) == (
        False,
        False,
        0,
        "arguments did not parse",
    )
    assert result.made == [{"name": "math_factorial", "arguments": '{"number": 5'}]


async def test_by_bfcls_rule_a_turn_whose_call_does_not_parse_made_no_call() -> None:
    # irrelevance_0 expects no call: BFCL cannot decode the turn, so it counts as no call;
    # the stricter figure counts the attempt.
    call = ToolCall.from_json("1", "calculate_triangle_area", '{"base": 10, "hei')
    result = await run_one(first_turn(call), "irrelevance_0")
    assert (result.correct, result.strictly_correct, result.calls) == (True, False, 1)
    assert result.reason == "arguments did not parse"
    whole = ToolCall(id="1", name="calculate_triangle_area", arguments={"base": 10, "height": 5})
    result = await run_one(first_turn(whole), "irrelevance_0")
    assert (result.correct, result.strictly_correct, result.decision_correct) == (
        False,
        False,
        False,
    )
    assert result.reason == "made 1 call"


async def test_an_answer_is_right_for_irrelevance_and_wrong_for_simple() -> None:
    model = first_turn(text="I cannot do that with these tools.")
    result = await run_one(model, "irrelevance_0")
    assert (result.correct, result.calls, result.text, result.decision_correct) == (
        True,
        0,
        "I cannot do that with these tools.",
        True,
    )
    result = await run_one(first_turn(text="120"), "simple_python_1")
    assert result.reason == "wrong number of calls: 0, expected 1"
    assert (result.expected_call, result.made_call) == (True, False)


async def test_a_chat_case_sends_its_history_and_system_text() -> None:
    model = first_turn(text="Hello Sara.")
    (case,) = load_suite("bfcl:live_irrelevance", ids=["live_irrelevance_125-11-0"])
    await run_eval([case], {"scripted": model})
    request = model.requests[0]
    assert request.instructions.startswith("Don't make assumptions")
    assert [m.role for m in request.messages] == ["user", "assistant", "user"]


async def test_parallel_categories_ask_for_parallel_calls_in_any_order() -> None:
    model = first_turn(text="...")
    await run_one(model, "parallel_0", EvalSettings(max_tokens=64))
    settings = model.requests[0].settings
    assert (settings.parallel_tool_calls, settings.max_tokens, settings.temperature) == (
        True,
        64,
        0.0,
    )
    (case,) = bfcl_suite("parallel", ids=["parallel_0"])
    calls = [
        ToolCall(id=str(n), name="spotify_play", arguments=arguments)
        for n, arguments in enumerate(
            [{"artist": "Maroon 5", "duration": 15}, {"artist": "Taylor Swift", "duration": 20}]
        )
    ]
    result = await run_one(first_turn(*calls), "parallel_0")
    assert result.correct, (result.reason, case.expect)


async def test_parallel_modes_of_the_settings() -> None:
    (case,) = bfcl_suite("parallel_multiple", limit=1)
    (simple,) = bfcl_suite("simple_python", limit=1)
    modes = ("case", "model", "on", "off")
    assert [EvalSettings(parallel=m).parallel_for(case) for m in modes] == [True, None, True, False]
    assert EvalSettings().parallel_for(simple) is None


def test_the_summary_and_its_markdown_table() -> None:
    def result(
        case_id: str,
        correct: bool,
        calls: int,
        valid: int,
        seconds: float,
        strict: bool | None = None,
    ) -> CaseResult:
        return CaseResult(
            "m",
            "bfcl:irrelevance",
            case_id,
            "irrelevance",
            correct,
            "",
            False,
            calls > 0,
            calls,
            valid,
            seconds,
            strict=strict,
        )

    report = EvalReport(
        (
            result("a", True, 1, 0, 2.0, strict=False),
            result("b", True, 0, 0, 4.0),
            result("c", False, 2, 2, 6.0),
        )
    )
    (row,) = report.summary()
    assert (row.accuracy, row.strict_accuracy, row.calls, row.schema_valid) == (
        2 / 3,
        1 / 3,
        3,
        2 / 3,
    )
    assert row.decision_accuracy == 1 / 3
    assert (
        "| m | irrelevance | 3 | 66.7% | 33.3% | 33.3% | 3 | 66.7% | 4.00, 4.00 |"
        in report.markdown()
    )
    (confusion,) = report.confusion()
    assert (confusion.called_when_not, confusion.answered_when_not) == (2, 1)


def test_every_category_of_the_data_is_a_suite() -> None:
    assert set(categories()) >= {
        "simple_python",
        "multiple",
        "parallel",
        "parallel_multiple",
        "irrelevance",
        "live_simple",
        "live_irrelevance",
        "live_relevance",
    }
    assert len(load_suite("bfcl:simple_python")) == 400
    assert [c.id for c in load_suite("bfcl:multiple", start=5, limit=2)] == [
        "multiple_5",
        "multiple_6",
    ]
    relevance = load_suite("bfcl:live_relevance", limit=1)[0]
    assert relevance.expects_call is True


@pytest.mark.parametrize(
    ("statement", "unwanted"),
    [
        ("import tooldeck", ("tooldeck.eval", "matplotlib", "yaml", "genai_prices", "playwright")),
        ("import tooldeck.eval", ("matplotlib", "yaml", "genai_prices", "rich")),
    ],
)
def test_importing_loads_no_plotting_yaml_or_prices(
    statement: str, unwanted: tuple[str, ...]
) -> None:
    code = f"import sys; {statement}; print(sorted(m for m in sys.modules if m.startswith({unwanted!r})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
