"""A turn answered in parts (some calls before a pause, some after) keeps the model's order
of its calls in ``tool_trace``, as a run that never paused does."""

from __future__ import annotations

from typing import Any

from helpers import answer, call, calls
from tooldeck import Agent, Approve, FinalAnswer, Reject, ScriptedModel, StopReason, tool


@tool(requires_approval=True)
def archive(name: str) -> str:
    """Archive a project."""
    return f"archived {name}"


@tool
def count(n: int) -> int:
    """Count to n."""
    return n


@tool
def free_archive(name: str) -> str:
    """Archive a project (no approval)."""
    return f"archived {name}"


def model_turns(archiving: str) -> ScriptedModel:
    return ScriptedModel(
        [
            calls(
                call(archiving, "a1", name="x"),
                call("count", "b1", n=2),
                call(archiving, "c1", name="y"),
            ),
            answer("done"),
        ]
    )


def order(result: Any) -> list[str]:
    return [trace.call.id for trace in result.tool_trace]


def test_a_resumed_turn_keeps_the_models_call_order_in_the_trace() -> None:
    fresh = Agent(model_turns("free_archive"), [free_archive, count]).run_sync("go")
    assert order(fresh) == ["a1", "b1", "c1"]

    agent = Agent(model_turns("archive"), [archive, count])
    paused = agent.run_sync("go")
    assert paused.stop_reason is StopReason.PAUSED
    assert order(paused) == ["b1"]  # only what ran so far
    assert paused.checkpoint is not None

    done = agent.resume_sync(
        paused.checkpoint.to_json(), {"a1": Approve(), "c1": Reject(message="no")}
    )
    assert done.answer == "done"
    assert order(done) == ["a1", "b1", "c1"]
    assert [trace.result.output for trace in done.tool_trace] == [
        "archived x",
        "2",
        "error[rejected]: no",
    ]
    tool_ids = [m.tool_call_id for m in done.messages if m.role == "tool"]
    assert tool_ids == ["a1", "b1", "c1"]


async def test_a_streamed_resume_keeps_the_order_too() -> None:
    agent = Agent(model_turns("archive"), [archive, count])
    paused = await agent.run("go")
    assert paused.checkpoint is not None
    finals = [
        event
        async for event in agent.resume_stream(
            paused.checkpoint, {"a1": Approve(), "c1": Approve()}
        )
        if isinstance(event, FinalAnswer)
    ]
    assert [order(final.result) for final in finals] == [["a1", "b1", "c1"]]
