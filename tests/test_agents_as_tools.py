"""Agents as tools: nested runs, their events, usage, traces, stops and pauses."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import answer, call, calls
from tooldeck import (
    Agent,
    Approve,
    AssistantOutput,
    Checkpoint,
    Event,
    FinalAnswer,
    Limits,
    ModelRequest,
    Reject,
    RunContext,
    ScriptedModel,
    StopReason,
    ToolCall,
    ToolCallFinished,
    ToolResult,
    tool,
)
from tooldeck.errors import CheckpointError, LimitExceeded, ToolDefinitionError
from tooldeck.messages import Usage
from tooldeck.run.events import NestedEvent
from tooldeck.run.middleware import Middleware
from tooldeck.tools.handler import Pause, ToolOutcome


def spent(output: AssistantOutput, tokens: int = 10) -> AssistantOutput:
    """The output with a usage of ``tokens`` in and 1 out."""
    return output.model_copy(update={"usage": Usage(input_tokens=tokens, output_tokens=1)})


def said(text: str, tokens: int = 10) -> AssistantOutput:
    return spent(AssistantOutput(content=text), tokens)


def asked(*items: ToolCall, tokens: int = 10) -> AssistantOutput:
    return spent(calls(*items), tokens)


deleted: list[str] = []


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


@tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


@pytest.fixture(autouse=True)
def _no_deletions_yet() -> None:
    deleted.clear()


def test_the_outer_model_calls_an_agent_like_any_tool_with_one_input() -> None:
    inner_model = ScriptedModel([asked(call("word_count", text="a b c")), said("3 words")])
    counter = Agent(inner_model, [word_count], instructions="Count words.")
    entry = counter.as_tool(name="counter", description="Counts words in a text.")
    outer_model = ScriptedModel(
        [asked(call("counter", "o1", input="How many words in 'a b c'?")), said("It has 3.")]
    )
    result = Agent(outer_model, [entry], instructions="Delegate.").run_sync("Count 'a b c'.")

    assert entry.spec.parameters == {
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "description": "The task for the agent, with everything it needs to know.",
            }
        },
        "required": ["input"],
        "additionalProperties": False,
    }
    assert result.answer == "It has 3."
    assert result.tool_trace[0].result.output == "3 words"
    inner_request = inner_model.requests[0]
    assert inner_request.instructions == "Count words."
    assert [m.content for m in inner_request.messages] == ["How many words in 'a b c'?"]
    assert outer_model.requests[1].messages[-1].content == "3 words"


class Brief(BaseModel):
    topic: str
    words: int


def test_a_pydantic_model_gives_structured_input_sent_as_json() -> None:
    inner_model = ScriptedModel([said("a short text")])
    writer = Agent(inner_model).as_tool(name="writer", description="Writes.", parameters=Brief)
    outer_model = ScriptedModel(
        [
            asked(call("writer", "o1", topic="owls", words="many")),
            asked(call("writer", "o2", topic="owls", words="50")),
            said("done"),
        ]
    )
    result = Agent(outer_model, [writer]).run_sync("write about owls")

    assert result.tool_trace[0].result.output.startswith("error[invalid_arguments]")
    assert json.loads(inner_model.requests[0].messages[0].content) == {"topic": "owls", "words": 50}
    assert result.tool_trace[1].result.output == "a short text"


def test_history_full_shows_the_inner_agent_the_conversation_before_the_call() -> None:
    inner_model = ScriptedModel([said("blue"), said("blue again")])
    inner = Agent(inner_model)
    tools = [
        inner.as_tool(name="alone", description="Sees only its input."),
        inner.as_tool(name="informed", description="Sees everything.", sees="all"),
    ]
    outer_model = ScriptedModel(
        [
            asked(call("alone", "o1", input="color?")),
            asked(call("informed", "o2", input="color?")),
            said("blue"),
        ]
    )
    Agent(outer_model, tools).run_sync("My favourite color is blue.")

    alone, informed = inner_model.requests
    assert [m.content for m in alone.messages] == ["color?"]
    assert [(m.role, m.content) for m in informed.messages] == [
        ("user", "My favourite color is blue."),
        ("assistant", ""),
        ("tool", "blue"),
        ("user", "color?"),
    ]


def test_the_outer_deps_reach_the_inner_run() -> None:
    @tool
    def whoami(ctx: RunContext[dict[str, str]]) -> str:
        """Say who the user is."""
        return ctx.deps["user"]

    inner = Agent(ScriptedModel([asked(call("whoami")), said("ada")]), [whoami])
    outer_model = ScriptedModel([asked(call("helper", input="who?")), said("ada")])
    outer = Agent(outer_model, [inner.as_tool(name="helper", description="Helps.")])

    result = outer.run_sync("who am I?", deps={"user": "ada"})
    assert result.tool_trace[0].inner_trace is not None
    assert result.tool_trace[0].inner_trace[0].result.output == "ada"


def planner_stack(*, after_pause: bool = False) -> tuple[Agent[Any], list[ScriptedModel]]:
    """top -> planner (agent tool) -> researcher (agent tool) -> delete_file (approval).

    ``after_pause``: fresh agents (as in another process) whose models hold only the turns
    left after the pause, so a model asked again for a turn it already took would fail.
    """
    researcher_turns = [
        asked(call("word_count", "r1", text="old notes"), call("delete_file", "r2", path="a.txt")),
        said("deleted a.txt after counting", tokens=7),
    ]
    planner_turns = [asked(call("researcher", "p1", input="clean up a.txt")), said("plan done", 5)]
    top_turns = [asked(call("planner", "t1", input="tidy the project")), said("all tidy", 3)]
    skip = 1 if after_pause else 0
    models = [ScriptedModel(turns[skip:]) for turns in (top_turns, planner_turns, researcher_turns)]
    top_model, planner_model, researcher_model = models
    researcher = Agent(researcher_model, [word_count, delete_file], instructions="Research.")
    planner = Agent(
        planner_model, [researcher.as_tool(name="researcher", description="Finds and cleans.")]
    )
    top = Agent(top_model, [planner.as_tool(name="planner", description="Plans.")])
    return top, models


def kinds(events: list[Event]) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
    """(path, call ids, event type) for each event."""
    shown = []
    for event in events:
        if isinstance(event, NestedEvent):
            shown.append((event.path, event.call_ids, type(event.event).__name__))
        else:
            shown.append(((), (), type(event).__name__))
    return shown


async def test_two_levels_deep_an_approval_pauses_the_top_run_and_resumes_exactly_where_it_was() -> (
    None
):
    top, _ = planner_stack()
    events = [event async for event in top.stream("tidy up")]
    paused = events[-1]
    assert isinstance(paused, FinalAnswer)
    result = paused.result

    assert result.stop_reason is StopReason.PAUSED
    (pending,) = result.pending
    assert (pending.call.name, pending.kind, pending.call.arguments) == (
        "delete_file",
        "approval",
        {"path": "a.txt"},
    )
    assert pending.path == ("planner", "researcher")
    assert pending.call_ids == ("t1", "p1")
    assert pending.id == "t1/p1/r2"
    r, p = ("planner", "researcher"), ("planner",)
    assert kinds(events) == [
        ((), (), "ModelRequest"),
        ((), (), "ModelResponse"),
        ((), (), "ToolCallStarted"),
        (p, ("t1",), "ModelRequest"),
        (p, ("t1",), "ModelResponse"),
        (p, ("t1",), "ToolCallStarted"),
        (r, ("t1", "p1"), "ModelRequest"),
        (r, ("t1", "p1"), "ModelResponse"),
        (r, ("t1", "p1"), "ToolCallStarted"),
        (r, ("t1", "p1"), "ToolCallFinished"),
        (r, ("t1", "p1"), "FinalAnswer"),
        (p, ("t1",), "FinalAnswer"),
        ((), (), "FinalAnswer"),
    ]
    assert result.usage == Usage(input_tokens=30, output_tokens=3, requests=3)
    assert deleted == []

    # a round trip through JSON, and fresh agents (as in another process)
    assert result.checkpoint is not None
    text = result.checkpoint.to_json()
    top, models = planner_stack(after_pause=True)
    resumed = [event async for event in top.resume_stream(text, {pending.id: Approve()})]

    final = resumed[-1]
    assert isinstance(final, FinalAnswer)
    assert final.result.answer == "all tidy"
    assert deleted == ["a.txt"]  # approved once, run once
    assert [len(model.requests) for model in models] == [1, 1, 1]  # no model asked again
    assert [m.content for m in models[2].requests[0].messages if m.role == "tool"] == [
        "2",
        "deleted a.txt",
    ]
    assert kinds(resumed)[:3] == [
        ((), (), "ToolCallStarted"),
        (p, ("t1",), "ToolCallStarted"),
        (r, ("t1", "p1"), "ToolCallStarted"),
    ]
    # usage: the paused legs' 30/3/3, then one answer per level (7 + 5 + 3 tokens)
    assert final.result.usage == Usage(input_tokens=45, output_tokens=6, requests=6)
    top_trace = final.result.tool_trace[0]
    assert top_trace.result.output == "plan done"
    assert top_trace.inner_trace is not None
    planner_trace = top_trace.inner_trace[0]
    assert planner_trace.result.output == "deleted a.txt after counting"
    assert planner_trace.inner_trace is not None
    assert [t.result.output for t in planner_trace.inner_trace] == ["2", "deleted a.txt"]


def paused_run() -> tuple[Agent[Any], Checkpoint, list[ScriptedModel]]:
    top, models = planner_stack()
    result = top.run_sync("tidy up")
    assert result.checkpoint is not None
    return top, result.checkpoint, models


def test_a_bare_inner_call_id_is_accepted_when_it_is_unique() -> None:
    _, checkpoint, _ = paused_run()
    top, _ = planner_stack(after_pause=True)
    result = top.resume_sync(checkpoint, {"r2": Approve()})
    assert result.answer == "all tidy"
    assert deleted == ["a.txt"]


def cleaner(name: str) -> Any:
    """An agent tool whose model deletes one file, with the call id every provider starts at."""
    model = ScriptedModel([asked(call("delete_file", "c1", path=f"{name}.txt")), said("gone")])
    return Agent(model, [delete_file]).as_tool(name=name, description="Deletes a file.")


def test_a_bare_call_id_that_several_pending_calls_share_is_refused() -> None:
    outer_model = ScriptedModel(
        [
            asked(
                call("a", "o1", input="go"),
                call("b", "o2", input="go"),
                call("delete_file", "c1", path="c.txt"),
            )
        ]
    )
    outer = Agent(outer_model, [cleaner("a"), cleaner("b"), delete_file])
    result = outer.run_sync("go")
    assert [p.id for p in result.pending] == ["o1/c1", "o2/c1", "c1"]
    assert result.checkpoint is not None

    with pytest.raises(CheckpointError) as caught:
        outer.resume_sync(result.checkpoint, {"x": Approve()})
    assert str(caught.value) == (
        "no pending call with id 'x'; pending: 'o1/c1' (delete_file, approval), "
        "'o2/c1' (delete_file, approval), 'c1' (delete_file, approval)"
    )
    # "c1" is the full id of the outer call: an exact id wins over a bare one
    again = outer.resume_sync(result.checkpoint, {"c1": Reject("no")})
    assert [p.id for p in again.pending] == ["o1/c1", "o2/c1"]
    assert again.checkpoint is not None
    with pytest.raises(CheckpointError) as caught:
        # outside the outer turn, "c1" now names two inner calls
        outer.resume_sync(again.checkpoint, {"c1": Approve()})
    assert str(caught.value) == (
        "call id 'c1' is ambiguous: pending calls 'o1/c1', 'o2/c1' have it (made inside agent "
        "tools); key the decision by PendingCall.id"
    )
    assert deleted == []


def test_partial_decisions_inside_a_nested_run_pause_again_without_asking_a_model() -> None:
    inner_model = ScriptedModel(
        [
            asked(call("delete_file", "c1", path="a"), call("delete_file", "c2", path="b")),
            said("both handled"),
        ]
    )
    inner = Agent(inner_model, [delete_file])
    outer_model = ScriptedModel([asked(call("cleaner", "o1", input="delete a and b")), said("ok")])
    outer = Agent(outer_model, [inner.as_tool(name="cleaner", description="Deletes files.")])
    first = outer.run_sync("clean")
    assert [p.id for p in first.pending] == ["o1/c1", "o1/c2"]
    assert first.checkpoint is not None

    second = outer.resume_sync(first.checkpoint, {"o1/c1": Approve()})
    assert second.stop_reason is StopReason.PAUSED
    assert [p.id for p in second.pending] == ["o1/c2"]
    assert deleted == ["a"]
    assert (len(outer_model.requests), len(inner_model.requests)) == (1, 1)

    assert second.checkpoint is not None
    third = outer.resume_sync(second.checkpoint, {"o1/c2": Reject("keep b")})
    assert third.answer == "ok"
    assert deleted == ["a"]
    assert inner_model.requests[1].messages[-1].content == "error[rejected]: keep b"
    assert third.usage.requests == 4


def test_a_paused_agent_call_and_a_plain_call_in_one_outer_turn() -> None:
    inner = Agent(
        ScriptedModel([asked(call("delete_file", "c1", path="a")), said("gone")]), [delete_file]
    )
    outer_model = ScriptedModel(
        [
            asked(call("cleaner", "o1", input="delete a"), call("word_count", "o2", text="x y")),
            said("done"),
        ]
    )
    outer = Agent(outer_model, [inner.as_tool(name="cleaner", description="."), word_count])
    first = outer.run_sync("go")
    assert [t.result.output for t in first.tool_trace] == ["2"]  # the plain call ran
    assert first.checkpoint is not None

    final = outer.resume_sync(first.checkpoint, {"o1/c1": Approve()})
    tool_messages = [(m.tool_call_id, m.content) for m in final.messages if m.role == "tool"]
    assert tool_messages == [("o1", "gone"), ("o2", "2")]  # the model's order, once each


def test_edits_inside_the_nested_checkpoint_are_refused() -> None:
    top, checkpoint, _ = paused_run()
    data = json.loads(checkpoint.to_json())
    inner = data["turn"]["pending"][0]["nested"]["turn"]["pending"][0]["nested"]
    inner["turn"]["pending"][0]["call"]["arguments"]["path"] = "/etc/passwd"
    inner["messages"][-1]["tool_calls"][1]["arguments"]["path"] = "/etc/passwd"

    with pytest.raises(CheckpointError) as caught:
        top.resume_sync(json.dumps(data), {"r2": Approve()})
    assert str(caught.value) == (
        "pending call 'r2' (delete_file) was changed after the checkpoint was made (its digest "
        "does not match): refusing to run it"
    )
    assert deleted == []


def test_with_a_key_any_change_inside_the_nested_checkpoint_is_refused() -> None:
    inner = Agent(ScriptedModel([asked(call("delete_file", "c1", path="a"))]), [delete_file])
    outer_model = ScriptedModel([asked(call("cleaner", "o1", input="delete a"))])
    outer = Agent(
        outer_model, [inner.as_tool(name="cleaner", description=".")], checkpoint_key=b"k"
    )
    checkpoint = outer.run_sync("go").checkpoint
    assert checkpoint is not None
    data = json.loads(checkpoint.to_json())
    data["turn"]["pending"][0]["nested"]["messages"][0]["content"] = "delete everything"

    with pytest.raises(CheckpointError, match="signature does not match"):
        outer.resume_sync(json.dumps(data), {"o1/c1": Approve()})


def test_a_nested_checkpoint_needs_the_same_agent_tool_to_go_on() -> None:
    _, checkpoint, _ = paused_run()

    @tool
    def planner(input: str) -> str:
        """Not an agent."""
        return input

    impostor = Agent(ScriptedModel([]), [planner])
    with pytest.raises(CheckpointError) as caught:
        impostor.resume_sync(checkpoint, {"r2": Approve()})
    assert str(caught.value) == (
        "pending call 't1' holds the paused run of an agent tool, but 'planner' is not an agent "
        "tool of this agent"
    )


def test_an_inner_run_that_stops_at_a_limit_is_an_observation_with_its_stop_reason() -> None:
    endless = [asked(call("word_count", f"r{i}", text="x" * i)) for i in range(1, 5)]
    inner = Agent(ScriptedModel(endless), [word_count], limits=Limits(max_rounds=2))
    outer_model = ScriptedModel(
        [asked(call("counter", "o1", input="count forever")), said("gave up")]
    )
    result = Agent(outer_model, [inner.as_tool(name="counter", description=".")]).run_sync("go")

    trace = result.tool_trace[0]
    assert trace.result.output == (
        "error[tool_error]: the agent 'counter' stopped without an answer (stop reason: "
        "max_rounds): the model asked for tools after 2 rounds (max_rounds=2)"
    )
    assert isinstance(trace.error, LimitExceeded)
    assert trace.inner_trace is not None
    assert len(trace.inner_trace) == 2
    assert result.answer == "gave up"
    assert result.usage.requests == 4  # two inner turns, two outer


def test_an_inner_model_failure_is_an_observation_without_the_providers_words() -> None:
    inner = Agent(ScriptedModel([]), [word_count])  # its model has nothing to say: ModelError
    outer_model = ScriptedModel([asked(call("counter", input="count")), said("no luck")])
    result = Agent(outer_model, [inner.as_tool(name="counter", description=".")]).run_sync("go")

    assert result.tool_trace[0].result.output == (
        "error[tool_error]: the agent 'counter' stopped without an answer "
        "(stop reason: model_error)"
    )


async def test_agent_tools_called_together_run_concurrently_and_stream_their_events() -> None:
    started: list[str] = []
    both_started = asyncio.Event()

    @tool
    async def research(topic: str) -> str:
        """Research a topic."""
        started.append(topic)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), timeout=30)
        return f"notes on {topic}"

    def researcher(topic: str) -> Any:
        model = ScriptedModel([asked(call("research", topic=topic)), said(f"{topic} done")])
        return Agent(model, [research]).as_tool(name=f"{topic}_researcher", description=".")

    outer_model = ScriptedModel(
        [
            asked(
                call("owls_researcher", "o1", input="owls"),
                call("bats_researcher", "o2", input="bats"),
            ),
            said("both done"),
        ]
    )
    outer = Agent(outer_model, [researcher("owls"), researcher("bats")])
    events = [event async for event in outer.stream("research owls and bats")]

    nested = [e for e in events if isinstance(e, NestedEvent)]
    assert {e.call_id for e in nested} == {"o1", "o2"}
    assert sorted(started) == ["bats", "owls"]
    finished = [e.trace.call.id for e in events if isinstance(e, ToolCallFinished)]
    assert sorted(finished) == ["o1", "o2"]
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert [m.content for m in final.result.messages if m.role == "tool"] == [
        "owls done",
        "bats done",
    ]


def test_an_agent_tool_past_its_timeout_is_stopped() -> None:
    @tool
    async def slow() -> str:
        """Take forever."""
        await asyncio.sleep(60)
        return "never"

    inner = Agent(ScriptedModel([asked(call("slow")), said("never")]), [slow])
    entry = inner.as_tool(name="slowpoke", description=".", timeout=0.2)
    outer_model = ScriptedModel([asked(call("slowpoke", input="go")), said("too slow")])
    result = Agent(outer_model, [entry]).run_sync("go")

    assert result.tool_trace[0].result.output == (
        "error[tool_timeout]: 'slowpoke' did not finish within 0.2 s and was stopped; try "
        "smaller inputs or another approach"
    )


def test_middleware_sees_an_agent_tools_call_once_across_a_pause() -> None:
    log: list[str] = []

    class Log(Middleware):
        async def before_tool_call(
            self, call: ToolCall, ctx: RunContext[Any]
        ) -> ToolCall | ToolResult:
            log.append(f"before {call.name}")
            return call

        async def after_tool_call(
            self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
        ) -> ToolResult:
            log.append(f"after {call.name}: {result.output}")
            return result

    inner = Agent(
        ScriptedModel([asked(call("delete_file", "c1", path="a")), said("gone")]), [delete_file]
    )
    outer_model = ScriptedModel([asked(call("cleaner", "o1", input="delete a")), said("ok")])
    outer = Agent(outer_model, [inner.as_tool(name="cleaner", description=".")], middleware=[Log()])
    first = outer.run_sync("go")
    assert log == ["before cleaner"]
    assert first.checkpoint is not None
    outer.resume_sync(first.checkpoint, {"o1/c1": Approve()})
    assert log == ["before cleaner", "after cleaner: gone"]


def test_as_tool_refuses_what_it_cannot_use() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ValueError, match="agent tool 'x': sees must be one of 'none', 'all'"):
        agent.as_tool(name="x", description=".", sees="some")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="parameters must be a pydantic model class"):
        agent.as_tool(name="x", description=".", parameters={"type": "object"})  # type: ignore[arg-type]


def test_the_handler_keeps_the_one_tool_contract_outside_a_loop() -> None:
    inner = Agent(ScriptedModel([said("hello")]))
    entry = inner.as_tool(name="greeter", description=".")
    context: RunContext[None] = RunContext("c1", "greeter", None)
    arguments = entry.handler.validate({"input": "hi"})
    outcome = asyncio.run(entry.handler.run(arguments, context))
    assert isinstance(outcome, ToolOutcome)
    assert (outcome.result, outcome.inner_trace) == (ToolResult.success("hello"), ())


def test_a_paused_inner_run_is_a_pause_any_handler_could_return() -> None:
    inner = Agent(ScriptedModel([asked(call("delete_file", "c1", path="a"))]), [delete_file])
    entry = inner.as_tool(name="cleaner", description=".")
    context: RunContext[None] = RunContext("o1", "cleaner", None, run_id="outer")
    outcome = asyncio.run(entry.handler.run({"input": "delete a"}, context))
    assert isinstance(outcome, Pause)
    assert [p.call.name for p in outcome.state.pending] == ["delete_file"]


def test_inner_requests_name_the_inner_tools_and_one_final_answer_ends_the_stream() -> None:
    _, checkpoint, _ = paused_run()
    top, _ = planner_stack(after_pause=True)

    async def resume() -> list[Event]:
        return [event async for event in top.resume_stream(checkpoint, {"r2": Approve()})]

    events = asyncio.run(resume())

    finals = [event for event in events if isinstance(event, FinalAnswer)]
    assert finals == [events[-1]]  # inner final answers come wrapped, never bare
    inner_requests = [
        (event.path, event.event.tool_names)
        for event in events
        if isinstance(event, NestedEvent) and isinstance(event.event, ModelRequest)
    ]
    assert inner_requests == [
        (("planner", "researcher"), ("word_count", "delete_file")),
        (("planner",), ("researcher",)),
    ]


def test_the_cli_asks_about_a_nested_call_naming_its_agent_and_keys_it_by_its_full_id() -> None:
    from tooldeck.cli.approve import Approver

    inner = Agent(ScriptedModel([asked(call("delete_file", "c1", path="a"))]), [delete_file])
    outer_model = ScriptedModel([asked(call("cleaner", "o1", input="delete a"))])
    paused = Agent(outer_model, [inner.as_tool(name="cleaner", description=".")]).run_sync("go")
    questions: list[str] = []

    def read(question: str) -> str:
        questions.append(question)
        return "y"

    decisions = Approver(interactive=True, read=read).decide(paused.pending)
    assert decisions == {"o1/c1": Approve(by="cli")}
    assert questions == ['approve cleaner: delete_file(path="a")? [y]es / [n]o / [e]dit ']


def test_an_agent_tool_sees_what_a_handoff_would_and_the_old_keyword_still_works() -> None:
    inner_model = ScriptedModel([answer("noted"), answer("noted")])
    inner = Agent(inner_model)
    with pytest.warns(
        DeprecationWarning, match=r"as_tool\(history=...\) is now as_tool\(sees=...\)"
    ):
        full = inner.as_tool(name="full", description="Sees all.", history="full")
    last = inner.as_tool(name="last", description="Sees the last question.", sees="last_user")
    outer = Agent(
        ScriptedModel(
            [
                calls(call("full", "o1", input="note it")),
                calls(call("last", "o2", input="again")),
                answer("ok"),
            ]
        ),
        [full, last],
    )
    outer.run_sync("Remember the milk")
    first, second = inner_model.requests
    assert [m.content for m in first.messages] == ["Remember the milk", "note it"]
    assert [m.content for m in second.messages][-2:] == ["Remember the milk", "again"]
    assert len(second.messages) == 2  # the outer turns before it are not shown
