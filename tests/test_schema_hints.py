"""``type_hints``: the same hints as ``typing.get_type_hints(include_extras=True)``, with
each annotation's text compiled once (W4's cost), for every kind of annotation a tool has."""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, Optional, TypedDict, get_type_hints

import pytest
from pydantic import BaseModel, Field

from tooldeck.tools.schema._hints import type_hints


class Point(BaseModel):
    x: int


class Movie(TypedDict):
    title: str


def plain(query: str, limit: int, score: float, tags: list[str], on: bool = False) -> str:
    return query


def unions(mode: Literal["a", "b"] | None = None, kind: Optional[int] = None) -> None:  # noqa: UP045
    return None


def nested(table: dict[str, list[tuple[int, str]]], point: Point, movie: Movie) -> Any:
    return table


def annotated(
    name: Annotated[str, Field(description="A name")], size: Annotated[int, "metadata"]
) -> None:
    return None


def later(item: Later, items: list[Later]) -> Later:
    return item


class Later:
    pass


def quoted_inside(item: list["Later"]) -> None:  # noqa: UP037 - a forward reference inside
    return None


@functools.wraps(plain)
def wrapped(*args: Any, **kwargs: Any) -> str:
    return plain(*args, **kwargs)


@pytest.mark.parametrize(
    "function", [plain, unions, nested, annotated, later, quoted_inside, wrapped]
)
def test_the_hints_are_get_type_hints_own(function: Any) -> None:
    # by repr: each evaluation makes its own Field(...) object, equal in all but identity
    assert repr(type_hints(function, None)) == repr(get_type_hints(function, include_extras=True))


def test_a_name_not_defined_fails_as_get_type_hints_fails() -> None:
    def broken(value: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(NameError, match="Missing"):
        get_type_hints(broken, include_extras=True)
    with pytest.raises(NameError, match="Missing"):
        type_hints(broken, None)


def test_local_names_are_seen_as_get_type_hints_sees_them() -> None:
    class Local(BaseModel):
        y: int

    def uses_local(value: Local) -> None:
        return None

    given = {"Local": Local}
    assert type_hints(uses_local, given) == get_type_hints(uses_local, localns=given)
