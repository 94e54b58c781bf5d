"""The BFCL dialect converter (tooldeck.eval.bfcl.dialect): one test per documented rule."""

from __future__ import annotations

from typing import Any

import pytest

from tooldeck import Agent, AssistantOutput, Limits, ScriptedModel, ToolCall, ToolDefinitionError
from tooldeck.errors import InvalidArguments
from tooldeck.eval.bfcl.dialect import bfcl_schema, bfcl_tool_name, bfcl_tools


def root(**properties: Any) -> dict[str, Any]:
    return {"type": "dict", "properties": properties, "required": list(properties)}


@pytest.mark.parametrize(
    ("bfcl", "json_type"),
    [
        ("dict", "object"),
        ("HashMap", "object"),
        ("float", "number"),
        ("double", "number"),
        ("long", "integer"),
        ("Bigint", "integer"),
        ("tuple", "array"),
        ("ArrayList", "array"),
        ("String", "string"),
        ("any", "string"),
        ("Boolean", "boolean"),
        ("", "string"),
    ],
)
def test_type_names_become_json_schema_types(bfcl: str, json_type: str) -> None:
    assert bfcl_schema(root(x={"type": bfcl}))["properties"]["x"]["type"] == json_type


def test_char_is_one_character_and_set_has_unique_items() -> None:
    schema = bfcl_schema(root(c={"type": "char"}, s={"type": "Set", "items": {"type": "long"}}))
    assert schema["properties"] == {
        "c": {"type": "string", "minLength": 1, "maxLength": 1},
        "s": {"type": "array", "uniqueItems": True, "items": {"type": "integer"}},
    }


def test_an_unknown_type_name_is_an_error_naming_the_path() -> None:
    with pytest.raises(ToolDefinitionError, match=r"point\.x: unknown BFCL type 'flaot'"):
        bfcl_schema(root(point={"type": "dict", "properties": {"x": {"type": "flaot"}}}))


def test_objects_with_properties_are_closed_and_free_dicts_stay_open() -> None:
    schema = bfcl_schema(root(meta={"type": "dict", "description": "any keys"}))
    assert schema["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["meta"]


def test_optional_takes_names_out_of_required_and_is_dropped() -> None:
    parameters = {
        "type": "dict",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer", "optional": "true"},
            "c": {"type": "integer"},
        },
        "required": ["a", "b", "c"],
        "optional": ["c"],
    }
    schema = bfcl_schema(parameters)
    assert schema["required"] == ["a"]
    assert "optional" not in schema
    assert "optional" not in schema["properties"]["b"]


def test_required_keeps_only_listed_properties() -> None:
    schema = bfcl_schema(
        {"type": "dict", "properties": {"a": {"type": "integer"}}, "required": ["a", "ghost"]}
    )
    assert schema["required"] == ["a"]


def test_an_enum_contradicting_its_type_wins() -> None:
    flag = {"type": "boolean", "enum": ["True", "False", "dontcare"]}
    assert bfcl_schema(root(flag=flag))["properties"]["flag"] == {
        "type": "string",
        "enum": ["True", "False", "dontcare"],
    }


def test_an_array_enum_of_scalars_constrains_the_items() -> None:
    metrics = {"type": "array", "items": {"type": "string"}, "enum": ["cpu", "memory"]}
    assert bfcl_schema(root(metrics=metrics))["properties"]["metrics"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["cpu", "memory"]},
    }


def test_a_null_default_makes_null_valid() -> None:
    node = {"type": "integer", "enum": [1, 2], "default": None}
    assert bfcl_schema(root(n=node))["properties"]["n"] == {
        "type": ["integer", "null"],
        "enum": [1, 2, None],
        "default": None,
    }


def test_other_keywords_are_kept() -> None:
    node = {"type": "string", "format": "date", "description": "Day.", "default": "2024-01-01"}
    assert bfcl_schema(root(day=node))["properties"]["day"] == {**node, "type": "string"}


def test_the_input_is_not_changed() -> None:
    parameters = root(n={"type": "float", "optional": True})
    before = repr(parameters)
    bfcl_schema(parameters)
    assert repr(parameters) == before


def test_dotted_names_map_to_underscores_and_back() -> None:
    assert bfcl_tool_name("math.factorial") == "math_factorial"
    toolset = bfcl_tools([{"name": "a.b.c", "description": "", "parameters": root()}])
    assert toolset.tools[0].name == "a_b_c"
    assert toolset.original_name("a_b_c") == "a.b.c"
    assert toolset.tool("a.b.c") is toolset.tools[0]


def test_colliding_or_overlong_names_are_refused() -> None:
    functions = [{"name": n, "description": "", "parameters": root()} for n in ("a.b", "a_b")]
    with pytest.raises(ToolDefinitionError, match=r"'a\.b' and 'a_b' both map to tool name 'a_b'"):
        bfcl_tools(functions)
    with pytest.raises(ToolDefinitionError, match="must match"):
        bfcl_tool_name("x" * 65)


def test_strict_where_possible_otherwise_the_reason() -> None:
    functions = [
        {"name": "typed", "description": "", "parameters": root(n={"type": "integer"})},
        {"name": "free", "description": "", "parameters": root(meta={"type": "HashMap"})},
    ]
    toolset = bfcl_tools(functions)
    typed, free = toolset.tools
    assert typed.spec.strict
    assert not free.spec.strict
    assert "meta: is an object with free-form keys" in toolset.not_strict["free"]
    assert "typed" not in toolset.not_strict


def test_converted_tools_validate_what_the_schema_says() -> None:
    functions = [{"name": "area", "description": "", "parameters": root(base={"type": "float"})}]
    (tool,) = bfcl_tools(functions).tools
    assert tool.validate({"base": 2}) == {"base": 2}
    with pytest.raises(InvalidArguments) as refused:
        tool.validate({"base": "2", "unit": "cm"})
    assert sorted(str(p) for p in refused.value.problems) == [
        "base: '2' is not of type 'number'",
        "unit: unexpected argument (the tool takes: base)",
    ]


def test_handlers_run_under_the_original_name_and_a_missing_one_is_a_tool_error() -> None:
    functions = [
        {"name": "math.double", "description": "", "parameters": root(n={"type": "integer"})},
        {"name": "math.half", "description": "", "parameters": root(n={"type": "integer"})},
    ]
    toolset = bfcl_tools(functions, {"math.double": lambda n: n * 2})
    calls = (
        ToolCall(id="1", name="math_double", arguments={"n": 21}),
        ToolCall(id="2", name="math_half", arguments={"n": 4}),
    )
    model = ScriptedModel([AssistantOutput(tool_calls=calls), AssistantOutput(content="done")])
    result = Agent(model, list(toolset.tools), limits=Limits(max_rounds=2)).run_sync("go")
    observations = [m.content for m in result.messages if m.role == "tool"]
    assert observations[0] == "42"
    assert observations[1].startswith("error[tool_error]")
    assert "no handler was given for BFCL function 'math.half'" in repr(result.tool_trace[1].error)
