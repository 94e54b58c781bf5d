"""A shared Budget across agent tools: the inner run of an agent used as a tool draws on the
outer run's budget, so outer and inner requests together never pass it."""

from __future__ import annotations

import pytest

from helpers import call, calls, tool_messages
from tooldeck import Agent, Approve, AssistantOutput, Limits, ScriptedModel, tool
from tooldeck.errors import LimitExceeded
from tooldeck.messages import Usage
from tooldeck.run.budget import Budget


@tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


@tool(requires_approval=True)
def archive(path: str) -> str:
    """Archive a file."""
    return f"archived {path}"


def used(output: AssistantOutput) -> AssistantOutput:
    return output.model_copy(update={"usage": Usage(input_tokens=40, output_tokens=10)})


def counting(times: int) -> list[AssistantOutput]:
    """An inner model that counts words ``times`` times, then answers."""
    asks = [used(calls(call("word_count", f"w{i}", text="a b c"))) for i in range(times)]
    return [*asks, used(AssistantOutput(content="3 words"))]


def delegating(inner: ScriptedModel) -> tuple[Agent, ScriptedModel]:
    """An outer agent whose model calls the inner agent as the tool ``counter``, then answers."""
    entry = Agent(inner, [word_count]).as_tool(name="counter", description="Counts words.")
    outer = ScriptedModel(
        [
            used(calls(call("counter", "o1", input="Count 'a b c'."))),
            used(AssistantOutput(content="3")),
        ]
    )
    return Agent(outer, [entry]), outer


def test_the_inner_run_of_an_agent_tool_draws_on_the_outer_budget() -> None:
    inner = ScriptedModel(counting(1))
    agent, outer = delegating(inner)
    budget = Budget(max_requests=10, max_total_tokens=10_000)

    result = agent.run_sync("Count 'a b c'.", budget=budget)

    assert result.answer == "3"
    assert (len(outer.requests), len(inner.requests)) == (2, 2)
    assert budget.spent.requests == 4  # 2 of the outer run, 2 of the inner one
    assert budget.spent.total_tokens == 4 * 50


def test_a_budget_spent_inside_an_agent_tool_stops_the_outer_run_too() -> None:
    inner = ScriptedModel(counting(5))
    agent, outer = delegating(inner)
    budget = Budget(max_requests=3)

    with pytest.raises(LimitExceeded) as raised:
        agent.run_sync("Count 'a b c'.", budget=budget)

    assert str(raised.value) == "the shared budget is spent: 3 requests (max_requests=3)"
    result = raised.value.result
    assert result is not None
    assert result.stop_reason == "budget"
    assert (len(outer.requests), len(inner.requests)) == (1, 2)  # 3 together, none past it
    assert budget.spent.requests == 3
    assert tool_messages(result.messages) == [
        "error[tool_error]: the agent 'counter' stopped without an answer (stop reason: "
        "budget): the shared budget is spent: 3 requests (max_requests=3)"
    ]
    inner_trace = result.tool_trace[0].inner_trace
    assert [t.result.output for t in inner_trace] == [  # the turn that spent it is not run
        "3",
        "error[call_limit]: not run: the shared budget is spent: 3 requests (max_requests=3)",
    ]


def test_an_agent_tool_resumed_after_a_pause_draws_on_the_budget_of_the_resume() -> None:
    inner = ScriptedModel(
        [
            used(calls(call("archive", "a1", path="notes.txt"))),
            used(AssistantOutput(content="done")),
        ]
    )
    entry = Agent(inner, [archive]).as_tool(name="archivist", description="Archives files.")
    outer = ScriptedModel(
        [
            used(calls(call("archivist", "o1", input="Archive notes.txt"))),
            used(AssistantOutput(content="ok")),
        ]
    )
    agent = Agent(outer, [entry])
    first = Budget(max_requests=10)
    paused = agent.run_sync("Archive notes.txt", budget=first)
    assert paused.checkpoint is not None
    assert first.spent.requests == 2  # the outer request, and the inner one that paused
    second = Budget(max_requests=10)

    result = agent.resume_sync(paused.checkpoint, {paused.pending[0].id: Approve()}, budget=second)

    assert result.answer == "ok"
    assert second.spent.requests == 2  # the inner run's answer, the outer's answer


def test_without_a_budget_an_agent_tool_runs_as_before() -> None:
    inner = ScriptedModel(counting(1))
    agent, outer = delegating(inner)

    result = agent.run_sync("Count 'a b c'.")

    assert result.answer == "3"
    assert (len(outer.requests), len(inner.requests)) == (2, 2)


def test_an_inner_agent_ending_at_the_budget_with_its_last_text_still_stops_the_outer() -> None:
    inner = ScriptedModel(counting(5))
    entry = Agent(inner, [word_count], on_limit="final_answer").as_tool(
        name="counter", description="Counts words."
    )
    outer = ScriptedModel([used(calls(call("counter", "o1", input="Count"))), *counting(1)])
    budget = Budget(max_requests=3)

    with pytest.raises(LimitExceeded, match=r"shared budget is spent: 3 requests") as raised:
        Agent(outer, [entry]).run_sync("Count", budget=budget)

    assert raised.value.result is not None
    assert raised.value.result.stop_reason == "budget"
    assert (len(outer.requests), len(inner.requests), budget.spent.requests) == (1, 2, 3)


def test_the_inner_run_of_an_agent_tool_spends_what_the_outer_runs_own_limits_left() -> None:
    inner = ScriptedModel(counting(5))
    agent, outer = delegating(inner)
    agent = Agent(outer, agent.tools, limits=Limits(max_total_tokens=120), on_limit="final_answer")

    result = agent.run_sync("Count 'a b c'.")  # 50 tokens a response: 70 left for the inner run

    assert (len(outer.requests), len(inner.requests)) == (1, 2)  # none past the run's limit
    assert result.stop_reason == "max_tokens"
    assert result.usage.total_tokens == 150
    inner_trace = result.tool_trace[0].inner_trace
    assert inner_trace[-1].result.output == (
        "error[call_limit]: not run: the run that made this call spent its limit: "
        "max_total_tokens=120"
    )
