"""Decoration refuses what providers or the model would trip on, and warns about a tool the
model cannot understand: names providers refuse, stale parameter docs, no description."""

from __future__ import annotations

import re
import warnings

import pytest

from tooldeck import FunctionTool, ToolDefinitionError, external_tool, tool
from tooldeck.errors import ToolDefinitionWarning
from tooldeck.eval.bfcl.dialect import bfcl_tools

RULE = r"must match \^\[a-zA-Z0-9_-\]\{1,64\}\$ \(letters, digits, '_' and '-', at most 64"
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.mark.parametrize("name", ["my tool!", "math.hypot", "x" * 65, "naïve"])
def test_names_providers_refuse_are_refused_at_decoration_naming_the_rule(name: str) -> None:
    with pytest.raises(
        ToolDefinitionError,
        match=rf"^tool name {re.escape(repr(name))} is not one providers accept: it {RULE}",
    ):

        @tool(name=name)
        def anything() -> None:
            """Do anything."""


@pytest.mark.parametrize("name", ["my tool!", "", "x" * 65])
def test_names_providers_refuse_are_refused_for_explicit_and_external_tools(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match=RULE):
        FunctionTool(name, "Do anything.", EMPTY, print)
    with pytest.raises(ToolDefinitionError, match=RULE):
        external_tool(name, "Do anything.", EMPTY)


def test_names_within_the_rule_are_accepted() -> None:
    for name in ("get-weather_2", "X" * 64):
        assert FunctionTool(name, "Do anything.", EMPTY, print).name == name


def test_bfcl_names_are_still_converted_to_the_rule() -> None:
    (converted,) = bfcl_tools(
        [{"name": "math.hypot", "description": "d", "parameters": EMPTY}]
    ).tools
    assert converted.name == "math_hypot"


@pytest.mark.parametrize(
    "docstring",
    [
        "Add.\n\nArgs:\n    left: The left side.\n    rigth: The right side.\n",
        "Add.\n\n:param left: The left side.\n:param rigth: The right side.\n",
        "Add.\n\nParameters\n----------\nleft : int\n    The left side.\nrigth : int\n    The right.\n",
    ],
    ids=["google", "sphinx", "numpy"],
)
def test_a_docstring_describing_a_parameter_that_does_not_exist_is_refused(
    docstring: str,
) -> None:
    def add(left: int, right: int) -> int:
        return left + right

    add.__doc__ = docstring
    with pytest.raises(ToolDefinitionError) as raised:
        tool(add)
    assert str(raised.value) == (
        "tool 'add': the docstring describes parameter 'rigth', which the function does not "
        "have (its parameters: left, right); a renamed or removed parameter? fix the docstring "
        "so each description reaches the model"
    )


def test_a_callable_object_may_document_its_constructor_in_the_class_docstring() -> None:
    class Search:
        """Search the web.

        Args:
            api_key: The key the search service needs.
        """

        def __init__(self, api_key: str) -> None:
            self.api_key = api_key

        def __call__(self, query: str) -> str:
            return query

    assert tool(Search("k"), name="search").spec.description == "Search the web."


def no_description(name: str) -> str:
    return (
        f"tool {name!r} has no description: the model sees only its name and parameters; "
        "add a docstring or pass description='...'"
    )


def test_a_tool_without_a_description_warns_where_it_is_made() -> None:
    def mystery(code: str) -> str:
        return code

    with pytest.warns(ToolDefinitionWarning) as decorated:
        tool(mystery)
    with pytest.warns(ToolDefinitionWarning) as explicit:
        FunctionTool("blank", "  ", EMPTY, print)
    assert [str(w.message) for w in [*decorated, *explicit]] == [
        no_description("mystery"),
        no_description("blank"),
    ]
    assert {w.filename for w in [*decorated, *explicit]} == {__file__}


def test_a_described_tool_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ToolDefinitionWarning)

        @tool
        def documented(code: str) -> str:
            """Look a code up."""
            return code

        FunctionTool("look_up", "Look a code up.", EMPTY, print)
