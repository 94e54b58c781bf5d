"""A user's own case files (YAML, JSON lines): loaded, run on scripted turns, and refused with the
line and the field when they have a mistake."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from tooldeck import AssistantOutput, ScriptedModel, ToolCall
from tooldeck.eval import (
    CaseFileError,
    CaseResult,
    EvalCase,
    ExpectAnswer,
    ExpectCalls,
    ExpectDecision,
    ExpectOutput,
    load_case_file,
    run_eval,
)


class City(BaseModel):
    name: str
    country: str


CASES = textwrap.dedent(
    """\
    - id: sum
      prompt: What is 17 plus 25?
      tools: tooldeck.cli.demo
      expect:
        calls:
          - add_numbers: {left: [17], right: [25]}
    - id: weather
      category: weather
      prompt: What's the weather like in Tokyo?
      tools: tooldeck.cli.demo
      expect:
        calls:
          - get_weather: {city: [Tokyo], unit: [celsius, ""]}
    - id: hello
      messages:
        - {role: system, content: Be brief.}
        - {role: user, content: Hi}
        - {role: assistant, content: Hello!}
        - {role: user, content: "Who are you?"}
      tools: tooldeck.cli.demo
      expect: no call
    - id: oslo
      category: weather
      prompt: What's the weather like in Oslo?
      tools: tooldeck.cli.demo
      expect:
        answer: {contains: "snow showers"}
    - id: convert
      prompt: Convert 20 euros to dollars.
      tools:
        - name: convert_currency
          description: Convert an amount of money between currencies.
          parameters:
            type: object
            properties:
              amount: {type: number}
              from: {type: string}
              to: {type: string}
            required: [amount, from, to]
      expect:
        calls:
          - convert_currency: {amount: [20], from: [EUR], to: [USD]}
    - id: city
      prompt: Name the capital of Japan.
      tools: tooldeck.cli.demo
      expect:
        output: {type: "test_eval_casefile:City", equals: {name: Tokyo, country: Japan}}
    """
)


def write(tmp_path: Path, text: str, name: str = "cases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_yaml_file_gives_every_kind_of_case(tmp_path: Path) -> None:
    cases = load_case_file(write(tmp_path, CASES))
    assert [c.id for c in cases] == ["sum", "weather", "hello", "oslo", "convert", "city"]
    assert [c.category for c in cases] == ["cases", "weather", "cases", "weather", "cases", "cases"]
    sum_case, _, hello, oslo, convert, city = cases
    assert sum_case.expect == ExpectCalls(({"add_numbers": {"left": [17], "right": [25]}},))
    assert [t.name for t in sum_case.tools] == ["add_numbers", "get_weather"]
    assert hello.expect == ExpectDecision(call=False)
    assert hello.instructions == "Be brief."
    assert [m.role for m in hello.messages] == ["user", "assistant", "user"]
    assert oslo.expect == ExpectAnswer(contains="snow showers")
    assert [t.name for t in convert.tools] == ["convert_currency"]
    assert convert.tools[0].spec.strict
    assert city.expect == ExpectOutput(City, {"name": "Tokyo", "country": "Japan"})
    assert sum_case.first_turn_only
    assert not oslo.first_turn_only


def test_a_json_lines_file_is_one_case_a_line(tmp_path: Path) -> None:
    lines = [
        {"prompt": "What is 2 plus 3?", "tools": "tooldeck.cli.demo", "expect": "any call"},
        {"id": "x", "prompt": "Hello", "tools": "tooldeck.cli.demo", "expect": {"no_call": True}},
    ]
    path = write(tmp_path, "\n".join(json.dumps(line) for line in lines) + "\n\n", "mine.jsonl")
    cases = load_case_file(path)
    assert [(c.id, c.category, c.suite) for c in cases] == [
        ("1", "mine", str(path)),
        ("x", "mine", str(path)),
    ]
    assert cases[0].expect == ExpectDecision(call=True)


def test_a_tools_file_is_read_from_the_case_files_folder(tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text(
        textwrap.dedent(
            '''
            from tooldeck import tool

            @tool
            def shout(text: str) -> str:
                """Say it louder."""
                return text.upper()
            '''
        ),
        encoding="utf-8",
    )
    path = write(tmp_path, "- {prompt: hi, tools: my_tools.py, expect: any call}\n")
    (case,) = load_case_file(path)
    assert [t.name for t in case.tools] == ["shout"]


MISTAKES = [
    (  # a typo in a field name
        "- id: a\n  promt: hi\n  tools: tooldeck.cli.demo\n  expect: no call\n",
        2,
        "promt",
        "not a field here",
    ),
    ("- id: a\n  prompt: hi\n  expect: no call\n", 1, "tools", "missing (required)"),
    (
        "- id: a\n  prompt: hi\n  tools: tooldeck.cli.demo\n  expect:\n    no_call: true\n"
        "    any_call: true\n",
        4,
        "expect",
        "give exactly one of calls, no_call, any_call, answer, output (got no_call, any_call)",
    ),
    (
        "- id: a\n  prompt: hi\n  tools: tooldeck.cli.demo\n  expect:\n    calls:\n"
        "      - add_numbers: {left: [1]}\n      - multiply: {a: [2]}\n",
        7,
        "expect.calls[1]",
        "no tool 'multiply' among the case's tools (add_numbers, get_weather)",
    ),
    (
        "- prompt: hi\n  tools: tooldeck.cli.demo\n  expect:\n    calls:\n"
        "      - add_numbers: {left: [1], middle: [2]}\n",
        5,
        "expect.calls[0]",
        "'add_numbers' has no parameter 'middle' (it has: left, right)",
    ),
    (
        "- prompt: hi\n  tools: no_such_module_here\n  expect: no call\n",
        2,
        "tools",
        "cannot import 'no_such_module_here'",
    ),
    (
        "- prompt: hi\n  tools: tooldeck.cli.demo\n  expect: no call\n"
        "- prompt: again\n  tools: tooldeck.cli.demo\n  expect: maybe\n",
        6,
        "expect",
        "Input should be a valid dictionary",
    ),
    (
        "- messages: [{role: user, content: hi}, {role: assistant, content: sure}]\n"
        "  tools: tooldeck.cli.demo\n  expect: no call\n",
        1,
        "",
        "messages must end with the user's message",
    ),
    (
        "- {id: a, prompt: hi, tools: tooldeck.cli.demo, expect: no call}\n"
        "- {id: a, prompt: ho, tools: tooldeck.cli.demo, expect: no call}\n",
        2,
        "id",
        "'a' is already the id of case 1",
    ),
    (
        "- prompt: hi\n  tools: tooldeck.cli.demo\n  expect:\n    output: {type: 'tooldeck.cli.demo:DEMO_PROMPTS'}\n",
        4,
        "expect.output.type",
        "is not a type",
    ),
    (
        "- prompt: hi\n  tools:\n    - {description: no name}\n  expect: no call\n",
        3,
        "tools[0]",
        "the name is missing",
    ),
    ("- prompt: hi\n  tools: [oops\n", 3, "", "not YAML"),
    ("prompt: hi\n", 1, "", "a YAML case file is a list of cases"),
]


@pytest.mark.parametrize(("text", "line", "field", "problem"), MISTAKES)
def test_a_case_file_with_a_mistake_is_refused_with_its_line_and_field(
    tmp_path: Path, text: str, line: int, field: str, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CaseFileError) as raised:
        load_case_file(path)
    error = raised.value
    assert (error.line, error.field) == (line, field), str(error)
    assert problem in error.problem
    assert str(error).startswith(f"{path}, line {line}")


def test_json_lines_mistakes_name_their_line(tmp_path: Path) -> None:
    good = json.dumps({"prompt": "hi", "tools": "tooldeck.cli.demo", "expect": "no call"})
    path = write(tmp_path, f"{good}\n{{not json\n", "bad.jsonl")
    with pytest.raises(CaseFileError, match=r"bad.jsonl, line 2: not JSON"):
        load_case_file(path)
    path = write(
        tmp_path, f"{good}\n\n" + json.dumps({"prompt": "hi", "expect": "no call"}), "m.jsonl"
    )
    with pytest.raises(
        CaseFileError, match=r"m.jsonl, line 3, field 'tools': missing \(required\)"
    ):
        load_case_file(path)
    with pytest.raises(CaseFileError, match="holds no case"):
        load_case_file(write(tmp_path, "\n", "empty.jsonl"))
    with pytest.raises(CaseFileError, match=r"ends in .jsonl, .yaml or .yml"):
        load_case_file(write(tmp_path, "[]", "cases.json"))


def call(tool_name: str, **arguments: object) -> AssistantOutput:
    return AssistantOutput(
        tool_calls=(ToolCall(id=tool_name, name=tool_name, arguments=arguments),)
    )


async def test_case_file_cases_run_and_are_scored(tmp_path: Path) -> None:
    cases = load_case_file(write(tmp_path, CASES))
    model = ScriptedModel(
        [
            call("add_numbers", left=17, right=25),  # sum: right
            call("get_weather", city="Tokyo", unit=None),  # weather: right (unit left out)
            call("add_numbers", left=1, right=2),  # hello: a call where none is expected
            call("get_weather", city="Oslo", unit="celsius"),  # oslo: the tool really runs
            AssistantOutput(content="In Oslo: 4 °C with snow showers."),
            call("convert_currency", amount=20, to="USD", **{"from": "EUR"}),  # convert: right
            call("final_answer", name="Tokyo", country="Japan"),  # city: a typed answer
        ]
    )
    report = await run_eval(cases, {"scripted": model})
    verdicts = {r.id: (r.correct, r.reason) for r in report.results}
    assert verdicts == {
        "sum": (True, ""),
        "weather": (True, ""),
        "hello": (False, "made 1 call"),
        "oslo": (True, ""),
        "convert": (True, ""),
        "city": (True, ""),
    }
    oslo = next(r for r in report.results if r.id == "oslo")
    assert (oslo.calls, oslo.valid_calls, oslo.expected_call) == (1, 1, None)
    assert oslo.text == "In Oslo: 4 °C with snow showers."


async def test_an_answer_or_output_that_misses_is_wrong_with_the_reason(tmp_path: Path) -> None:
    cases = load_case_file(write(tmp_path, CASES))
    oslo, city = cases[3], cases[5]
    model = ScriptedModel(
        [AssistantOutput(content="Sunny."), call("final_answer", name="Kyoto", country="Japan")]
    )
    report = await run_eval([oslo, city], {"scripted": model})
    assert [(r.correct, r.reason) for r in report.results] == [
        (False, "the answer does not contain 'snow showers'"),
        (
            False,
            "the answer {'name': 'Kyoto', 'country': 'Japan'} is not "
            "{'name': 'Tokyo', 'country': 'Japan'}",
        ),
    ]


async def test_user_scorers_add_their_columns(tmp_path: Path) -> None:
    (case,) = load_case_file(write(tmp_path, CASES))[:1]

    def short_answer(case: EvalCase, result: CaseResult) -> bool:
        return len(result.text) < 10

    def made_calls(case: EvalCase, result: CaseResult) -> float:
        return result.calls / 2

    model = ScriptedModel([call("add_numbers", left=17, right=25)])
    report = await run_eval([case], {"m": model}, scorers=[short_answer, made_calls])
    assert report.results[0].scores == {"short_answer": 1.0, "made_calls": 0.5}
    assert report.summary()[0].scores == {"short_answer": 1.0, "made_calls": 0.5}


def test_a_tools_module_holding_a_toolset_is_refused_not_dropped(tmp_path: Path) -> None:
    (tmp_path / "served.py").write_text(
        "import sys\n\nfrom tooldeck.tools.mcp import MCPToolset\n\n"
        "server = MCPToolset.stdio(sys.executable, ['server.py'])\n",
        encoding="utf-8",
    )
    path = write(tmp_path, "- {prompt: hi, tools: served.py, expect: any call}\n")
    with pytest.raises(CaseFileError) as refused:
        load_case_file(path)
    assert str(refused.value) == (
        f"{path}, line 1, field 'tools': 'served.py' holds a Toolset (an MCP server's tools): "
        "a case file takes tools defined in Python; name those (module:attr)"
    )
