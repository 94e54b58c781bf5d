"""``tasks:chained`` and code mode in ``tooldeck eval``: the suite, each case scored through
the provider simulator with plain calls and in code mode (a right program, a wrong answer, a
program that fails and is fixed), the report's requests, tool calls and tokens per mode, the
command end to end, and the options it refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from test_eval_cli import tooldeck
from tooldeck.eval import CaseResult, Contestant, EvalCase, EvalSettings, load_suite, run_case
from tooldeck.eval.chained import REFERENCE, TASKS, number
from tooldeck.eval.report import EvalReport
from tooldeck.testing import ProviderSimulator, call, reply
from tooldeck.testing.request import SimRequest
from tooldeck.testing.steps import Reply, StepLike

BENCH = Path(__file__).resolve().parents[1] / "bench" / "code_mode_calls.py"


def quoting(request: SimRequest) -> Reply:
    """A model's answer quoting the last tool result it read."""
    return reply(f"I read: {request.trailing_results[-1].text}")


async def scored(case: EvalCase, steps: Sequence[StepLike]) -> tuple[CaseResult, list[str]]:
    """The case on a simulated model answering with ``steps``; the result and the tool
    results the model read by its last request."""
    with ProviderSimulator(list(steps)) as simulator:
        model = simulator.model()
        try:
            result = await run_case(Contestant(model, "sim", priced=False), case, EvalSettings())
        finally:
            await model.aclose()
    last = simulator.requests[-1]["messages"]
    return result, [message["content"] for message in last if message["role"] == "tool"]


def case(mode: str, task: str) -> EvalCase:
    (found,) = load_suite("tasks:chained", ids=[task], tools=mode)
    return found


# -- the suite ------------------------------------------------------------------------------


def test_the_suite_asks_twenty_tasks_with_plain_calls_and_in_code_mode() -> None:
    cases = load_suite("tasks:chained")
    assert len(TASKS) == 20
    assert len(cases) == 40
    assert [c.id for c in cases[:3]] == [
        "own/cart_total_c1",
        "code/cart_total_c1",
        "own/cart_total_c2",
    ]
    assert {(c.category, c.code_mode) for c in cases} == {
        ("own/chained", False),
        ("code/chained", True),
    }
    assert all(c.suite == "tasks:chained" and not c.first_turn_only for c in cases)
    assert [t.name for t in case("own", "c1_in_dollars").tools] == [
        "cart",
        "price",
        "exchange_rate",
    ]
    assert [c.id for c in load_suite("tasks:chained", limit=2, tools="code")] == [
        "code/cart_total_c1",
        "code/cart_total_c2",
    ]
    assert [c.id for c in load_suite("tasks:chained", start=19, tools="own")] == ["own/restock_c1"]


@pytest.mark.parametrize(
    ("value", "right", "wrong"),
    [
        (15.0, ["15", "15.0 euros", "costs 15.00.", "€15"], ["115", "15.5", "1.15", "150"]),
        (12.75, ["12.75", "12.750 EUR"], ["12.7", "112.75", "12.751"]),
        (4, ["4 flights", "(4)"], ["14", "4.5", "40"]),
    ],
)
def test_a_number_is_found_in_its_usual_spellings_only(
    value: float, right: list[str], wrong: list[str]
) -> None:
    import re

    assert all(re.search(number(value), text) for text in right), right
    assert not any(re.search(number(value), text) for text in wrong), wrong


