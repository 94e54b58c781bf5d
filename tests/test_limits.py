"""Limits end a run with LimitExceeded and the partial result, or with one last answer."""

from __future__ import annotations

import asyncio
import time

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, Limits, ScriptedModel, tool
from tooldeck.errors import LimitExceeded
from tooldeck.models.scripted import RecordedRequest


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(retries=1)
def flaky(x: int) -> int:
    """Fail every time."""
    raise RuntimeError("down")


def endless(n: int) -> list[object]:
    return [calls(call("add_numbers", f"c{i}", left=i, right=1)) for i in range(n)]


def test_max_rounds_raises_with_everything_produced() -> None:
    model = ScriptedModel(endless(5))
    with pytest.raises(LimitExceeded, match=r"after 3 rounds \(max_rounds=3\)") as caught:
        Agent(model, [add_numbers], limits=Limits(max_rounds=3)).run_sync("go")
    error = caught.value
    assert error.limit == "max_rounds"
    assert error.result is not None
    assert error.result.stop_reason == "max_rounds"
    assert error.result.answer == ""
    assert [t.result.output for t in error.result.tool_trace] == ["1", "2", "3"]
    assert len(model.requests) == 3


def test_run_agent_has_the_agents_default_of_ten_rounds() -> None:
    from tooldeck import run_agent

    with pytest.raises(LimitExceeded, match=r"\(max_rounds=10\)") as caught:
        run_agent("go", ScriptedModel(endless(12)), [add_numbers])
    assert caught.value.result is not None
    assert len(caught.value.result.tool_trace) == Limits().max_rounds == 10


def test_run_agent_keeps_the_limits_it_is_given_unless_told_max_rounds() -> None:
    from tooldeck import run_agent

    with pytest.raises(LimitExceeded, match=r"\(max_rounds=2\)"):
        run_agent("go", ScriptedModel(endless(5)), [add_numbers], limits=Limits(max_rounds=2))
    with pytest.raises(LimitExceeded, match=r"\(max_rounds=4\)"):
        run_agent(
            "go",
            ScriptedModel(endless(5)),
            [add_numbers],
            max_rounds=4,
            limits=Limits(max_rounds=2),
        )


def test_on_limit_final_answer_asks_once_more_without_tools() -> None:
    model = ScriptedModel([*endless(2), answer("best effort: 2")])
    agent = Agent(model, [add_numbers], limits=Limits(max_rounds=2), on_limit="final_answer")
    result = agent.run_sync("go")
    assert result.answer == "best effort: 2"
    assert result.stop_reason == "max_rounds"
    assert model.requests[-1].settings.tool_choice == "none"
    assert len(result.tool_trace) == 2


def test_max_tool_calls_answers_the_calls_past_it_then_stops() -> None:
    model = ScriptedModel(
        [calls(*(call("add_numbers", f"c{i}", left=i, right=0) for i in range(3)))]
    )
    agent = Agent(model, [add_numbers], limits=Limits(max_tool_calls=2))
    with pytest.raises(LimitExceeded, match="max_tool_calls=2") as caught:
        agent.run_sync("go")
    result = caught.value.result
    assert result is not None
    assert tool_messages(result.messages) == [
        "0",
        "1",
        "error[call_limit]: not run: this run reached its limit of 2 tool calls; "
        "answer with the results you have",
    ]
    assert result.stop_reason == "max_tool_calls"


def test_max_tool_calls_with_final_answer_lets_the_model_answer() -> None:
    model = ScriptedModel([*endless(1), *endless(1), answer("stopped at 1")])
    agent = Agent(model, [add_numbers], limits=Limits(max_tool_calls=1), on_limit="final_answer")
    result = agent.run_sync("go")
    assert result.answer == "stopped at 1"
    assert result.stop_reason == "max_tool_calls"
    assert [t.result.error_code for t in result.tool_trace] == [None, "call_limit"]


def test_max_duration_bounds_a_slow_model_call() -> None:
    async def slow(request: RecordedRequest) -> object:
        await asyncio.sleep(5)
        return answer("late")

    model = ScriptedModel([*endless(1), slow])
    agent = Agent(model, [add_numbers], limits=Limits(max_duration_s=0.2))
    with pytest.raises(LimitExceeded, match=r"max_duration_s=0.2") as caught:
        agent.run_sync("go")
    assert caught.value.limit == "max_duration_s"
    assert caught.value.result is not None
    assert len(caught.value.result.tool_trace) == 1


