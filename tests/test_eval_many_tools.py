"""``bfcl:many_tools`` (issue 37): BFCL's simple_python and multiple questions against one
registry of every BFCL function, shown by search (deferred), all at once, or the case's own.

The wire through the provider simulator (fresh call ids, usage on every response): deferred
tools are absent from the first request, a search reveals the case's tool, the call made
then is scored by BFCL's rules, and the run stops there. The search's recall is checked
against bm25's own ranking of the same tools; the modes and bad options through the API and
the command.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test_eval_cli import tooldeck
from tooldeck import AssistantOutput, ScriptedModel, ToolCall
from tooldeck.eval import EvalCase, EvalReport, bfcl_suite, load_suite, run_eval
from tooldeck.eval.bfcl import many
from tooldeck.eval.bfcl.many import check_context, registry, search_recall
from tooldeck.search._rank import ranker
from tooldeck.testing import ProviderSimulator
from tooldeck.testing import call as sim_call

DATA = Path(__file__).resolve().parents[1] / "src/tooldeck/eval/bfcl/data"
Provider = Callable[..., ProviderSimulator]


def names(request: dict[str, Any]) -> list[str]:
    return [item["function"]["name"] for item in request.get("tools", [])]


def one(tools: str, case_id: str) -> EvalCase:
    (case,) = load_suite("bfcl:many_tools", ids=[case_id], tools=tools)
    return case


# -- the registry and the suite ------------------------------------------------------------


def test_the_suite_loads_with_the_registry_size_it_says() -> None:
    tool_names = {
        re.sub(r"[^a-zA-Z0-9_-]", "_", function["name"])
        for file in ("bfcl_tools.jsonl", "bfcl_irrelevance.jsonl")
        for line in (DATA / file).read_text(encoding="utf-8").splitlines()
        for function in json.loads(line)["functions"]
    }
    held = registry()
    assert len(held) == len(tool_names) > 1000
    assert f"{len(held):,}" in (many.__doc__ or "")  # the count the docs give
    assert f"{held.definitions:,} definitions" in (many.__doc__ or "")
    cases = load_suite("bfcl:many_tools", limit=2)
    assert [c.id for c in cases] == [
        "search/simple_python_0",
        "search/simple_python_1",
        "search/multiple_0",
        "search/multiple_1",
    ]
    assert {c.category for c in cases} == {"search/simple_python", "search/multiple"}
    for case in cases:
        assert case.suite == "bfcl:many_tools"
        assert case.tool_search
        assert len(case.tools) == len(held)
        assert all(entry.options.defer_loading for entry in case.tools)


def test_a_case_sees_its_own_definition_of_its_function() -> None:
    # simple_python_11 defines calculate_triangle_area otherwise than simple_python_0, the
    # registry's: the case is asked (and scored) with its own.
    (own,) = bfcl_suite("simple_python", ids=["simple_python_11"])
    case = one("search", "simple_python_11")
    shown = next(e for e in case.tools if e.name == "calculate_triangle_area")
    kept = next(e for e in registry().entries if e.name == "calculate_triangle_area")
    assert shown.spec == own.tools[0].spec != kept.spec
    assert one("search", "simple_python_0").tools is registry().deferred  # shared, not copied


# -- the wire: search, reveal, the scored call ----------------------------------------------


async def search_then_call(provider: Provider, height: int) -> tuple[ProviderSimulator, EvalReport]:
    """simple_python_0 (a triangle of base 10, height 5) on the simulator: a search, then a
    call of the tool it revealed. Strict: a third request (the run going on after the scored
    call) fails the test."""
    sim = provider(
        [
            sim_call("search_tools", {"query": "area of a triangle: base, height", "limit": 10}),
            sim_call("calculate_triangle_area", {"base": 10, "height": height, "unit": None}),
        ]
    )
    return sim, await run_eval([one("search", "simple_python_0")], {"sim": sim.model()})


async def test_deferred_tools_are_absent_until_a_search_reveals_the_scored_call(
    provider: Provider,
) -> None:
    sim, report = await search_then_call(provider, height=5)
    (result,) = report.results
    first, second = sim.requests
    assert names(first) == ["search_tools"]  # none of the 1,842 deferred tools
    assert "calculate_triangle_area" in names(second)
    assert names(second)[0] == "search_tools"
    assert len(names(second)) <= 11
    assert (result.correct, result.reason, result.calls, result.valid_calls) == (True, "", 1, 1)
    assert result.made == [
        {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5, "unit": None}}
    ]
    assert result.requests == 2
    assert result.input_tokens
    (row,) = report.summary()
    assert row.requests == 2
    assert row.tokens_per_request == result.input_tokens / 2
    assert f"| {row.tokens_per_request:,.0f} |" in report.markdown()


async def test_a_wrong_call_after_a_search_is_scored_wrong_by_bfcls_rules(
    provider: Provider,
) -> None:
    _, report = await search_then_call(provider, height=6)
    (result,) = report.results
    assert (result.correct, result.calls, result.valid_calls) == (False, 1, 1)
    assert "height" in result.reason


async def test_a_turn_without_a_search_or_a_call_is_the_scored_one() -> None:
    model = ScriptedModel([AssistantOutput(content="The area is 25.")])
    (result,) = (await run_eval([one("search", "simple_python_0")], {"m": model})).results
    assert (result.correct, result.made_call, result.requests) == (False, False, 1)
    assert model.requests[0].tool_names == ["search_tools"]


async def test_a_call_of_a_tool_no_search_revealed_is_wrong_even_with_right_arguments() -> None:
    arguments = {"base": 10, "height": 5, "unit": None}
    guessed = ToolCall(id="1", name="calculate_triangle_area", arguments=arguments)
    model = ScriptedModel(
        [AssistantOutput(tool_calls=(guessed,)), AssistantOutput(content="I could not.")]
    )
    (result,) = (await run_eval([one("search", "simple_python_0")], {"m": model})).results
    assert not result.correct
    assert result.reason == (
        "called 'calculate_triangle_area' before a search revealed it (unknown_tool)"
    )
    assert result.made == [{"name": "calculate_triangle_area", "arguments": arguments}]


# -- the modes ------------------------------------------------------------------------------


async def test_own_shows_the_cases_tools_and_all_shows_every_tool() -> None:
    arguments = {"base": 10, "height": 5, "unit": None}
    right = ToolCall(id="1", name="calculate_triangle_area", arguments=arguments)
    shown = {}
    for mode in ("own", "all"):
        model = ScriptedModel([AssistantOutput(tool_calls=(right,))])
        case = one(mode, "simple_python_0")
        assert case.category == f"{mode}/simple_python"
        assert not case.tool_search
        (result,) = (await run_eval([case], {"m": model})).results
        assert (result.correct, result.requests) == (True, 1)
        shown[mode] = model.requests[0].tool_names
    assert shown["own"] == ["calculate_triangle_area"]
    assert len(shown["all"]) == len(registry())
    assert "calculate_triangle_area" in shown["all"]


def test_several_modes_at_once_each_case_once_per_mode() -> None:
    cases = load_suite("bfcl:many_tools", limit=1, tools="search,own,all")
    assert [c.id for c in cases] == [
        f"{mode}/{category}_0"
        for mode in ("search", "own", "all")
        for category in ("simple_python", "multiple")
    ]


async def test_all_is_refused_where_the_models_context_cannot_hold_it(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from tooldeck.models.local import LocalModel

    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"")  # never loaded: the refusal comes first
    local = LocalModel(weights, n_ctx=8192)
    every = load_suite("bfcl:many_tools", limit=1, tools="all")
    with pytest.raises(ValueError, match=r"shows 1,842 tools, about [\d,]+ tokens a request; .*"
                       r"has a context of 8,192 tokens \(n_ctx\)"):  # fmt: skip
        await run_eval(every, local)
    check_context(load_suite("bfcl:many_tools", limit=1, tools="search,own"), [local])


# -- the search on its own --------------------------------------------------------------------


async def test_recall_is_what_bm25_ranks_for_each_question() -> None:
    cases = load_suite("bfcl:many_tools", limit=4) + load_suite(
        "bfcl:many_tools", ids=["simple_python_11"]
    )  # one case with a registry of its own
    recall = await search_recall(cases)
    expected = []
    for case in cases:
        ranking = ranker("bm25", case.tools)
        found = [case.tools[i].name for i in await ranking.rank(case.messages[-1].content, 5)]
        (call,) = case.expected_calls()
        (name,) = call
        tool = name.replace(".", "_")
        expected.append((case.id, case.category, found.index(tool) + 1 if tool in found else None))
    assert list(recall.ranks) == expected
    rows = {row["category"]: row for row in recall.rows()}
    ranks = [rank for _, _, rank in expected]
    assert rows["all"]["recall@5"] == sum(r is not None for r in ranks) / len(ranks)
    assert rows["all"]["recall@1"] == ranks.count(1) / len(ranks)
    assert recall.registry == len(registry())
    assert "| all | 9 |" in recall.markdown()


# -- bad options ------------------------------------------------------------------------------


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="a mode is one of search, all, own"):
        load_suite("bfcl:many_tools", tools="every")
    with pytest.raises(ValueError, match="bfcl:simple_python --tools 'search': a mode is one of "):
        load_suite("bfcl:simple_python", tools="search")  # the registry's modes are its own


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bfcl:many_tools", "--tools", "every"], "a mode is one of search, all, own"),
        (["bfcl:simple_python", "--tools", "all"], "a mode is one of own, code"),
        (["bfcl:simple_python", "--recall"], "--recall measures the search of bfcl:many_tools"),
    ],
)
def test_the_command_refuses_bad_options_as_usage_errors(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = tooldeck(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_the_command_refuses_all_for_the_context_before_it_makes_the_result_file(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.jsonl"
    args = ["bfcl:many_tools", "--tools", "own,all", "--limit", "1", "--out", str(out)]
    done = tooldeck(*args, cwd=tmp_path)  # the default model: the embedded one, n_ctx 8,192
    assert done.returncode == 2, done.stderr
    assert "shows 1,842 tools" in done.stderr
    assert "has a context of 8,192 tokens (n_ctx)" in done.stderr
    assert "results go to" not in done.stderr
    assert not out.exists()


def test_the_command_reports_recall_without_a_model(tmp_path: Path) -> None:
    done = tooldeck("bfcl:many_tools", "--recall", "--limit", "2", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["registry"], report["depth"]) == (len(registry()), 5)
    assert [row["category"] for row in report["summary"]] == [
        "search/simple_python",
        "search/multiple",
        "all",
    ]
    assert next(case["id"] for case in report["cases"]) == "search/simple_python_0"
