"""Arguments are checked against exactly the schema the model is shown, before the tool runs."""

import datetime
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, NotRequired

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from helpers import call, calls, tool_messages
from tooldeck import Agent, AssistantOutput, FunctionTool, ScriptedModel, ToolDefinitionError, tool
from tooldeck.errors import InvalidArguments


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


@dataclass
class Box:
    width: float
    label: str = "box"


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


@tool
def draw(
    point: Point,
    box: Box,
    movie: Movie,
    color: Color = Color.RED,
    points: list[Point] | None = None,
    scale: int = 1,
    note: str | None = "none",
) -> str:
    """Draw things."""
    return "drawn"


@tool
def constrained(
    count: Annotated[int, Field(ge=1, le=10)],
    code: Annotated[str, Field(min_length=2, pattern=r"^[a-z]+$")],
    mode: Literal["fast", "slow"] = "fast",
) -> str:
    return f"{count}{code}{mode}"


def problems(function_tool: Any, arguments: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidArguments) as raised:
        function_tool.validate(arguments)
    return [str(problem) for problem in raised.value.problems]


BASE = {"point": {"x": 1, "y": 2}, "box": {"width": 2.0, "label": "b"}, "movie": {"title": "Up"}}


# --- extras ---------------------------------------------------------------------------------


def test_extra_top_level_argument_is_refused_with_the_real_names() -> None:
    assert problems(draw, {**BASE, "colour": "red"}) == [
        "colour: unexpected argument "
        "(the tool takes: point, box, movie, color, points, scale, note)"
    ]


def test_nested_extras_are_refused_in_models_dataclasses_typed_dicts_and_lists() -> None:
    arguments = {
        "point": {"x": 1, "z": 3},
        "box": {"width": 1, "depth": 2},
        "movie": {"title": "Up", "rating": 5},
        "points": [{"x": 1, "w": 0}],
    }
    assert problems(draw, arguments) == [
        "point.z: unexpected field (not in the schema)",
        "box.depth: unexpected field (not in the schema)",
        "movie.rating: unexpected field (not in the schema)",
        "points[0].w: unexpected field (not in the schema)",
    ]


def test_extra_argument_is_refused_even_when_strict_is_off() -> None:
    @tool(strict=False)
    def tally(counts: dict[str, int]) -> int:
        return sum(counts.values())

    assert problems(tally, {"counts": {}, "verbose": True}) == [
        "verbose: unexpected argument (the tool takes: counts)"
    ]


# --- conversions, defaults and null -----------------------------------------------------------


def test_lax_conversions_are_accepted() -> None:
    @tool
    def convert(count: int, ratio: float, flag: bool, day: datetime.date, color: Color) -> None:
        return None

    arguments = convert.validate(
        {"count": "5", "ratio": 2, "flag": "true", "day": "2024-03-01", "color": "blue"}
    )
    assert arguments == {
        "count": 5,
        "ratio": 2.0,
        "flag": True,
        "day": datetime.date(2024, 3, 1),
        "color": Color.BLUE,
    }


def test_omitted_optional_parameters_get_their_defaults() -> None:
    arguments = draw.validate(BASE)
    assert arguments == {
        "point": Point(x=1, y=2),
        "box": Box(width=2.0, label="b"),
        "movie": {"title": "Up"},
        "color": Color.RED,
        "points": None,
        "scale": 1,
        "note": "none",
    }


def test_strict_null_means_use_the_default_at_every_depth() -> None:
    arguments = draw.validate(
        {
            "point": {"x": 1, "y": None},
            "box": {"width": 2, "label": None},
            "movie": {"title": "Up", "year": None},
            "color": None,
            "points": [{"x": 5, "y": None}],
            "scale": None,
        }
    )
    assert arguments["point"] == Point(x=1, y=0)
    assert arguments["box"] == Box(width=2.0, label="box")
    assert arguments["movie"] == {"title": "Up"}
    assert arguments["color"] is Color.RED
    assert arguments["points"] == [Point(x=5, y=0)]
    assert arguments["scale"] == 1


def test_null_stays_null_where_the_type_allows_it() -> None:
    @tool
    def annotate(text: str | None, note: str | None = "n/a") -> str:
        return f"{text}|{note}"

    assert annotate.validate({"text": None, "note": None}) == {"text": None, "note": None}


