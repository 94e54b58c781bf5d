"""The exact JSON Schema the model is shown for each kind of signature.

This module uses ``from __future__ import annotations`` on purpose: every annotation below
is a string that ``@tool`` must resolve, including types defined inside test functions.
The expected schemas are written out in full so that any change (a faster path for simple
signatures, a pydantic upgrade) is held to exactly what the model reads.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Annotated, Any, Literal, NotRequired, Optional

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from tooldeck import FunctionTool, RunContext, ToolDefinitionError, tool
from tooldeck.errors import InvalidArguments


class Unit(Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Priority(IntEnum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    """A point on the plane."""

    x: int
    y: int = 0


class Line(BaseModel):
    start: Point
    end: Point


@dataclass
class Box:
    width: float
    label: str = "box"


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The strict form of an object: closed, every property required."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **extra,
    }


def nullable(schema: dict[str, Any], **annotations: Any) -> dict[str, Any]:
    """An optional property in strict form; ``description`` and ``default`` sit outside."""
    return {"anyOf": [schema, {"type": "null"}], **annotations}


POINT_STRICT = closed(
    {"x": {"type": "integer"}, "y": nullable({"type": "integer"}, default=0)},
    description="A point on the plane.",
)


# --- the table: one tool per signature, with the schema the model must see ---------------


@tool
def no_parameters() -> str:
    """Say hi."""
    return "hi"


@tool
def one_string(city: str) -> str:
    return city


@tool
def scalars(name: str, count: int, ratio: float, enabled: bool) -> None: ...


@tool
def literal_text(unit: Literal["celsius", "fahrenheit"]) -> None: ...


@tool
def literal_numbers(level: Literal[1, 2, 3]) -> None: ...


@tool
def literal_with_default(unit: Literal["c", "f"] = "c") -> None: ...


@tool
def enum_parameter(unit: Unit) -> None: ...


@tool
def int_enum_parameter(priority: Priority) -> None: ...


@tool
def optional_none(limit: int | None = None) -> None: ...


@tool
def int_default(limit: int = 10) -> None: ...


@tool
def typing_optional(prefix: Optional[str] = "item") -> None:  # noqa: UP045 (the old spelling)
    ...


@tool
def nullable_required(note: str | None) -> None: ...


@tool
def union_types(value: int | str) -> None: ...


@tool
def list_of_ints(values: list[int]) -> None: ...


@tool
def pair(pair: tuple[int, str]) -> None: ...


@tool
def variadic_tuple(values: tuple[float, ...]) -> None: ...


@tool
def set_of_strings(tags: set[str]) -> None: ...


@tool
def nested_lists(grid: list[list[str]]) -> None: ...


@tool
def pydantic_model(point: Point) -> None: ...


@tool
def nested_models(line: Line) -> None: ...


@tool
def optional_model(point: Point | None = None) -> None: ...


@tool
def list_of_models(points: list[Point]) -> None: ...


@tool
def dataclass_parameter(box: Box) -> None: ...


@tool
def typed_dict_parameter(movie: Movie) -> None: ...


@tool
def number_constraints(
    count: Annotated[int, Field(ge=1, le=10)],
    ratio: Annotated[float, Field(gt=0, lt=1, multiple_of=0.25)],
) -> None: ...


@tool
def text_constraints(
    code: Annotated[str, Field(min_length=2, max_length=8, pattern=r"^[a-z]+$")],
) -> None: ...


@tool
def list_constraints(names: Annotated[list[str], Field(min_length=1, max_length=3)]) -> None: ...


@tool
def annotated_text(city: Annotated[str, "The city to look up"]) -> None: ...


@tool
def field_description(city: str = Field(description="The city to look up")) -> None: ...


@tool
def field_default_description(days: int = Field(3, description="How many days", ge=1)) -> None: ...


@tool
def google_style(city: str) -> str:
    """Get the weather.

    Args:
        city: The city to look up.
    """
    return city


@tool
def numpy_style(city: str) -> str:
    """Get the weather.

    Parameters
    ----------
    city : str
        The city to look up.
    """
    return city


@tool
def sphinx_style(city: str) -> str:
    """Get the weather.

    :param city: The city to look up.
    """
    return city


@tool
def annotated_beats_docstring(city: Annotated[str, "From Annotated"]) -> str:
    """Get the weather.

    Args:
        city: From the docstring.
    """
    return city


@tool
def context_hidden(ctx: RunContext[None], query: str) -> None: ...


@tool
def date_parameter(day: datetime.date) -> None: ...


@tool
def positional_and_keyword(a: int, /, b: int, *, c: int = 1) -> None: ...


CITY = {"type": "string", "description": "The city to look up."}

STRICT_TABLE: list[tuple[FunctionTool[..., Any], dict[str, Any]]] = [
    (no_parameters, closed({})),
    (one_string, closed({"city": {"type": "string"}})),
    (
        scalars,
        closed(
            {
                "name": {"type": "string"},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "enabled": {"type": "boolean"},
            }
        ),
    ),
    (literal_text, closed({"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}})),
    (literal_numbers, closed({"level": {"type": "integer", "enum": [1, 2, 3]}})),
    (
        literal_with_default,
        closed({"unit": nullable({"type": "string", "enum": ["c", "f"]}, default="c")}),
    ),
    (
        enum_parameter,
        closed(
            {"unit": {"$ref": "#/$defs/Unit"}},
            **{"$defs": {"Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}},
        ),
    ),
    (
        int_enum_parameter,
        closed(
            {"priority": {"$ref": "#/$defs/Priority"}},
            **{"$defs": {"Priority": {"type": "integer", "enum": [1, 2]}}},
        ),
    ),
    (optional_none, closed({"limit": nullable({"type": "integer"})})),
    (int_default, closed({"limit": nullable({"type": "integer"}, default=10)})),
    (typing_optional, closed({"prefix": nullable({"type": "string"}, default="item")})),
    (nullable_required, closed({"note": nullable({"type": "string"})})),
    (union_types, closed({"value": {"anyOf": [{"type": "integer"}, {"type": "string"}]}})),
    (list_of_ints, closed({"values": {"type": "array", "items": {"type": "integer"}}})),
    (
        pair,
        closed(
            {
                "pair": {
                    "type": "array",
                    "prefixItems": [{"type": "integer"}, {"type": "string"}],
                    "minItems": 2,
                    "maxItems": 2,
                }
            }
        ),
    ),
    (variadic_tuple, closed({"values": {"type": "array", "items": {"type": "number"}}})),
    (
        set_of_strings,
        closed({"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}),
    ),
    (
        nested_lists,
        closed(
            {"grid": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}}
        ),
    ),
    (
        pydantic_model,
        closed({"point": {"$ref": "#/$defs/Point"}}, **{"$defs": {"Point": POINT_STRICT}}),
    ),
    (
        nested_models,
        closed(
            {"line": {"$ref": "#/$defs/Line"}},
            **{
                "$defs": {
                    "Line": closed(
                        {"start": {"$ref": "#/$defs/Point"}, "end": {"$ref": "#/$defs/Point"}}
                    ),
                    "Point": POINT_STRICT,
                }
            },
        ),
    ),
    (
        optional_model,
        closed(
            {"point": nullable({"$ref": "#/$defs/Point"})}, **{"$defs": {"Point": POINT_STRICT}}
        ),
    ),
    (
        list_of_models,
        closed(
            {"points": {"type": "array", "items": {"$ref": "#/$defs/Point"}}},
            **{"$defs": {"Point": POINT_STRICT}},
        ),
    ),
    (
        dataclass_parameter,
        closed(
            {"box": {"$ref": "#/$defs/Box"}},
            **{
                "$defs": {
                    "Box": closed(
                        {
                            "width": {"type": "number"},
                            "label": nullable({"type": "string"}, default="box"),
                        }
                    )
                }
            },
        ),
    ),
    (
        typed_dict_parameter,
        closed(
            {"movie": {"$ref": "#/$defs/Movie"}},
            **{
                "$defs": {
                    "Movie": closed(
                        {"title": {"type": "string"}, "year": nullable({"type": "integer"})}
                    )
                }
            },
        ),
    ),
    (
        number_constraints,
        closed(
            {
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "exclusiveMaximum": 1,
                    "multipleOf": 0.25,
                },
            }
        ),
    ),
    (
        text_constraints,
        closed({"code": {"type": "string", "minLength": 2, "maxLength": 8, "pattern": "^[a-z]+$"}}),
    ),
    (
        list_constraints,
        closed(
            {"names": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}}
        ),
    ),
    (annotated_text, closed({"city": {"type": "string", "description": "The city to look up"}})),
    (
        field_description,
        closed({"city": {"type": "string", "description": "The city to look up"}}),
    ),
    (
        field_default_description,
        closed(
            {
                "days": {
                    "anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}],
                    "description": "How many days",
                    "default": 3,
                }
            }
        ),
    ),
    (google_style, closed({"city": CITY})),
    (numpy_style, closed({"city": CITY})),
    (sphinx_style, closed({"city": CITY})),
    (
        annotated_beats_docstring,
        closed({"city": {"type": "string", "description": "From Annotated"}}),
    ),
    (context_hidden, closed({"query": {"type": "string"}})),
    (date_parameter, closed({"day": {"type": "string", "format": "date"}})),
    (
        positional_and_keyword,
        closed(
            {
                "a": {"type": "integer"},
                "b": {"type": "integer"},
                "c": nullable({"type": "integer"}, default=1),
            }
        ),
    ),
]


def test_the_table_covers_at_least_25_signatures() -> None:
    assert len(STRICT_TABLE) >= 25
    assert len({function_tool.name for function_tool, _ in STRICT_TABLE}) == len(STRICT_TABLE)


@pytest.mark.parametrize(
    ("function_tool", "expected"),
    STRICT_TABLE,
    ids=[function_tool.name for function_tool, _ in STRICT_TABLE],
)
def test_strict_schema_is_exactly(function_tool: FunctionTool[..., Any], expected: Any) -> None:
    assert function_tool.spec.strict is True
    assert function_tool.spec.parameters == expected


@pytest.mark.parametrize("function_tool", [google_style, numpy_style, sphinx_style])
def test_each_docstring_style_leaves_only_the_prose_as_description(
    function_tool: FunctionTool[..., Any],
) -> None:
    assert function_tool.spec.description == "Get the weather."


# --- the non-strict form ------------------------------------------------------------------


@tool(strict=False)
def loose_defaults(city: str, limit: int = 10, note: str | None = None) -> None: ...


@tool(strict=False)
def loose_dict(counts: dict[str, int]) -> None: ...


@tool(strict=False)
def loose_model(point: Point | None = None) -> None: ...


@tool(strict=False)
def loose_field(days: int = Field(3, description="How many days", ge=1)) -> None: ...


LOOSE_TABLE: list[tuple[FunctionTool[..., Any], dict[str, Any]]] = [
    (
        loose_defaults,
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    ),
    (
        loose_dict,
        {
            "type": "object",
            "properties": {
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}}
            },
            "required": ["counts"],
            "additionalProperties": False,
        },
    ),
    (
        loose_model,
        {
            "type": "object",
            "properties": {
                "point": {
                    "anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}],
                    "default": None,
                }
            },
            "additionalProperties": False,
            "$defs": {
                "Point": {
                    "type": "object",
                    "description": "A point on the plane.",
                    "properties": {
                        "x": {"type": "integer"},
                        "y": {"type": "integer", "default": 0},
                    },
                    "required": ["x"],
                    "additionalProperties": False,  # closed, as validation enforces
                }
            },
        },
    ),
    (
        loose_field,
        {
            "type": "object",
            "properties": {
                "days": {
                    "type": "integer",
                    "default": 3,
                    "description": "How many days",
                    "minimum": 1,
                }
            },
            "additionalProperties": False,
        },
    ),
]


@pytest.mark.parametrize(
    ("function_tool", "expected"),
    LOOSE_TABLE,
    ids=[function_tool.name for function_tool, _ in LOOSE_TABLE],
)
def test_non_strict_schema_keeps_defaults_and_optional_fields(
    function_tool: FunctionTool[..., Any], expected: Any
) -> None:
    assert function_tool.spec.strict is False
    assert function_tool.spec.parameters == expected


# --- tools declared inside a test function (string annotations, local types) --------------


def test_tool_inside_a_function_resolves_local_model_and_enum() -> None:
    class Size(Enum):
        SMALL = "small"
        LARGE = "large"

    class Order(BaseModel):
        item: str
        quantity: int = 1

    @tool
    def place_order(order: Order, size: Size) -> str:
        """Place an order."""
        return f"{order.quantity} x {order.item} ({size.value})"

    assert place_order.spec.parameters == closed(
        {"order": {"$ref": "#/$defs/Order"}, "size": {"$ref": "#/$defs/Size"}},
        **{
            "$defs": {
                "Order": closed(
                    {
                        "item": {"type": "string"},
                        "quantity": nullable({"type": "integer"}, default=1),
                    }
                ),
                "Size": {"type": "string", "enum": ["small", "large"]},
            }
        },
    )
    arguments = place_order.validate({"order": {"item": "tea", "quantity": None}, "size": "large"})
    assert place_order(**arguments) == "1 x tea (large)"


def test_tool_inside_a_function_resolves_nested_local_models_and_dataclasses() -> None:
    @dataclass
    class Stop:
        city: str

    class Route(BaseModel):
        stops: list[Stop]
        note: str | None = None

    @tool(name="plan_route", strict=True)
    def plan(route: Route, mode: Literal["car", "train"] = "car") -> int:
        return len(route.stops)

    assert plan.spec.parameters == closed(
        {
            "route": {"$ref": "#/$defs/Route"},
            "mode": nullable({"type": "string", "enum": ["car", "train"]}, default="car"),
        },
        **{
            "$defs": {
                "Route": closed(
                    {
                        "stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}},
                        "note": nullable({"type": "string"}),
                    }
                ),
                "Stop": closed({"city": {"type": "string"}}),
            }
        },
    )
    arguments = plan.validate({"route": {"stops": [{"city": "Oslo"}], "note": None}, "mode": None})
    assert arguments["mode"] == "car"
    assert plan(**arguments) == 1


def test_method_of_a_local_class_resolves_its_string_annotations() -> None:
    class Level(IntEnum):
        QUIET = 0
        LOUD = 1

    class Speaker:
        def __init__(self) -> None:
            self.said: list[str] = []

        def say(self, text: str, level: Level = Level.QUIET) -> str:
            """Say something."""
            said = text.upper() if level is Level.LOUD else text
            self.said.append(said)
            return said

    speaker = Speaker()
    say = tool(speaker.say)
    assert say.spec.parameters == closed(
        {
            "text": {"type": "string"},
            "level": nullable({"type": "integer", "enum": [0, 1]}, default=0),
        },
    )  # Level was inlined (its $ref had a default beside it), so no $defs remain
    assert say(**say.validate({"text": "hi", "level": 1})) == "HI"
    assert speaker.said == ["HI"]


def test_unresolvable_string_annotation_names_the_tool() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'lookup': cannot resolve .*Missing"):

        @tool
        def lookup(key: Missing) -> str:  # type: ignore[name-defined]  # noqa: F821
            return str(key)


def test_boolean_subschemas_are_json_schema() -> None:
    """``true`` (any value) and ``false`` (none) where a schema is expected, as an MCP server
    or a case file may write them."""
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "tag": True, "owner": False},
        "required": ["text"],
    }
    loose = FunctionTool("save_note", "Save a note.", parameters, lambda **a: "ok", strict=False)
    assert loose.validate({"text": "hi", "tag": {"any": ["thing"]}}) == {
        "text": "hi",
        "tag": {"any": ["thing"]},
    }
    with pytest.raises(InvalidArguments) as refused:
        loose.validate({"text": "hi", "owner": "me"})
    assert str(refused.value) == "owner: takes no value (got 'me')"
    with pytest.raises(ToolDefinitionError, match="tag: accepts any value; give it a type"):
        FunctionTool("save_note", "Save a note.", parameters, lambda **a: "ok", strict=True)

    closed = {**parameters, "properties": {"text": {"type": "string"}, "owner": False}}
    strict = FunctionTool("save_note", "Save a note.", closed, lambda **a: "ok", strict=True)
    assert strict.spec.parameters["properties"]["owner"] == {"type": "null"}  # null: left out
    assert strict.validate({"text": "hi", "owner": None}) == {"text": "hi"}
