"""Unknown keys are refused at every depth, strict or not, exactly where the schema closes an
object; a model that says ``extra="allow"`` is shown open and its extra keys reach the tool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from helpers import call, calls, tool_messages
from tooldeck import Agent, AssistantOutput, FunctionTool, ScriptedModel, tool
from tooldeck.errors import InvalidArguments


class Item(BaseModel):  # pydantic's default: extra="ignore"
    name: str


@dataclass
class Size:
    width: int


class Label(TypedDict):
    text: str


class Tagged(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


def problems(function_tool: FunctionTool[..., Any], arguments: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidArguments) as raised:
        function_tool.validate(arguments)
    return [str(problem) for problem in raised.value.problems]


@pytest.mark.parametrize("strict", [True, False])
def test_unknown_nested_keys_are_refused_in_models_dataclasses_and_typed_dicts(
    strict: bool,
) -> None:
    @tool(strict=strict)
    def stock(item: Item, size: Size, labels: list[Label]) -> str:
        """Stock an item."""
        return item.name

    schema = stock.spec.parameters
    assert all(
        schema["$defs"][name]["additionalProperties"] is False for name in ("Item", "Size", "Label")
    )
    arguments = {
        "item": {"name": "x", "evil": 1},
        "size": {"width": 2, "depth": 3},
        "labels": [{"text": "a", "color": "red"}],
    }
    assert problems(stock, arguments) == [
        "item.evil: unexpected field (not in the schema)",
        "size.depth: unexpected field (not in the schema)",
        "labels[0].color: unexpected field (not in the schema)",
    ]


def test_the_model_reads_the_refusal_and_the_tool_never_sees_a_dropped_key() -> None:
    received: list[Item] = []

    @tool(strict=False)
    def add_item(item: Item) -> str:
        """Add an item."""
        received.append(item)
        return "added"

    model = ScriptedModel(
        [
            calls(call("add_item", item={"name": "x", "evil": 1})),
            calls(call("add_item", item={"name": "x"})),
            AssistantOutput(content="done"),
        ]
    )
    result = Agent(model, [add_item]).run_sync("add x")
    assert tool_messages(result.messages) == [
        "error[invalid_arguments]: the arguments for 'add_item' do not match its schema:\n"
        "- item.evil: unexpected field (not in the schema)",
        "added",
    ]
    assert received == [Item(name="x")]


def test_a_model_that_allows_extra_keys_is_shown_open_and_passes_them_through() -> None:
    @tool(strict=False)
    def tag(tagged: Tagged, item: Item) -> dict[str, Any]:
        """Tag an item."""
        return tagged.model_dump()

    definitions = tag.spec.parameters["$defs"]
    assert definitions["Tagged"]["additionalProperties"] is True
    assert definitions["Item"]["additionalProperties"] is False
    arguments = tag.validate({"tagged": {"name": "t", "color": "red"}, "item": {"name": "x"}})
    assert arguments["tagged"].model_dump() == {"name": "t", "color": "red"}
    # The open model does not open its closed neighbour, nor the arguments object.
    assert problems(tag, {"tagged": {"name": "t"}, "item": {"name": "x", "evil": 1}}) == [
        "item.evil: unexpected field (allowed here: name)"
    ]
    assert problems(tag, {"tagged": {"name": "t"}, "item": {"name": "x"}, "more": 1}) == [
        "more: unexpected argument (the tool takes: tagged, item)"
    ]


def test_a_model_that_allows_extra_keys_cannot_be_strict() -> None:
    with pytest.raises(TypeError, match=r"parameter 'tagged' has type Tagged; .*strict=False"):

        @tool
        def tag(tagged: Tagged) -> None:
            """Tag."""


def test_explicit_parameters_model_that_allows_extras_passes_them_as_keywords() -> None:
    def save(**fields: Any) -> str:
        return ", ".join(f"{key}={value}" for key, value in sorted(fields.items()))

    saver = FunctionTool("save", "Save a record.", Tagged, save, strict=False)
    assert saver.spec.parameters["additionalProperties"] is True
    assert saver(**saver.validate({"name": "n", "color": "red"})) == "color=red, name=n"


def test_explicit_parameters_model_with_default_config_is_closed() -> None:
    saver = FunctionTool("save", "Save an item.", Item, lambda **fields: "", strict=False)
    assert saver.spec.parameters["additionalProperties"] is False
    assert problems(saver, {"name": "n", "evil": 1}) == [
        "evil: unexpected argument (the tool takes: name)"
    ]


@pytest.mark.parametrize("strict", [True, False])
def test_duplicate_items_of_a_set_are_refused_as_its_schema_says(strict: bool) -> None:
    @tool(strict=strict)
    def tag_all(tags: set[str], groups: list[frozenset[int]] | None = None) -> int:
        """Tag everything."""
        return len(tags)

    assert tag_all.spec.parameters["properties"]["tags"]["uniqueItems"] is True
    assert problems(tag_all, {"tags": ["a", "a"], "groups": [[1, 2], [3, 3]]}) == [
        "tags: has duplicate items (got ['a', 'a']); every item must be different",
        "groups[1]: has duplicate items (got [3, 3]); every item must be different",
    ]
    assert tag_all.validate({"tags": ["a", "b"]}) == {"tags": {"a", "b"}, "groups": None}
