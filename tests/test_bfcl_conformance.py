"""Real-world conformance: every BFCL tool definition and ground-truth call through tooldeck.

Over all 2,501 records of ``bfcl_tools.jsonl`` (and the 1,140 function lists of
``bfcl_irrelevance.jsonl`` for the schema checks): each function becomes a tool through
``tooldeck.eval.bfcl.dialect.bfcl_tools``; every ground-truth call (each acceptable value
combination, up to ``VARIANT_BOUND`` per call) passes the tool's argument validation; and
for every function, mutated calls (wrong type, missing required, extra argument, value
outside an enum) are refused naming the field, through ``validate`` for all of them and
through the real loop (Agent + ScriptedModel) for a sample.

Ground truth that no schema-valid call can satisfy is data, not a tooldeck failure: each
such record is listed in ``tests/bfcl_known_issues.json`` with the kind of conflict, and
the test fails if the list and the data disagree in either direction.

Run ``python tests/test_bfcl_conformance.py`` for the summary, or with
``--write-known-issues`` to regenerate the list (review the diff).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pytest

from bfcl_cases import DATA, KNOWN_ISSUES, call_variants, mutations, records
from tooldeck import Agent, AssistantOutput, Limits, ScriptedModel, ToolCall
from tooldeck.errors import ArgumentProblem, InvalidArguments
from tooldeck.eval.bfcl.dialect import TOOL_NAME, BfclToolset, bfcl_tools

CATEGORIES = {
    "no_acceptable_value": "a required parameter lists no acceptable value ([])",
    "not_in_schema": "the ground truth passes an argument or field the schema does not have",
    "outside_enum": "an acceptable value is not in the parameter's enum (even after BFCL's "
    "string normalisation)",
    "type_mismatch": "an acceptable value has another JSON type than the schema declares "
    "(BFCL's checker accepts a value of the ground truth's own type)",
    "variable_name": "Java/JavaScript: a string (a variable name or source text) stands for an "
    "array, object or number value (BFCL's checker accepts a value of the ground truth's type)",
    "required_omittable": 'a required non-string parameter is marked omittable ("")',
    "format": "an acceptable value breaks the declared format (date)",
}


@dataclass
class Conformance:
    """What the run over the data found."""

    counts: Counter[str] = field(default_factory=Counter)
    failing: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Record id -> categories and counts of its ground-truth variants that fail."""
    unnamed: list[str] = field(default_factory=list)
    """Mutations refused without naming the field, or accepted."""


def toolset(record: dict[str, Any]) -> BfclToolset:
    return _toolset(record["id"], json.dumps(record["functions"]))


@cache
def _toolset(record_id: str, functions: str) -> BfclToolset:
    return bfcl_tools(json.loads(functions))


@cache
def conformance() -> Conformance:
    report = Conformance()
    for record in records():
        tools = toolset(record)
        _count_tools(report, tools)
        _check_ground_truth(report, record, tools)
        _check_mutations(report, tools)
    for record in records("bfcl_irrelevance.jsonl"):
        tools = toolset(record)
        _count_tools(report, tools, prefix="irrelevance_")
        _check_mutations(report, tools, prefix="irrelevance_")
    return report


def _count_tools(report: Conformance, tools: BfclToolset, prefix: str = "") -> None:
    report.counts[prefix + "records"] += 1
    report.counts[prefix + "functions"] += len(tools.tools)
    report.counts[prefix + "not_strict"] += len(tools.not_strict)


