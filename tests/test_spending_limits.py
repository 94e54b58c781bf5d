"""Token and cost limits (``Limits(max_*_tokens=, max_cost_usd=)``): checked after every
response and before every request; a run at a limit sends nothing more."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from helpers import call, tool_messages
from test_cli_run import SHOP_TOOLS, tooldeck
from tooldeck import Agent, Approve, AssistantOutput, Limits, ModelSettings, ScriptedModel, tool
from tooldeck.errors import LimitExceeded
from tooldeck.messages import ToolCall, Usage
from tooldeck.models import ModelPrices

PRICES = ModelPrices(input_per_million=1_000.0, output_per_million=1_000.0)
"""A dollar per thousand tokens: easy sums."""


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


def turn(
    *calls: ToolCall, content: str = "", tokens: tuple[int, int] = (400, 100)
) -> AssistantOutput:
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    return AssistantOutput(content=content, tool_calls=calls, usage=usage)


def adding(count: int) -> list[AssistantOutput]:
    return [turn(call("add_numbers", f"c{i}", left=i, right=1)) for i in range(count)]


def test_a_run_at_its_token_limit_stops_without_running_the_turns_calls() -> None:
    model = ScriptedModel([*adding(3), turn(content="done")])
    agent = Agent(model, [add_numbers], limits=Limits(max_total_tokens=1000))

    with pytest.raises(LimitExceeded) as raised:
        agent.run_sync("Count")

    assert str(raised.value) == "the run spent 1000 total tokens (max_total_tokens=1000)"
    result = raised.value.result
    assert result is not None
    assert result.stop_reason == "max_tokens"
    assert len(model.requests) == 2  # the second response reached the limit: no third
    assert tool_messages(result.messages) == [
        "1",
        "error[call_limit]: not run: the run spent 1000 total tokens (max_total_tokens=1000)",
    ]
    assert [trace.result.output for trace in result.tool_trace][-1].startswith(
        "error[call_limit]: not run"
    )


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (Limits(max_input_tokens=800), "the run spent 800 input tokens (max_input_tokens=800)"),
        (Limits(max_output_tokens=150), "the run spent 200 output tokens (max_output_tokens=150)"),
    ],
)
def test_input_and_output_tokens_have_their_own_limits(limits: Limits, message: str) -> None:
    agent = Agent(ScriptedModel([*adding(3), turn(content="done")]), [add_numbers], limits=limits)
    with pytest.raises(LimitExceeded, match=re.escape(message)):
        agent.run_sync("Count")


def test_with_on_limit_final_answer_the_last_turns_text_ends_the_run_and_nothing_is_sent() -> None:
    model = ScriptedModel([turn(call("add_numbers", left=1, right=1), content="Adding...")])
    agent = Agent(
        model,
        [add_numbers],
        limits=Limits(max_cost_usd=0.4),
        on_limit="final_answer",
        settings=ModelSettings(prices=PRICES),
    )

    result = agent.run_sync("1 + 1?")

    assert (result.stop_reason, result.answer) == ("max_cost", "Adding...")
    assert result.output is None  # the turn's text is kept, but it is no answer
    assert result.usage.cost_usd == pytest.approx(0.5)
    assert len(model.requests) == 1
    assert tool_messages(result.messages) == [
        "error[call_limit]: not run: the run spent $0.500000 (max_cost_usd=0.4)"
    ]


def test_a_cost_limit_with_an_unknown_price_stops_and_says_why() -> None:
    agent = Agent(ScriptedModel(adding(2)), [add_numbers], limits=Limits(max_cost_usd=1.0))
    with pytest.raises(LimitExceeded) as raised:
        agent.run_sync("Count")
    assert str(raised.value) == (
        "a response's cost is unknown, so max_cost_usd=1.0 cannot be kept: give the model's "
        "prices (ModelSettings(prices=ModelPrices(...)), or --price IN,OUT at the command line)"
    )
    assert raised.value.limit == "max_cost"


def test_a_run_under_its_limits_is_not_touched() -> None:
    model = ScriptedModel([*adding(2), turn(content="done")])
    limits = Limits(max_total_tokens=10_000, max_cost_usd=100.0)
    agent = Agent(model, [add_numbers], limits=limits, settings=ModelSettings(prices=PRICES))
    result = agent.run_sync("Count")
    assert (result.stop_reason, result.answer) == ("answer", "done")
    assert result.usage.cost_usd == pytest.approx(1.5)


def test_a_request_that_would_start_past_a_limit_is_not_sent() -> None:
    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    first = ScriptedModel([turn(call("delete", path="a.txt"), tokens=(900, 100))])
    paused = Agent(first, [delete]).run_sync("Delete a.txt")
    assert paused.checkpoint is not None
    second = ScriptedModel([])  # any request would fail: the script is empty
    limited = Agent(second, [delete], limits=Limits(max_total_tokens=1000))

    with pytest.raises(LimitExceeded, match="max_total_tokens=1000") as raised:
        limited.resume_sync(paused.checkpoint, {"c1": Approve()})

    assert second.requests == []
    assert raised.value.result is not None
    assert tool_messages(raised.value.result.messages) == ["deleted a.txt"]


@pytest.mark.parametrize(
    "field", ["max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost_usd"]
)
def test_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=rf"Limits.{field} must be positive, got 0"):
        Limits(**{field: 0})


def test_tooldeck_run_max_cost_stops_a_hosted_run_and_shows_what_it_spent(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "shop.py").write_text(SHOP_TOOLS, encoding="utf-8")
    first = completion_body(
        None, [chat_call("call_1", "price", '{"item":"tea"}')], usage=(100_000, 0)
    )
    server.reply(Reply(events=completion_chunks(first)))
    done = tooldeck(
        "run", "Tea?", "--tools", "shop", "--model", "openai-chat:gpt-4.1-mini",
        "--base-url", server.url, "--max-cost", "0.01", "--no-log",
        cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test", "TOOLDECK_HOME": str(tmp_path)},
    )  # fmt: skip

    assert done.returncode == 1, done.stderr
    assert "the run spent $0.040000 (max_cost_usd=0.01)" in done.stdout + done.stderr
    assert "100000 input / 0 output tokens, $0.04; stop: max_cost" in done.stdout + done.stderr
    assert len(server.requests) == 1


def test_tooldeck_run_refuses_a_max_cost_that_is_no_amount(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SHOP_TOOLS, encoding="utf-8")
    done = tooldeck("run", "Tea?", "--tools", "shop", "--max-cost", "free", cwd=tmp_path)
    assert done.returncode == 2
    assert "--max-cost: expected US dollars (e.g. 0.50), got 'free'" in done.stderr
