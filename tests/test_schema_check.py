"""The metaschema check of explicit schemas is cached per node shape without weakening it:
over generated schemas (valid and broken, several drafts), it refuses exactly the schemas
``jsonschema``'s own ``check_schema`` refuses, with jsonschema's message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from tooldeck import FunctionTool, ToolDefinitionError
from tooldeck.tools.schema._check import check_schema

DRAFTS = [
    None,
    "https://json-schema.org/draft/2020-12/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-04/schema#",
]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b", ""]))
KEYWORD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "type": st.one_of(
        st.sampled_from(["string", "integer", "object", "array", "null", "strin"]),
        st.lists(st.sampled_from(["string", "null", "string", "nope"]), max_size=3),
        st.integers(),
    ),
    "description": st.one_of(st.text(max_size=5), st.integers()),
    "title": st.one_of(st.text(max_size=5), st.booleans()),
    "default": SCALARS,
    "const": SCALARS,
    "enum": st.one_of(st.lists(SCALARS, max_size=3), SCALARS),
    "required": st.one_of(
        st.lists(st.sampled_from(["a", "b", "a"]), max_size=3),
        st.lists(SCALARS, max_size=2),
        SCALARS,
    ),
    "minimum": st.one_of(st.integers(-2, 2), st.text(max_size=2)),
    "maxLength": st.one_of(st.integers(-2, 2), st.floats(0, 2), st.text(max_size=1)),
    "pattern": st.sampled_from(["^[a-z]+$", "(", 5]),
    "uniqueItems": st.one_of(st.booleans(), st.integers(0, 1)),
    "examples": st.one_of(st.lists(SCALARS, max_size=2), SCALARS),
    "format": st.one_of(st.sampled_from(["date", "email"]), st.integers()),
}


def _nodes() -> st.SearchStrategy[Any]:
    leaf = st.fixed_dictionaries({}, optional=KEYWORD_VALUES)
    junk = st.one_of(st.booleans(), st.integers(), st.text(max_size=2))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    **KEYWORD_VALUES,
                    "properties": st.one_of(
                        st.dictionaries(st.sampled_from("xyz"), st.one_of(inner, junk), max_size=3),
                        junk,
                    ),
                    "items": st.one_of(inner, st.lists(inner, max_size=2), junk),
                    "anyOf": st.one_of(st.lists(st.one_of(inner, junk), max_size=3), junk),
                    "additionalProperties": st.one_of(inner, junk),
                    "$defs": st.dictionaries(st.sampled_from("PQ"), inner, max_size=2),
                },
            ),
            leaf,
        ),
        max_leaves=12,
    )


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    root = draw(_nodes())
    draft = draw(st.sampled_from(DRAFTS))
    return root if draft is None else {**root, "$schema": draft}


def _jsonschema_verdict(schema: dict[str, Any]) -> str | None:
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as error:
        return error.message
    return None


def _our_verdict(schema: dict[str, Any]) -> str | None:
    try:
        check_schema(schema)
    except SchemaError as error:
        return error.message
    return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_the_cached_check_refuses_exactly_what_jsonschema_refuses(schema: dict[str, Any]) -> None:
    assert _our_verdict(schema) == _jsonschema_verdict(schema)


def test_a_broken_node_is_refused_after_a_valid_node_of_the_same_shape() -> None:
    check_schema({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    with pytest.raises(SchemaError, match=r"\['a', 'a'\] has non-unique elements"):
        check_schema({"type": "object", "properties": {"a": {}}, "required": ["a", "a"]})
    with pytest.raises(SchemaError, match=r"5 is not of type 'string'"):
        check_schema({"type": "object", "properties": {"a": {"description": 5}}})


def test_a_tool_with_a_broken_schema_names_the_tool_and_the_problem() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "1"}}}
    with pytest.raises(ToolDefinitionError) as refused:
        FunctionTool("count", "Count.", schema, print)
    assert str(refused.value) == (  # the message alone: its docs link is a note (errors.py)
        "tool 'count': the parameters are not a valid JSON Schema: '1' is not of type 'number'"
    )