def test_max_duration_stops_tools_still_running_at_the_limit() -> None:
    started = time.monotonic()

    @tool
    async def nap() -> str:
        """Sleep far past the run's limit."""
        await asyncio.sleep(30)
        return "rested"

    @tool
    def quick() -> str:
        """Answer at once."""
        return "done"

    model = ScriptedModel([calls(call("nap", "c1"), call("quick", "c2")), answer("never asked")])
    agent = Agent(model, [nap, quick], limits=Limits(max_duration_s=0.3))
    with pytest.raises(LimitExceeded, match=r"max_duration_s=0.3") as caught:
        agent.run_sync("go")
    assert time.monotonic() - started < 10
    assert caught.value.limit == "max_duration_s"
    assert len(model.requests) == 1
    result = caught.value.result
    assert result is not None
    assert [(t.call.id, t.result.output) for t in result.tool_trace] == [
        (
            "c1",
            "error[tool_timeout]: not finished: the run reached its time limit (max_duration_s=0.3)",
        ),
        ("c2", "done"),
    ]
    assert tool_messages(result.messages) == [t.result.output for t in result.tool_trace]


def test_tool_retries_stop_a_tool_that_keeps_failing() -> None:
    model = ScriptedModel([calls(call("flaky", f"c{i}", x=i)) for i in range(5)])
    with pytest.raises(
        LimitExceeded,
        match=r"^2 calls of 'flaky' in a row failed \(retries=1\): tool_error x2; the tool itself failed$",
    ) as caught:
        Agent(model, [flaky]).run_sync("go")
    assert caught.value.limit == "retries"
    assert caught.value.result is not None
    assert len(caught.value.result.tool_trace) == 2


def test_a_retries_stop_caused_by_repeats_says_the_tool_did_not_fail() -> None:
    @tool
    def whoami() -> str:
        """Say who the user is."""
        return "ada"

    model = ScriptedModel([calls(call("whoami", f"c{i}")) for i in range(8)])
    agent = Agent(model, [whoami], limits=Limits(repeat_limit=1, tool_retries=2))
    with pytest.raises(LimitExceeded) as caught:
        agent.run_sync("who am I?")
    assert str(caught.value) == (
        "3 calls of 'whoami' in a row failed (retries=2): repeated_call x3; "
        "the model kept repeating a call it had already made (the tool did not fail)"
    )
    assert caught.value.limit == "retries"


def test_a_retries_stop_caused_by_bad_calls_says_the_tool_did_not_run() -> None:
    model = ScriptedModel(
        [calls(call("add_numbers", f"c{i}", left="x", right=i)) for i in range(5)]
    )
    with pytest.raises(LimitExceeded) as caught:
        Agent(model, [add_numbers], limits=Limits(tool_retries=1)).run_sync("go")
    assert str(caught.value) == (
        "2 calls of 'add_numbers' in a row failed (retries=1): invalid_arguments x2; "
        "the model's calls were malformed, so the tool did not run"
    )


def test_agent_tool_retries_apply_to_bad_arguments_too() -> None:
    model = ScriptedModel(
        [calls(call("add_numbers", f"c{i}", left="x", right=i)) for i in range(5)]
    )
    with pytest.raises(LimitExceeded) as caught:
        Agent(model, [add_numbers], limits=Limits(tool_retries=0)).run_sync("go")
    assert caught.value.limit == "retries"
    assert caught.value.result is not None
    assert caught.value.result.tool_trace[0].result.error_code == "invalid_arguments"


def test_a_success_resets_the_failure_count() -> None:
    outputs = [
        calls(call("add_numbers", "a", left="x", right=1)),
        calls(call("add_numbers", "b", left=1, right=1)),
        calls(call("add_numbers", "c", left="y", right=1)),
        answer("ok"),
    ]
    result = Agent(ScriptedModel(outputs), [add_numbers], limits=Limits(tool_retries=1)).run_sync(
        "go"
    )
    assert result.answer == "ok"


def test_limits_refuse_nonsense_values() -> None:
    with pytest.raises(ValueError, match=r"Limits\.max_rounds must be positive, got 0"):
        Limits(max_rounds=0)
    with pytest.raises(ValueError, match="tool_retries must be >= 0"):
        Limits(tool_retries=-1)
