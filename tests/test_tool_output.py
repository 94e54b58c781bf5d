"""A tool's return value becomes the text the model reads: str as is, data as JSON, None empty."""

import datetime
import enum
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import answer, call, calls
from tooldeck import Agent, ScriptedModel, ToolResult, tool


class Forecast(BaseModel):
    city: str
    high_c: float
    rain: bool = False


@dataclass
class Stock:
    item: str
    count: int


class Level(enum.Enum):
    LOW = "low"


def observed(value: Any, **options: Any) -> str:
    """What the model reads on its next turn after a tool returned ``value``."""

    @tool(**options)
    def produce() -> Any:
        return value

    model = ScriptedModel([calls(call("produce")), answer("done")])
    Agent(model, tools=[produce]).run_sync("go")
    tool_message = model.requests[1].messages[-1]
    assert tool_message.role == "tool"
    assert tool_message.tool_call_id == "c1"
    return tool_message.content


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param("plain text, as is", "plain text, as is", id="str"),
        pytest.param('{"already": "json"}', '{"already": "json"}', id="str-not-reencoded"),
        pytest.param("", "", id="empty-str"),
        pytest.param(None, "", id="none"),
        pytest.param({"a": 1}, '{"a":1}', id="dict"),
        pytest.param({"name": "Zoë", "ok": True}, '{"name":"Zoë","ok":true}', id="dict-unicode"),
        pytest.param([1, "two", None], '[1,"two",null]', id="list"),
        pytest.param((1, 2), "[1,2]", id="tuple"),
        pytest.param(42, "42", id="int"),
        pytest.param(0, "0", id="zero"),
        pytest.param(2.5, "2.5", id="float"),
        pytest.param(False, "false", id="bool"),
        pytest.param(
            Forecast(city="Oslo", high_c=3.5),
            '{"city":"Oslo","high_c":3.5,"rain":false}',
            id="pydantic-model",
        ),
        pytest.param(Stock(item="tea", count=3), '{"item":"tea","count":3}', id="dataclass"),
        pytest.param(
            {"stock": [Stock("jam", 1)], "level": Level.LOW},
            '{"stock":[{"item":"jam","count":1}],"level":"low"}',
            id="nested-data",
        ),
        pytest.param(datetime.date(2024, 3, 1), '"2024-03-01"', id="date"),
    ],
)
def test_return_value_becomes_observation_text(value: Any, text: str) -> None:
    assert observed(value) == text


def test_dict_is_json_never_a_python_repr() -> None:
    text = observed({"a": 1, "b": None, "c": True})
    assert text == '{"a":1,"b":null,"c":true}'
    assert text != str({"a": 1, "b": None, "c": True})


def test_result_parser_overrides_the_conversion() -> None:
    def as_table(rows: list[dict[str, Any]]) -> str:
        return "\n".join(f"{row['name']}\t{row['qty']}" for row in rows)

    rows = [{"name": "tea", "qty": 2}, {"name": "jam", "qty": 1}]
    assert observed(rows, result_parser=as_table) == "tea\t2\njam\t1"


def test_observation_is_kept_in_the_trace_as_a_successful_result() -> None:
    @tool
    def forecast(city: str) -> Forecast:
        return Forecast(city=city, high_c=21)

    model = ScriptedModel([calls(call("forecast", city="Rome")), answer("warm")])
    result = Agent(model, tools=[forecast]).run_sync("weather in Rome?")
    (trace,) = result.tool_trace
    assert trace.result == ToolResult.success('{"city":"Rome","high_c":21.0,"rain":false}')
    assert trace.error is None


async def test_async_tool_return_value_is_converted_the_same_way() -> None:
    @tool
    async def inventory() -> list[Stock]:
        return [Stock("tea", 3)]

    model = ScriptedModel([calls(call("inventory")), answer("done")])
    result = await Agent(model, tools=[inventory]).run("what is in stock?")
    assert result.messages[-2].content == '[{"item":"tea","count":3}]'
