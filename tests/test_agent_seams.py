"""What other rooms build on: a run id the application chooses, RunContext.run_id,
Agent.wrapped (how durable runs make each request and call a step), picklable errors."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, RunContext, ScriptedModel, ToolRegistry, tool
from tooldeck.errors import ArgumentProblem, InvalidArguments, LimitExceeded, ToolExecutionError
from tooldeck.models.base import Model
from tooldeck.results import RecordedError
from tooldeck.tools.registry import ToolEntry


@tool
def whoami(ctx: RunContext[None]) -> str:
    """Say which run and call this is."""
    return f"{ctx.run_id}/{ctx.call_id}"


@tool(requires_approval=True)
def guarded(ctx: RunContext[None]) -> str:
    """Needs approval."""
    return ctx.run_id


def test_a_run_id_given_by_the_application_names_the_run_its_calls_and_its_checkpoint() -> None:
    model = ScriptedModel([calls(call("whoami", "c1"), call("guarded", "c2")), answer("ok")])
    result = Agent(model, [whoami, guarded]).run_sync("Who?", run_id="order-42")
    assert result.run_id == "order-42"
    assert result.tool_trace[0].result.output == "order-42/c1"
    assert result.checkpoint is not None
    assert result.checkpoint.run_id == "order-42"


def test_a_run_in_a_session_keeps_the_run_id_given(tmp_path: Path) -> None:
    from tooldeck.sessions import SQLiteSession

    model = ScriptedModel([calls(call("whoami", "c1")), answer("ok")])
    session = SQLiteSession(tmp_path / "sessions.sqlite", "user-1")
    result = Agent(model, [whoami]).run_sync("Who?", session=session, run_id="order-43")
    assert (result.run_id, result.tool_trace[0].result.output) == ("order-43", "order-43/c1")


def test_without_a_run_id_tools_read_the_random_one() -> None:
    model = ScriptedModel([calls(call("whoami", "c1")), answer("ok")])
    result = Agent(model, [whoami]).run_sync("Who?")
    assert tool_messages(result.messages) == [f"{result.run_id}/c1"]
    assert len(result.run_id) == 32


@pytest.mark.parametrize("bad", ["", 42])
def test_a_run_id_must_be_a_non_empty_string(bad: Any) -> None:
    agent = Agent(ScriptedModel([answer("never")]))
    with pytest.raises(ValueError, match=f"run_id must be a non-empty string, got {bad!r}"):
        agent.run_sync("Hi.", run_id=bad)


class Recording(Model):
    name = "recording"

    def __init__(self, inner: Model, seen: list[str]) -> None:
        self.inner = inner
        self.seen = seen

    async def complete(
        self, messages: Any, tools: Any, settings: Any, instructions: str = ""
    ) -> Any:
        self.seen.append("model")
        return await self.inner.complete(messages, tools, settings, instructions)


def test_wrapped_passes_the_model_and_every_tool_through_the_wrappers() -> None:
    seen: list[str] = []

    class Handler:
        def __init__(self, entry: ToolEntry) -> None:
            self.entry = entry

        def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
            return self.entry.handler.validate(arguments)

        async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> Any:
            seen.append(f"tool {self.entry.name}")
            return await self.entry.handler.run(arguments, context)

    def wrap_tool(entry: ToolEntry) -> ToolEntry:
        return ToolEntry(entry.spec, Handler(entry), entry.options, entry.external, entry.origin)

    @tool
    def later() -> str:
        """Registered after wrapping."""
        return "later"

    registry = ToolRegistry([whoami])
    model = ScriptedModel([calls(call("whoami", "c1")), calls(call("later", "c2")), answer("done")])
    agent = Agent(model, registry)
    twin = agent.wrapped(model=lambda inner: Recording(inner, seen), tool=wrap_tool)
    registry.register(later)
    result = twin.run_sync("Go.", run_id="r1")

    assert tool_messages(result.messages) == ["r1/c1", "later"]
    assert seen == ["model", "tool whoami", "model", "tool later", "model"]
    assert agent.model is model  # the original agent is unchanged
    assert isinstance(twin.model, Recording)


@pytest.mark.parametrize(
    "error",
    [
        LimitExceeded("too many rounds", "max_rounds"),
        ToolExecutionError("boom", "explode"),
        InvalidArguments([ArgumentProblem("left", "Input should be a valid integer")]),
        RecordedError("KeyError", "'missing'"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_errors_survive_pickling(error: Exception) -> None:
    read_back = pickle.loads(pickle.dumps(error))
    assert type(read_back) is type(error)
    assert str(read_back) == str(error)
    assert vars(read_back) == vars(error)
