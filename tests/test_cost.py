"""What a run costs: Usage.cost_usd from genai-prices or the user's prices, in the result,
the run log, ``tooldeck logs`` (``--cost --since``), the totals line and checkpoints."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path

import pytest

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from helpers import call
from test_cli_logs import tooldeck
from tooldeck import Agent, Approve, AssistantOutput, ModelSettings, ScriptedModel, tool
from tooldeck.cli.display import totals_line
from tooldeck.messages import ToolCall, Usage
from tooldeck.models import ModelPrices
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.models.prices import price_of
from tooldeck.runlog import RunLog

PRICES = ModelPrices(input_per_million=2.0, output_per_million=8.0)


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


def turn(
    *, content: str = "", calls: tuple[ToolCall, ...] = (), tokens: tuple[int, int]
) -> AssistantOutput:
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    return AssistantOutput(content=content, tool_calls=calls, usage=usage)


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            turn(calls=(call("add_numbers", "c1", left=2, right=3),), tokens=(1000, 100)),
            turn(content="5", tokens=(2000, 10)),
        ]
    )


def test_a_run_costs_what_its_responses_cost_at_your_prices() -> None:
    agent = Agent(script(), [add_numbers], settings=ModelSettings(prices=PRICES))

    result = agent.run_sync("2 + 3?")

    assert result.usage.cost_usd == pytest.approx((3000 * 2.0 + 110 * 8.0) / 1e6)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3000, 110)


def test_without_a_price_the_cost_is_unknown_not_zero() -> None:
    result = Agent(script(), [add_numbers]).run_sync("2 + 3?")
    assert result.usage.cost_usd is None

    mixed = ScriptedModel(
        [
            AssistantOutput(
                tool_calls=(call("add_numbers", "c1", left=1, right=1),),
                usage=Usage(input_tokens=10, output_tokens=1, cost_usd=0.5),
            ),
            turn(content="2", tokens=(10, 1)),  # this one's price is unknown
        ]
    )
    assert Agent(mixed, [add_numbers]).run_sync("1 + 1?").usage.cost_usd is None


def test_a_sum_of_usages_is_unknown_when_a_part_is_and_empty_usage_adds_nothing() -> None:
    known = Usage(input_tokens=1, requests=1, cost_usd=0.25)
    unknown = Usage(input_tokens=1, requests=1)
    assert (known + known).cost_usd == 0.5
    assert (Usage() + known).cost_usd == 0.25
    assert (known + Usage()).cost_usd == 0.25
    assert (known + unknown).cost_usd is None


def test_your_prices_must_be_numbers_not_below_zero() -> None:
    with pytest.raises(ValueError, match=r"ModelPrices.output_per_million must be a number >= 0"):
        ModelPrices(input_per_million=1.0, output_per_million=-1.0)
    with pytest.raises(ValueError, match=r"ModelPrices.input_per_million .* got '1'"):
        ModelPrices(input_per_million="1", output_per_million=1.0)  # type: ignore[arg-type]


async def test_a_hosted_model_is_priced_from_genai_prices(server: FakeOpenAI, stream: bool) -> None:
    first = completion_body(None, [chat_call("call_1", "add_numbers", '{"left":2,"right":3}')])
    bodies = [completion_body("5", usage=(1000, 50)), first, completion_body("5", usage=(10, 1))]
    for body in bodies:
        server.reply(Reply(events=completion_chunks(body)) if stream else Reply(body=body))
    model = OpenAIChatModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, max_retries=0
    )

    plain = await Agent(model).run("Hi")
    own = await Agent(model, [add_numbers], settings=ModelSettings(prices=PRICES)).run("2 + 3?")

    listed = price_of("openai:gpt-4.1-mini", Usage(input_tokens=1000, output_tokens=50))
    assert listed is not None
    assert listed > 0
    assert plain.usage.cost_usd == pytest.approx(listed)
    assert own.usage.cost_usd == pytest.approx(((20 + 10) * 2.0 + (7 + 1) * 8.0) / 1e6)


def test_a_resumed_run_keeps_what_it_cost_before_the_pause() -> None:

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    model = ScriptedModel(
        [
            turn(calls=(call("delete", "c1", path="a.txt"),), tokens=(1000, 0)),
            turn(content="Done.", tokens=(1000, 0)),
        ]
    )
    agent = Agent(model, [delete], settings=ModelSettings(prices=PRICES))

    paused = agent.run_sync("Delete a.txt")
    assert paused.usage.cost_usd == pytest.approx(0.002)
    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint.to_json(), {"c1": Approve()})

    assert done.usage.cost_usd == pytest.approx(0.004)


def test_the_totals_line_shows_a_known_cost_only() -> None:
    usage = Usage(input_tokens=834, output_tokens=46, requests=2, cost_usd=0.0021)
    assert totals_line(3.37, 3.36, usage, 1, "answer") == (
        "3.37 s total, 3.36 s in the model; 2 model turns, 1 tool call, 834 input / 46 output "
        "tokens, $0.0021; stop: answer"
    )
    unknown = usage.model_copy(update={"cost_usd": None})
    assert "$" not in totals_line(3.37, 3.36, unknown, 1, "answer")


def test_the_run_log_keeps_each_turns_and_each_runs_cost(tmp_path: Path) -> None:
    with RunLog(tmp_path / "logs.db") as log:
        agent = Agent(script(), [add_numbers], settings=ModelSettings(prices=PRICES), run_log=log)
        result = agent.run_sync("2 + 3?")
        (logged,) = log.runs()
        detailed = log.run(logged.run_id)

    assert logged.cost_usd == pytest.approx(result.usage.cost_usd)
    assert [turn.cost_usd for turn in detailed.turns] == pytest.approx([0.0028, 0.00408])


@pytest.fixture
def priced_home(tmp_path: Path) -> Path:
    with RunLog(tmp_path / "logs.db") as log:
        priced = Agent(script(), [add_numbers], settings=ModelSettings(prices=PRICES), run_log=log)
        priced.run_sync("2 + 3?")
        priced.model = script()
        priced.run_sync("Again 2 + 3?")
        Agent(script(), [add_numbers], run_log=log).run_sync("Unpriced 2 + 3?")
        old = Agent(script(), [add_numbers], settings=ModelSettings(prices=PRICES), run_log=log)
        old.run_sync("Old 2 + 3?")
    with sqlite3.connect(tmp_path / "logs.db") as db:  # ten days ago
        db.execute("UPDATE runs SET started_at = started_at - 864000 WHERE prompt LIKE 'Old%'")
    return tmp_path


def test_tooldeck_logs_shows_the_cost_and_sums_it_since_a_time(priced_home: Path) -> None:
    listed = tooldeck(priced_home, "logs")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert "COST" in header.split()
    cells = [re.split(r"\s{2,}", row) for row in rows]
    assert [(row[-2], row[-1]) for row in cells] == [
        ("-", "Unpriced 2 + 3?"),
        ("$0.00688", "Again 2 + 3?"),
        ("$0.00688", "2 + 3?"),
        ("$0.00688", "Old 2 + 3?"),
    ]

    total = tooldeck(priced_home, "logs", "--cost", "--since", "1d")
    assert (total.returncode, total.stderr) == (0, "")
    assert total.stdout == "$0.01376 for 3 runs (1 of unknown cost, not counted)\n"

    everything = tooldeck(priced_home, "logs", "--cost", "--json")
    assert json.loads(everything.stdout) == {
        "runs": 4,
        "cost_usd": pytest.approx(3 * 0.00688),
        "unknown_cost_runs": 1,
    }


def test_tooldeck_logs_refuses_a_since_it_cannot_read(priced_home: Path) -> None:
    done = tooldeck(priced_home, "logs", "--since", "yesterday")
    assert done.returncode == 2
    assert "'yesterday' is no time: give 30m, 12h, 1d, 2w or a date such as 2026-01-31" in (
        done.stderr
    )


def test_genai_prices_knows_no_local_model_and_your_prices_are_per_million() -> None:
    usage = Usage(input_tokens=100, output_tokens=10)
    assert price_of("local:gemma-3-270m", usage) is None
    assert math.isclose(PRICES.cost(usage), (100 * 2.0 + 10 * 8.0) / 1e6)