def _check_ground_truth(report: Conformance, record: dict[str, Any], tools: BfclToolset) -> None:
    failing: Counter[str] = Counter()
    passed = failed = 0
    example = ""
    for answer in record["ground_truth"]:
        ((bfcl_name, arguments),) = answer.items()
        tool = tools.tool(bfcl_name)
        variants = call_variants(arguments, tool.arguments.json_schema)
        report.counts["ground_truth_calls"] += 1
        report.counts["variants_possible"] += variants.total
        if not variants.calls:
            failing["no_acceptable_value"] += 1
            example = example or f"{bfcl_name}: no acceptable value for a required parameter"
        for call in variants.calls:
            try:
                tool.validate(call)
                passed += 1
            except InvalidArguments as error:
                failed += 1
                example = example or f"{bfcl_name}: {error.problems[0]}"
                for problem in error.problems:
                    failing[_classify(problem, record["category"])] += 1
    report.counts["variants_valid"] += passed
    report.counts["variants_refused"] += failed
    if failing:
        report.failing[record["id"]] = {
            "categories": sorted(failing),
            "valid_variants": passed,
            "refused_variants": failed,
            "example": example,
        }


def _classify(problem: ArgumentProblem, category: str) -> str:
    message = problem.message
    if "unexpected" in message or "missing (required)" in message:
        return "not_in_schema"
    if "is not one of" in message:
        return "outside_enum"
    if "is not a 'date'" in message:
        return "format"
    if "is not of type" in message:
        if message.startswith("'' "):
            return "required_omittable"
        if "java" in category and message.startswith("'"):
            return "variable_name"
        return "type_mismatch"
    return f"unexplained: {problem}"


def _check_mutations(report: Conformance, tools: BfclToolset, prefix: str = "") -> None:
    for tool in tools.tools:
        for mutation in mutations(tool.arguments.json_schema):
            report.counts[f"{prefix}mutation_{mutation.kind}"] += 1
            try:
                tool.validate(mutation.arguments)
            except InvalidArguments as error:
                if any(_names(problem.path, mutation.field) for problem in error.problems):
                    continue
            report.unnamed.append(f"{tool.name} {mutation}")


def _names(path: str, name: str) -> bool:
    return path == name or path.startswith((f"{name}[", f"{name}."))


def known_issues() -> dict[str, Any]:
    with KNOWN_ISSUES.open(encoding="utf-8") as file:
        loaded: dict[str, Any] = json.load(file)
    return loaded


# -- the tests -----------------------------------------------------------------------------


def test_every_function_becomes_a_tool_with_a_valid_name() -> None:
    counts = conformance().counts
    assert counts["records"] == 2501
    assert counts["functions"] == 6376
    assert counts["irrelevance_records"] == 1140
    assert counts["irrelevance_functions"] == 2350
    for record in records():
        tools = toolset(record)
        assert all(TOOL_NAME.match(tool.name) for tool in tools.tools)
        assert sorted(tools.original_names.values()) == sorted(
            f["name"] for f in record["functions"]
        )


def test_strict_form_where_the_schema_allows_and_a_reason_where_not() -> None:
    counts = conformance().counts
    assert (counts["not_strict"], counts["irrelevance_not_strict"]) == (37, 25)
    tools = toolset(next(r for r in records() if r["id"] == "simple_python_337"))
    (reason,) = tools.not_strict.values()
    assert "cards: is an object with free-form keys" in reason
    assert not tools.tools[0].spec.strict


def test_ground_truth_calls_pass_validation() -> None:
    counts = conformance().counts
    print(summary())
    assert counts["ground_truth_calls"] == 3302
    assert (counts["variants_valid"], counts["variants_refused"]) == (9257, 224)


def test_every_refused_ground_truth_is_a_listed_known_issue() -> None:
    found = conformance().failing
    listed = known_issues()["records"]
    unexplained = {rid: v for rid, v in found.items() if rid not in listed}
    assert unexplained == {}
    assert sorted(listed) == sorted(found), "listed records that now pass: update the list"
    for record_id, entry in found.items():
        assert entry["categories"] == listed[record_id]["categories"], record_id
        assert entry["valid_variants"] == listed[record_id]["valid_variants"], record_id
    assert all(c in CATEGORIES for entry in found.values() for c in entry["categories"])
    no_valid_call = sorted(rid for rid, entry in found.items() if entry["valid_variants"] == 0)
    assert len(found) == 115
    assert len(no_valid_call) == 36


def test_the_data_notes_unsatisfiable_records_are_among_the_listed() -> None:
    found = conformance().failing
    noted = json.loads((DATA / "known_issues.json").read_text())
    for record_id in noted["unsatisfiable"]:
        assert found[record_id]["valid_variants"] == 0, record_id