def test_every_task_takes_several_calls_and_its_program_and_calls_answer_it() -> None:
    """The mechanics bench scores every task in three scripted modes through the provider
    simulator: each answer right (the suite's answers, tools and programs agree), code mode
    in two requests, the same tool calls in each mode."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)
    assert len(rows) == 60
    by_mode: dict[str, dict[str, Any]] = {}
    for row in rows:
        assert row["correct"], row
        by_mode.setdefault(row["category"], {})[row["id"].split("/")[1]] = row
    one_a_turn, parallel, code = (
        by_mode[m] for m in ("plain, one a turn", "plain, parallel", "code")
    )
    tools = {task.id: len(task.tools) for task in TASKS}
    for task in REFERENCE:
        calls = code[task]["tool_calls"]
        assert calls >= 4, task
        assert code[task]["requests"] == 2
        assert [c["name"] for c in code[task]["made"]] == ["run_code"]
        assert one_a_turn[task]["tool_calls"] == parallel[task]["tool_calls"] == calls
        assert one_a_turn[task]["requests"] == calls + 1
        # with one tool nothing is chained (one turn of calls); else a turn a link
        assert parallel[task]["requests"] == 2 if tools[task] == 1 else 3, task


# -- scored through the provider simulator ----------------------------------------------------


async def test_a_right_program_scores_right_in_two_requests() -> None:
    result, read = await scored(
        case("code", "ada_spent"),
        [call("run_code", {"code": REFERENCE["ada_spent"]}), quoting],
    )
    assert read == ["result: 128.0"]
    assert (result.correct, result.reason, result.error) == (True, "", "")
    assert (result.requests, result.tool_calls, result.calls, result.valid_calls) == (2, 5, 1, 1)
    assert result.text == "I read: result: 128.0"
    assert result.input_tokens
    assert result.output_tokens


async def test_the_same_task_with_plain_calls_counts_each_call_and_turn() -> None:
    orders = [("order", {"order_id": o}) for o in ("o101", "o102", "o103", "o104")]
    result, read = await scored(
        case("own", "ada_spent"),
        [call("orders_of", {"customer": "ada"}), call(*orders), reply("Ada spent 128 euros.")],
    )
    assert read[0] == '["o101","o102","o103","o104"]'
    assert (result.correct, result.requests, result.tool_calls, result.calls) == (True, 3, 5, 5)


async def test_a_wrong_answer_scores_wrong_in_either_mode() -> None:
    no_quantities = 'sum([await price(item=i) for i in await cart(cart_id="C1")])'
    in_code, read = await scored(
        case("code", "cart_total_c1"), [call("run_code", {"code": no_quantities}), quoting]
    )
    assert read == ["result: 7.25"]
    assert not in_code.correct
    assert in_code.reason == f"the answer does not match {number(15.0)!r}"
    assert (in_code.error, in_code.tool_calls) == ("", 6)
    plain, _ = await scored(
        case("own", "cart_total_c1"),
        [call("cart", {"cart_id": "C1"}), reply("The cart costs 7.25 euros.")],
    )
    assert not plain.correct
    assert (plain.error, plain.tool_calls, plain.requests) == ("", 1, 2)


async def test_a_syntax_error_is_an_observation_the_case_survives() -> None:
    result, read = await scored(
        case("code", "eve_items"),
        [
            call("run_code", {"code": "total = = 0"}),
            call("run_code", {"code": "await orders_of(customer='nobody')"}),
            call("run_code", {"code": REFERENCE["eve_items"]}),
            quoting,
        ],
    )
    syntax, failed, right = read
    assert syntax.startswith("error[code_syntax]: ")
    assert "line 1" in syntax
    assert failed.startswith("error[code_error]: ")
    assert "error[tool_error]: no customer 'nobody'" in failed
    assert right == "result: 15"
    assert (result.correct, result.error, result.requests) == (True, "", 4)
    assert result.tool_calls == 1 + 5  # the failed program's call, and the right one's five
    assert [c["name"] for c in result.made] == ["run_code"] * 3
    assert result.valid_calls == 3  # a program that fails is still a schema-valid call


# -- the report -------------------------------------------------------------------------------


def test_the_report_gives_requests_tool_calls_and_tokens_per_case_and_mode() -> None:
    def result(mode: str, correct: bool, requests: int, calls: int, tokens: int) -> CaseResult:
        return CaseResult(
            "m", "tasks:chained", f"{mode}/t{requests}", f"{mode}/chained", correct, "", None,
            True, 1, 1, 1.0, input_tokens=tokens, output_tokens=10, requests=requests,
            tool_calls=calls,
        )  # fmt: skip

    stored_before = CaseResult.from_json(
        {k: v for k, v in result("old", True, 1, 1, 5).to_json().items() if k != "tool_calls"}
    )
    report = EvalReport(
        (
            result("own", True, 11, 10, 2000),
            result("own", False, 3, 6, 600),
            result("code", True, 2, 10, 700),
            stored_before,
        )
    )
    own, code, old, _ = report.summary()
    assert (own.requests, own.tool_calls, own.input_tokens, own.output_tokens) == (14, 16, 2600, 20)
    assert (code.requests, code.tool_calls) == (2, 10)
    assert old.tool_calls is None
    table = report.markdown()
    assert "| requests/case | tool calls/case | tokens in/out per case |" in table
    assert "| m | own/chained | 2 | 50.0% |" in table
    assert "| 7.00 | 8.00 | 1,300 / 10 |" in table
    assert "| 1.00 | – | 5 / 10 |" in table
    assert report.to_json()["summary"][1]["tool_calls"] == 10


# -- the command ------------------------------------------------------------------------------


def simulated(simulator: ProviderSimulator, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The command's options asking ``simulator`` (its key in a variable the command reads)."""
    monkeypatch.setenv("SIMULATOR_KEY", simulator.env["OPENAI_API_KEY"])
    return [
        "--model", "openai-chat:gpt-4.1-mini", "--base-url", simulator.base_url,
        "--api-key-env", "SIMULATOR_KEY",
    ]  # fmt: skip