def test_null_for_a_tuple_item_model_means_its_default() -> None:
    @tool
    def segment(ends: tuple[Point, Point]) -> int:
        return ends[1].x - ends[0].x

    arguments = segment.validate({"ends": [{"x": 1, "y": None}, {"x": 4, "y": 7}]})
    assert arguments == {"ends": (Point(x=1, y=0), Point(x=4, y=7))}


def test_non_strict_form_refuses_null_where_its_schema_does() -> None:
    @tool(strict=False)
    def page(size: int = 10) -> int:
        return size

    assert page.validate({}) == {"size": 10}
    assert problems(page, {"size": None}) == ["size: Input should be a valid integer (got None)"]


def test_missing_required_parameters_are_listed() -> None:
    assert problems(draw, {"box": {}, "movie": {"title": "Up"}}) == [
        "point: missing (required)",
        "box.width: missing (required)",
    ]


# --- constraints ------------------------------------------------------------------------------


def test_constraints_are_enforced_and_every_failure_is_reported() -> None:
    assert problems(constrained, {"count": 0, "code": "A", "mode": "medium"}) == [
        "count: Input should be greater than or equal to 1 (got 0)",
        "code: String should have at least 2 characters (got 'A')",
        "mode: Input should be 'fast' or 'slow' (got 'medium')",
    ]
    assert problems(constrained, {"count": 11, "code": "AB"}) == [
        "count: Input should be less than or equal to 10 (got 11)",
        "code: String should match pattern '^[a-z]+$' (got 'AB')",
    ]
    assert constrained.validate({"count": "10", "code": "ab", "mode": None}) == {
        "count": 10,
        "code": "ab",
        "mode": "fast",
    }


def test_wrong_enum_and_wrong_nested_type_name_their_paths() -> None:
    assert problems(draw, {**BASE, "color": "green", "points": [{"x": "many"}]}) == [
        "color: Input should be 'red' or 'blue' (got 'green')",
        "points[0].x: Input should be a valid integer, unable to parse string as an integer "
        "(got 'many')",
    ]


def test_the_model_reads_every_problem_and_the_tool_does_not_run() -> None:
    ran: list[int] = []

    @tool
    def set_volume(level: Annotated[int, Field(ge=0, le=11)]) -> str:
        ran.append(level)
        return "ok"

    model = ScriptedModel(
        [calls(call("set_volume", level=12, loud=True)), AssistantOutput(content="sorry")]
    )
    result = Agent(model, tools=[set_volume]).run_sync("turn it up")

    assert ran == []
    assert tool_messages(result.messages) == [
        "error[invalid_arguments]: the arguments for 'set_volume' do not match its schema:\n"
        "- level: Input should be less than or equal to 11 (got 12)\n"
        "- loud: unexpected argument (the tool takes: level)"
    ]


# --- FunctionTool with an explicit schema ---------------------------------------------------


class Address(BaseModel):
    city: str
    zip_code: str = Field(pattern=r"^\d{5}$")


class Person(BaseModel):
    """A person to save."""

    name: str = Field(description="Full name")
    age: int = Field(ge=0)
    address: Address
    nickname: str | None = None


def test_function_tool_with_a_pydantic_model_enforces_it_in_full() -> None:
    saved: list[dict[str, Any]] = []

    def save_person(**fields: Any) -> str:
        saved.append(fields)
        return "saved"

    save = FunctionTool("save_person", "Save a person.", Person, save_person)
    assert save.spec.parameters["required"] == ["name", "age", "address", "nickname"]
    assert save.spec.parameters["$defs"]["Address"]["additionalProperties"] is False
    bad = {"name": "Ada", "age": -1, "address": {"city": "X", "zip_code": "1", "po": 1}, "e": 0}
    assert problems(save, bad) == [
        "age: Input should be greater than or equal to 0 (got -1)",
        "address.zip_code: String should match pattern '^\\d{5}$' (got '1')",
        "address.po: unexpected field (not in the schema)",
        "e: unexpected argument (the tool takes: name, age, address, nickname)",
    ]
    model = ScriptedModel(
        [
            calls(
                call(
                    "save_person",
                    name="Ada",
                    age="36",
                    address={"city": "London", "zip_code": "12345"},
                    nickname=None,
                )
            ),
            AssistantOutput(content="done"),
        ]
    )
    result = Agent(model, tools=[save]).run_sync("save Ada")
    assert tool_messages(result.messages) == ["saved"]
    assert saved == [
        {
            "name": "Ada",
            "age": 36,
            "address": Address(city="London", zip_code="12345"),
            "nickname": None,
        }
    ]


SIGNUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "user": {
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email"},
                "role": {"enum": ["admin", "member"]},
            },
            "required": ["email", "role"],
        },
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1},
        "start": {"type": "string", "format": "date"},
        "seats": {"type": "integer", "minimum": 1, "default": 1},
    },
    "required": ["user", "tags", "start"],
}


def echo_arguments(**arguments: Any) -> dict[str, Any]:
    return arguments


def test_dict_schema_is_shown_in_strict_form() -> None:
    signup = FunctionTool("signup", "Sign a user up.", SIGNUP_SCHEMA, echo_arguments)
    assert signup.spec.parameters == {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {
                    "email": {"type": "string", "format": "email"},
                    "role": {"enum": ["admin", "member"]},
                },
                "required": ["email", "role"],
                "additionalProperties": False,
            },
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1},
            "start": {"type": "string", "format": "date"},
            "seats": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": 1},
        },
        "required": ["user", "tags", "start", "seats"],
        "additionalProperties": False,
    }


def test_dict_schema_is_enforced_in_full_with_formats() -> None:
    signup = FunctionTool("signup", "Sign a user up.", SIGNUP_SCHEMA, echo_arguments)
    arguments = {
        "user": {"email": "not-an-email", "role": "owner", "team": "x"},
        "tags": ["toolong", 3],
        "start": "2024-13-45",
        "seats": 0,
        "coupon": "FREE",
    }
    assert problems(signup, arguments) == [
        "coupon: unexpected argument (the tool takes: user, tags, start, seats)",
        "seats: 0 is less than the minimum of 1",
        "start: '2024-13-45' is not a 'date'",
        "tags[0]: 'toolong' is too long",
        "tags[1]: 3 is not of type 'string'",
        "user.team: unexpected field (allowed here: email, role)",
        "user.email: 'not-an-email' is not a 'email'",
        "user.role: 'owner' is not one of ['admin', 'member']",
    ]
    assert problems(signup, {"user": {"role": "admin"}, "tags": [], "start": "2024-01-02"}) == [
        "tags: [] should be non-empty",
        "user.email: missing (required)",
    ]


def test_dict_schema_null_means_absent_and_valid_arguments_pass_through() -> None:
    signup = FunctionTool("signup", "Sign a user up.", SIGNUP_SCHEMA, echo_arguments)
    valid = {"user": {"email": "ada@example.com", "role": "admin"}, "tags": ["a"]}
    assert signup.validate({**valid, "start": "2024-01-02", "seats": None}) == {
        **valid,
        "start": "2024-01-02",
    }


def test_dict_schema_without_strict_keeps_open_objects_open() -> None:
    schema = {"type": "object", "properties": {"meta": {"type": "object"}}}
    loose = FunctionTool("loose", "", schema, echo_arguments, strict=False)
    assert loose.spec.parameters == schema
    assert loose.validate({"meta": {"anything": 1}, "more": 2}) == {
        "meta": {"anything": 1},
        "more": 2,
    }


def test_dict_schema_that_is_not_valid_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 'bad': the parameters are not a valid"):
        FunctionTool("bad", "", {"type": "object", "properties": {"a": {"type": "nope"}}}, print)
    with pytest.raises(ToolDefinitionError, match=r"must describe an object, got type 'string'"):
        FunctionTool("bad", "", {"type": "string"}, print)


def test_dict_schema_with_free_form_object_needs_strict_false() -> None:
    schema = {"type": "object", "properties": {"meta": {"type": "object"}}}
    with pytest.raises(ToolDefinitionError, match=r"tool 'meta' cannot use the strict schema"):
        FunctionTool("meta", "", schema, echo_arguments)
