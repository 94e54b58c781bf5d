"""Every call the local model writes closes, at any token limit (issue 37).

The grammar bounds each value in characters (``_bounds``); the engine keeps a reserve of
tokens for closing an open call (``_closing``). The unit tests check the grammar's bounds
and the reserve on the generated grammar (llama.cpp's own grammar engine must accept the
shortest call); the slow ones run the default weights on BFCL cases whose calls used to
run to the token limit, and assert only that the call parses and validates.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest

import bfcl_cases
from test_local_model import grammar_accepts
from tooldeck import Message, ModelError, ModelSettings, ToolSpec
from tooldeck.eval.bfcl.dialect import bfcl_tools
from tooldeck.models.local import LocalModel
from tooldeck.models.local._bounds import MAX_DIGITS
from tooldeck.models.local._closing import (
    SLACK,
    line_closed,
    looping,
    reserve,
    shortest_call_length,
    shortest_value,
)
from tooldeck.models.local._grammar import TurnSyntax, build_grammar, call_head, plan_turn

RUNAWAY = ("live_simple_201-116-9", "live_simple_207-116-15")
"""Held-out cases whose date ran on to the token limit at 256 tokens ("2023-03-04 01:00:00:0000…")."""
SYNTAX = TurnSyntax(multiline_answer=False, end_of_calls="\ntool:", lead=" ")


def held_out() -> list[dict[str, Any]]:
    """BFCL live_simple cases 200 to 239, the held-out cases of the measure."""
    return [r for r in bfcl_cases.records() if r["category"] == "live_simple"][200:240]


def specs_of(record: dict[str, Any]) -> tuple[ToolSpec, ...]:
    return tuple(t.spec for t in bfcl_tools(record["functions"], {}).tools)


@pytest.fixture(scope="module")
def model() -> LocalModel:
    local = LocalModel()
    local.load()
    return local


def test_a_call_line_is_closed_when_its_braces_close_outside_strings() -> None:
    assert line_closed('call {"name": "f", "arguments": {"a": "}}"}}')
    assert not line_closed('call {"name": "f", "arguments": {"a": "}}')
    assert not line_closed('call {"name": "f", "arguments": {"a": "x\\"}}')
    assert not line_closed("call ")
    assert line_closed('call {"name": "f", "arguments": {}}\n')  # between two calls
    assert line_closed('call {"name": "f", "arguments": {}}\ntoo', "\ntool:")


def test_a_stretch_of_tokens_written_again_and_again_is_a_loop() -> None:
    date = [17, 18, 17, 19, 20, 21, 20, 22, 18, 18, 5]  # "2023-04-22 ", one token a character
    assert looping([1, 2] + date * 4)  # 44 tokens of one stretch
    assert not looping([1, 2] + date * 2)
    assert looping([9] * 33)
    assert not looping([9] * 32 + [8])  # it must go on up to the last token
    assert not looping(list(range(100)))
    assert not looping([0, 44] * 8)  # a list of eight zeros is not a loop yet


def test_the_shortest_value_keeps_required_properties_enums_and_ranges() -> None:
    schema = {
        "type": "object",
        "properties": {
            "unit": {"type": "string", "enum": ["celsius", "K"]},
            "days": {"type": "integer", "minimum": 3},
            "code": {"type": "string", "minLength": 2},
            "nested": {"type": "object", "properties": {"on": {"type": "boolean"}}},
            "optional": {"type": "string"},
        },
        "required": ["unit", "days", "code", "nested"],
    }
    assert shortest_value(schema, {}) == {"unit": "K", "days": 4, "code": "xx", "nested": {}}


def test_the_reserve_holds_the_shortest_call_of_every_held_out_tool(
    model: LocalModel,
) -> None:
    """For each held-out case, the shortest call fits the reserve, validates and is one the
    turn's grammar accepts (llama.cpp's grammar engine, through the model's tokenizer)."""
    grammar_ok = model._loaded()._parses
    for record in held_out():
        specs = specs_of(record)
        plan = plan_turn(specs, ModelSettings(tool_choice="required"))
        grammar = build_grammar(plan, SYNTAX, grammar_ok).text
        for spec in specs:
            arguments = shortest_value(spec.parameters, spec.parameters.get("$defs", {}))
            line = call_head(spec.name) + json.dumps(arguments) + "}"
            kept = reserve(specs)
            assert len(line) <= shortest_call_length(spec) <= kept.most - SLACK
            assert kept.needed(line[: len(call_head(spec.name))]) == kept.arguments[spec.name]
            assert kept.arguments[spec.name] >= len(line) - len(call_head(spec.name)) + SLACK
            assert kept.needed(line[: len(call_head(spec.name)) - 1]) is None  # in the head
            jsonschema.validate(arguments, spec.parameters)
            assert grammar_accepts(model, grammar, " " + line), (record["id"], line)


def test_the_grammar_bounds_digits_strings_and_items_of_open_values(model: LocalModel) -> None:
    grammar_ok = model._loaded()._parses
    spec = ToolSpec(
        name="log",
        description="Log a reading.",
        parameters={
            "type": "object",
            "properties": {
                "count": {"type": "integer"},
                "value": {"type": "number"},
                "note": {"type": "string"},
                "summary": {"type": "string", "maxLength": 1000},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["count", "value", "note", "summary", "tags"],
        },
    )
    plan = plan_turn((spec,), ModelSettings(tool_choice="log"))
    grammar = build_grammar(plan, SYNTAX, grammar_ok).text
    from llama_cpp.llama_grammar import LlamaGrammar

    LlamaGrammar.from_string(grammar, verbose=False)  # llama-cpp-python parses it
    head = ' call {"name": "log", "arguments": {"count": '

    def writes(rest: str) -> bool:
        return grammar_accepts(model, grammar, head + rest)

    digits = "1" * MAX_DIGITS
    base = f'{digits}, "value": {digits}.{digits}, "note": "'
    assert writes(base + "n" * 256 + '", "summary": "' + "s" * 1000 + '", "tags": []}}')
    assert not writes(digits + "1")  # 17 digits
    assert not writes(f'1, "value": 1.{digits}1')
    assert not writes('1, "value": 1, "note": "' + "n" * 257)  # no maxLength: 256
    assert not writes('1, "value": 1, "note": "", "summary": "' + "s" * 1001)


@pytest.mark.slow
@pytest.mark.parametrize("max_tokens", [64, 256])
@pytest.mark.parametrize("case", RUNAWAY)
def test_a_call_that_used_to_run_away_closes_and_validates(
    model: LocalModel, case: str, max_tokens: int
) -> None:
    (record,) = [r for r in held_out() if r["id"] == case]
    specs = specs_of(record)
    question = record["question"]
    text = question if isinstance(question, str) else json.dumps(question)
    settings = ModelSettings(tool_choice="required", max_tokens=max_tokens)
    output = asyncio.run(model.complete([Message.user(text)], specs, settings))
    (call,) = output.tool_calls
    assert call.raw_arguments is None, call  # the arguments parsed
    (spec,) = [s for s in specs if s.name == call.name]
    jsonschema.validate(call.arguments, spec.parameters)
    assert output.usage is not None
    assert output.usage.output_tokens <= max_tokens


@pytest.mark.slow
def test_a_limit_below_the_shortest_call_is_an_error_not_a_cut_call(model: LocalModel) -> None:
    (record,) = [r for r in held_out() if r["id"] == RUNAWAY[0]]
    settings = ModelSettings(tool_choice="required", max_tokens=6)
    with pytest.raises(ModelError, match="cannot hold a whole call"):
        asyncio.run(model.complete([Message.user("Weather?")], specs_of(record), settings))