def test_the_command_compares_the_modes_end_to_end(
    tmp_path: Path, provider: Callable[..., ProviderSimulator], monkeypatch: pytest.MonkeyPatch
) -> None:
    orders = [("order", {"order_id": o}) for o in ("o401", "o402", "o403")]
    stocks = [("stock", {"item": i}) for i in ("apple", "banana", "plum", "peach")]
    only_two = 'sum([await stock(item=i) for i in ["apple", "banana"]])'
    simulator = provider(
        [
            call("orders_of", {"customer": "dave"}), call(*orders), reply("o402, 88.5 euros."),
            call("run_code", {"code": REFERENCE["dave_largest"]}), quoting,
            call(*stocks), reply("213 units."),
            call("run_code", {"code": only_two}), quoting,
        ]
    )  # fmt: skip
    args = ["tasks:chained", "--ids", "dave_largest,stock_units", "--out", "run.jsonl"]
    model = simulated(simulator, monkeypatch)
    done = tooldeck(*args, *model, "--json", "--report", "eval.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert [(c["id"], c["correct"]) for c in report["cases"]] == [
        ("own/dave_largest", True),
        ("code/dave_largest", True),
        ("own/stock_units", True),
        ("code/stock_units", False),
    ]
    rows = {row["category"]: row for row in report["summary"]}
    assert (rows["own/chained"]["requests"], rows["own/chained"]["tool_calls"]) == (5, 8)
    assert (rows["code/chained"]["requests"], rows["code/chained"]["tool_calls"]) == (4, 6)
    assert (rows["own/chained"]["accuracy"], rows["code/chained"]["accuracy"]) == (1.0, 0.5)
    assert report["cases"][3]["text"] == "I read: result: 155"
    page = (tmp_path / "eval.html").read_text("utf-8")
    assert "<th>requests/case</th><th>tool calls/case</th>" in page
    assert '<td class="n">2.50</td><td class="n">4.00</td>' in page  # own: 5 and 8 over 2

    table = tooldeck("--compare", "run.jsonl", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "tool calls/case" in table.stdout
    assert "code/chained" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["bfcl:simple_python", "--tools", "code"],
            "--tools code: bfcl:simple_python's case 'simple_python_0' is scored on its first "
            "turn's calls, and code mode needs a case run to its end",
        ),
        (["tasks:chained", "--tools", "search"], "tasks:chained --tools 'search': a mode is one "
         "of own, code"),
        (["bfcl:many_tools", "--tools", "code"], "a mode is one of search, all, own"),
        (["tasks:endless"], "unknown suite 'tasks:endless'"),
    ],
)  # fmt: skip
def test_the_command_refuses_what_code_mode_cannot_ask(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = tooldeck(*args, "--limit", "1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_code_mode_without_pydantic_monty_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_monty", None)
    with pytest.raises(ImportError, match=r"pip install 'tooldeck\[code\]'"):
        load_suite("tasks:chained")
    assert len(load_suite("tasks:chained", tools="own")) == 20  # plain calls need no extra
