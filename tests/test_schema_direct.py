"""Simple signatures get their schema written directly: it must equal what pydantic writes."""
# ruff: noqa: UP007, UP045  (the old spellings are what these tests are about)

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field

from tooldeck import tool
from tooldeck.errors import InvalidArguments
from tooldeck.tools.schema import function_schema
from tooldeck.tools.schema._arguments import DeferredPydanticArguments, PydanticArguments


def f_scalars(text: str, count: int, ratio: float, flag: bool) -> None:
    """Scalars.

    Args:
        text: Some text.
        count: A count.
        ratio: A ratio.
        flag: A flag.
    """


def f_defaults(text: str = "x", count: int = 3, ratio: float = 0.5, flag: bool = False) -> None:
    """Defaults of every scalar type."""


def f_optional(a: Optional[int] = None, b: str | None = None, c: int | str = 1) -> None:
    """Optional and unions."""


def f_literals(
    mode: Literal["a", "b"],
    one: Literal["only"],
    nums: Literal[1, 2, 3],
    mixed: Literal[1, "a"],
    flags: Literal[True, False] = True,
    floats: Literal[0.5, 1.5] = 0.5,
) -> None:
    """Literals."""


def f_optional_literal(mode: Optional[Literal["a", "b"]] = None) -> None:
    """The W4 benchmark's last parameter."""


def f_collections(
    tags: list[str], ids: set[int], names: frozenset[str], scores: tuple[float, ...]
) -> None:
    """Collections of scalars."""


def f_nested_collections(
    grid: list[list[int]], maybe: list[int | None], opt: Optional[list[str]] = None
) -> None:
    """Collections of collections and of optionals."""


def f_annotated(
    city: Annotated[str, "The city name."], unit: Annotated[str, "A unit."] = "c"
) -> None:
    """Descriptions in Annotated."""


def f_none_default(note: Union[str, None] = None) -> None:
    """Typing.Union spelling."""


def f_search_items(
    query: str,
    limit: int,
    min_score: float,
    tags: list[str],
    mode: Optional[Literal["a", "b"]] = None,
) -> str:
    """Search the catalogue for matching items.

    Args:
        query: Free-text search query.
        limit: Maximum number of items to return.
        min_score: Minimum relevance score between 0 and 1.
        tags: Tags that every returned item must carry.
        mode: Optional search mode, either 'a' or 'b'.
    """
    return query


def f_no_parameters() -> str:
    """Nothing to pass."""
    return "ok"


SIMPLE = [
    f_scalars,
    f_defaults,
    f_optional,
    f_literals,
    f_optional_literal,
    f_collections,
    f_nested_collections,
    f_annotated,
    f_none_default,
    f_search_items,
    f_no_parameters,
]


@pytest.mark.parametrize("fn", SIMPLE, ids=lambda fn: fn.__name__)
def test_direct_schema_equals_pydantics(fn: Callable[..., Any]) -> None:
    direct = function_schema(fn, fn.__name__, direct=True)
    built = function_schema(fn, fn.__name__, direct=False)
    assert isinstance(direct.arguments, DeferredPydanticArguments)
    assert isinstance(built.arguments, PydanticArguments)
    assert direct.arguments.json_schema == built.arguments.json_schema


class Colour(Enum):
    RED = "red"


class Point(BaseModel):
    x: int


def f_enum(colour: Colour) -> None:
    """An enum."""


def f_model(point: Point) -> None:
    """A model."""


def f_constrained(n: Annotated[int, Field(ge=1)]) -> None:
    """A constraint."""


def f_field_default(n: int = Field(default=1, le=9)) -> None:
    """A Field default."""


def f_fixed_tuple(pair: tuple[int, str]) -> None:
    """A fixed-length tuple."""


def f_list_default(tags: list[str] = []) -> None:  # noqa: B006 - the point of the test
    """A list default."""


def f_literal_none(mode: Literal["a", None] = None) -> None:
    """A literal with None."""


@pytest.mark.parametrize(
    "fn",
    [
        f_enum,
        f_model,
        f_constrained,
        f_field_default,
        f_fixed_tuple,
        f_list_default,
        f_literal_none,
    ],
    ids=lambda fn: fn.__name__,
)
def test_other_signatures_go_to_pydantic(fn: Callable[..., Any]) -> None:
    assert isinstance(function_schema(fn, fn.__name__).arguments, PydanticArguments)


def test_a_direct_tool_validates_on_first_call() -> None:
    search = tool(f_search_items)
    assert search.validate({"query": "q", "limit": "3", "min_score": 0.5, "tags": []}) == {
        "query": "q",
        "limit": 3,
        "min_score": 0.5,
        "tags": [],
        "mode": None,
    }
    with pytest.raises(InvalidArguments) as caught:
        search.validate({"query": "q", "limit": 1, "min_score": 0.5, "tags": [], "mode": "c"})
    assert [str(problem) for problem in caught.value.problems] == [
        "mode: Input should be 'a' or 'b' (got 'c')"
    ]


def test_strict_form_keeps_only_definitions_still_referred_to() -> None:
    from tooldeck.tools.schema._strict import to_strict

    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A", "description": "inlined: a $ref with a sibling"},
            "b": {"$ref": "#/$defs/B"},
        },
        "required": ["a", "b"],
        "$defs": {
            "A": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
            "B": {"type": "object", "properties": {"c": {"$ref": "#/$defs/C"}}, "required": ["c"]},
            "C": {"type": "string"},
            "Unused": {"type": "integer"},
        },
    }
    strict = to_strict(schema)
    assert sorted(strict["$defs"]) == ["B", "C"]
    assert strict["properties"]["a"]["properties"] == {"x": {"type": "integer"}}
    assert strict["properties"]["a"]["additionalProperties"] is False