def test_mutated_calls_are_refused_naming_the_field() -> None:
    report = conformance()
    assert report.unnamed == []
    counts = {k: v for k, v in report.counts.items() if "mutation_" in k}
    assert counts == {
        "mutation_wrong_type": 21793,
        "mutation_outside_enum": 4108,
        "mutation_missing_required": 12431,
        "mutation_extra_argument": 6376,
        "irrelevance_mutation_wrong_type": 9098,
        "irrelevance_mutation_outside_enum": 1515,
        "irrelevance_mutation_missing_required": 4298,
        "irrelevance_mutation_extra_argument": 2350,
    }


@pytest.mark.parametrize("record", records()[::25], ids=lambda r: r["id"])
def test_mutated_calls_through_the_loop_read_invalid_arguments(record: dict[str, Any]) -> None:
    tools = toolset(record)
    tool = tools.tools[0]
    cases = list(mutations(tool.arguments.json_schema))
    calls = tuple(
        ToolCall(id=f"m{i}", name=tool.name, arguments=case.arguments)
        for i, case in enumerate(cases)
    )
    model = ScriptedModel([AssistantOutput(tool_calls=calls), AssistantOutput(content="ok")])
    limits = Limits(max_rounds=2, tool_retries=len(calls), repeat_limit=None)
    result = Agent(model, list(tools.tools), limits=limits).run_sync(record["question"])
    observations = {m.tool_call_id: m.content for m in result.messages if m.role == "tool"}
    for i, case in enumerate(cases):
        text = observations[f"m{i}"]
        assert text.startswith("error[invalid_arguments]: "), (case, text)
        assert f"- {case.field}" in text, (case, text)


def summary() -> str:
    report = conformance()
    counts = report.counts
    failing = report.failing
    per_category = Counter(c for entry in failing.values() for c in entry["categories"])
    lines = [
        f"BFCL conformance: {counts['records']} records, {counts['functions']} functions "
        f"(+{counts['irrelevance_functions']} from {counts['irrelevance_records']} "
        "irrelevance records)",
        f"  tools not strict: {counts['not_strict']} + {counts['irrelevance_not_strict']} "
        "(free-form object parameters)",
        f"  ground-truth calls {counts['ground_truth_calls']}: variants checked "
        f"{counts['variants_valid'] + counts['variants_refused']} "
        f"(of {counts['variants_possible']} combinations), valid {counts['variants_valid']}, "
        f"refused {counts['variants_refused']}",
        f"  records with refused ground truth (known issues): {len(failing)}, of which "
        f"{sum(1 for e in failing.values() if e['valid_variants'] == 0)} have no valid call",
        *(f"    {name}: {n} records" for name, n in sorted(per_category.items())),
        "  mutations refused naming the field: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if "mutation_" in k),
        f"  mutations not refused or not named: {len(report.unnamed)}",
    ]
    return "\n".join(lines)


def write_known_issues() -> None:
    report = conformance()
    entries = {}
    for record in records():
        if record["id"] in report.failing:
            entries[record["id"]] = report.failing[record["id"]]
    document = {
        "note": "BFCL records whose ground truth offers values no schema-valid call can have. "
        "Written by `python tests/test_bfcl_conformance.py --write-known-issues`; "
        "tests/test_bfcl_conformance.py checks it against the data both ways.",
        "categories": CATEGORIES,
        "records": entries,
    }
    text = json.dumps(document, indent=1, ensure_ascii=False)
    rows = ",\n".join(
        f"  {json.dumps(rid)}: {json.dumps(entry, ensure_ascii=False)}"
        for rid, entry in entries.items()
    )
    head = text[: text.index('"records"')]
    KNOWN_ISSUES.write_text(f'{head}"records": {{\n{rows}\n }}\n}}\n', encoding="utf-8")


if __name__ == "__main__":
    if "--write-known-issues" in sys.argv:
        write_known_issues()
    print(summary())
