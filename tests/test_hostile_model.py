"""A broken or hostile model never crashes a run: whatever it sends (arguments nested 100,000
levels deep, megabyte strings, text that is not valid Unicode, repeated call ids), the run
ends with a result or a documented RunStopped, every call is answered, and the result can
be saved, shown and loaded back."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from helpers import answer, call, calls, raw_call, tool_messages
from test_output import NativeModel
from tooldeck import Agent, AssistantOutput, Limits, RunResult, ScriptedModel, ToolCall, tool
from tooldeck.cli.display import Console, RunDisplay
from tooldeck.errors import CheckpointError, LimitExceeded, ToolExecutionError
from tooldeck.models.base import TextChunk, ToolCallChunk
from tooldeck.results import Approve, Checkpoint, Reject
from tooldeck.run.events import FinalAnswer, TextDelta, ToolCallDelta


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return text


@tool(strict=False)
def store(data: dict[str, Any]) -> str:
    """Store any JSON object."""
    return "stored"


@tool
def weird() -> str:
    """Return text with a lone surrogate."""
    return "half of a pair: \udc80"


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file (needs approval)."""
    return "deleted"


TOOLS = [echo, store, weird, delete]


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def run(*outputs: AssistantOutput) -> RunResult:
    return Agent(ScriptedModel([*outputs, answer("done")]), TOOLS).run_sync("go")


def test_argument_text_nested_100000_levels_deep_is_invalid_json() -> None:
    result = run(calls(raw_call("echo", "[" * 100_000), raw_call("echo", '{"a":' * 100_000)))
    assert (
        tool_messages(result.messages)
        == [
            "error[invalid_json]: the arguments for 'echo' are nested too deeply to read; "
            "send one flat JSON object"
        ]
        * 2
    )


def test_from_json_keeps_text_too_deep_to_parse_instead_of_raising() -> None:
    text = "[" * 100_000
    assert ToolCall.from_json("c1", "echo", text).raw_arguments == text
    deep_but_parseable = json.dumps({"data": nested(100)})
    assert ToolCall.from_json("c1", "store", deep_but_parseable).raw_arguments is not None


def test_from_json_refuses_the_shortest_texts_that_break_the_rules() -> None:
    too_deep = '{"":' + "[" * 64 + "]" * 64 + "}"  # 65 levels: the shortest such object
    assert ToolCall.from_json("c1", "store", too_deep).raw_arguments == too_deep
    at_the_limit = '{"":' + "[" * 63 + "]" * 63 + "}"
    assert ToolCall.from_json("c1", "store", at_the_limit).raw_arguments is None
    lone_surrogate = '{"s": "\\ud800"}'  # ASCII text, a lone surrogate once parsed
    assert ToolCall.from_json("c1", "echo", lone_surrogate).raw_arguments == lone_surrogate
    paired = '{"s": "\\ud83d\\ude00"}'
    assert ToolCall.from_json("c1", "echo", paired).arguments == {"s": "\U0001f600"}


def test_parsed_arguments_too_deep_to_save_are_refused_and_the_run_saves() -> None:
    result = run(calls(call("store", data={"tree": nested(2000)})))
    assert tool_messages(result.messages) == [
        "error[invalid_json]: the arguments for 'store' are nested more than 64 levels deep; "
        "send a flatter object"
    ]
    assert RunResult.model_validate_json(result.model_dump_json()).answer == "done"


def test_text_that_is_not_valid_unicode_is_repaired_or_refused() -> None:
    model_turn = AssistantOutput(
        content="thinking \ud800", tool_calls=(call("echo", text="\udfff"), call("weird", "c2"))
    )
    result = run(model_turn)
    assert result.messages[1].content == "thinking \ufffd"
    assert tool_messages(result.messages) == [
        "error[invalid_json]: the arguments for 'echo' contain text that is not valid Unicode "
        "(a lone surrogate such as '\\ud800'); send valid UTF-8 text",
        "half of a pair: \ufffd",
    ]
    assert RunResult.model_validate_json(result.model_dump_json()).answer == "done"


def test_repeated_call_ids_are_made_unique_so_each_call_gets_its_own_result() -> None:
    result = run(calls(call("echo", "same", text="one"), call("echo", "same", text="two")))
    tool_turn = [m for m in result.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tool_turn] == [("same", "one"), ("same#2", "two")]
    assert [c.id for c in result.messages[1].tool_calls] == ["same", "same#2"]


def test_huge_names_and_many_problems_are_shortened_in_what_the_model_reads() -> None:
    many = {f"extra_{i}": i for i in range(1000)}
    result = run(calls(call("e" * 1_000_000), call("echo", "c2", text="x", **many)))
    unknown, invalid = tool_messages(result.messages)
    assert unknown.startswith("error[unknown_tool]: there is no tool named 'eeeee")
    assert len(unknown) < 300
    assert invalid.count("\n- ") == 21
    assert invalid.endswith("\n- ... and 980 more")


def test_the_run_display_shortens_a_megabyte_call_to_one_short_line() -> None:
    agent = Agent(ScriptedModel([calls(call("echo", text="y" * 1_000_000)), answer("done")]), TOOLS)
    _, lines = drive(agent, "go")
    (shown,) = [line for line in lines if line.startswith("  → echo(")]
    assert len(shown) < 320
    assert shown.endswith("...")


def test_an_approval_edit_too_deep_to_save_is_refused_before_anything_runs() -> None:
    paused = run(calls(call("delete", path="/tmp/x")))
    assert paused.checkpoint is not None
    (pending,) = paused.checkpoint.pending
    deep_edit = {pending.call.id: Approve(arguments={"path": nested(5000)})}
    with pytest.raises(CheckpointError, match=r"must be JSON data: maximum recursion depth"):
        Agent(ScriptedModel([]), TOOLS).resume_sync(paused.checkpoint, deep_edit)


class Tree(BaseModel):
    """A recursive answer type: any depth is valid for its schema."""

    label: str = ""
    children: list[Tree] = []


def tree_json(depth: int) -> str:
    text = '{"label": "leaf"}'
    for _ in range(depth):
        text = '{"children": [' + text + "]}"
    return text


def test_a_typed_answer_too_deep_to_save_is_an_observation_the_model_corrects() -> None:
    model = NativeModel([answer(tree_json(200)), answer("[" * 100_000), answer(tree_json(3))])
    result = Agent(model, output_type=Tree).run_sync("Draw a tree.")
    assert result.output.children[0].children[0].children[0].label == "leaf"
    corrections = [m.content for m in result.messages if m.role == "user"][1:]
    assert corrections[0] == (
        "error[invalid_output]: the answer's values are nested more than 64 levels deep; "
        "send a flatter object"
    )
    assert corrections[1].startswith("error[invalid_output]: the answer is not valid JSON (")
    assert RunResult.model_validate_json(result.model_dump_json()).answer == result.answer


class ChunkedModel(ScriptedModel):
    """Streams each scripted turn as text and call chunks, as an adapter does."""

    async def stream(self, messages: Any, tools: Any, settings: Any, instructions: str = "") -> Any:
        output = await self.complete(messages, tools, settings, instructions)
        yield TextChunk(output.content)
        for index, made in enumerate(output.tool_calls):
            yield ToolCallChunk(index, made.id, made.name, made.arguments_json)
        yield output


def test_streamed_chunks_that_are_not_valid_unicode_are_repaired_before_they_are_shown() -> None:
    turn = AssistantOutput(
        content="a\ud800", tool_calls=(raw_call("echo\udc80", '{"x": "\udfff"}'),)
    )
    agent = Agent(ChunkedModel([turn, answer("done")]), TOOLS)

    async def deltas() -> list[tuple[str, ...]]:
        seen: list[tuple[str, ...]] = []
        async for event in agent.stream("go", deltas=True):
            if isinstance(event, TextDelta):
                seen.append((event.text,))
            elif isinstance(event, ToolCallDelta):
                seen.append((event.name, event.arguments_delta))
        return seen

    assert asyncio.run(deltas())[:2] == [("a\ufffd",), ("echo\ufffd", '{"x": "\ufffd"}')]


# --- property: any hostile turn ----------------------------------------------------------------

SURROGATES = st.sampled_from(["\ud800", "a\udfffb", "\udc80\ud800"])
HUGE = st.sampled_from([1_000, 300_000]).map(lambda size: "x" * size)
TEXT = st.one_of(st.text(max_size=20), SURROGATES, HUGE)
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=8,
)
LEVELS = st.sampled_from([10, 63, 65, 200, 1000, 5000, 100_000])
DEEP = st.builds(nested, LEVELS.filter(lambda n: n <= 5000), JSON_VALUE)
ARGUMENTS = st.dictionaries(TEXT | st.sampled_from(["text", "data", "path"]), JSON_VALUE | DEEP)
RAW = st.one_of(
    TEXT,
    st.sampled_from(['{"text": "\\ud800"}', "{", "null", '{"text": 1', "{" * 50_000]),
    LEVELS.map(lambda n: '{"data": ' + "[" * n + "1" + "]" * n + "}"),
    LEVELS.map(lambda n: "[" * n),
)
NAMES = st.one_of(st.sampled_from([t.name for t in TOOLS]), TEXT)
IDS = st.one_of(st.sampled_from(["c1", "c2", ""]), TEXT)
CALLS = st.one_of(
    st.builds(ToolCall, id=IDS, name=NAMES, arguments=ARGUMENTS),
    st.builds(ToolCall, id=IDS, name=NAMES, raw_arguments=RAW),
)
TURNS = st.builds(AssistantOutput, content=TEXT, tool_calls=st.lists(CALLS, max_size=4).map(tuple))


def drive(agent: Agent, prompt: str) -> tuple[RunResult, list[str]]:
    """Run through the event stream, showing every event as the CLI does."""
    out = io.StringIO()
    display = RunDisplay(Console(out), "hostile")

    async def consume() -> RunResult:
        result = None
        try:
            async for event in agent.stream(prompt):
                display.show(event)
                if isinstance(event, FinalAnswer):
                    result = event.result
        except (LimitExceeded, ToolExecutionError) as stop:  # the stops a hostile turn may cause
            stopped = stop.result
            if stopped is None:
                raise
            return stopped
        assert result is not None
        display.summary(result, 0.0)
        return result

    return asyncio.run(consume()), out.getvalue().splitlines()


def assert_every_call_answered(result: RunResult) -> None:
    waiting = {pending.call.id for pending in result.pending}
    for index, message in enumerate(result.messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        ids = [c.id for c in message.tool_calls]
        assert len(set(ids)) == len(ids)
        answered = [m.tool_call_id for m in result.messages[index + 1 : index + 1 + len(ids)]]
        if answered != ids:  # only the last turn of a paused or stopped run may wait
            assert index == len(result.messages) - 1, (ids, answered)
            traced = {trace.call.id for trace in result.tool_trace}
            assert set(ids) <= traced | waiting


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(TURNS, min_size=1, max_size=3))
def test_no_hostile_model_turn_crashes_the_run(turns: list[AssistantOutput]) -> None:
    agent = Agent(ScriptedModel([*turns, answer("done")]), TOOLS, limits=Limits(tool_retries=9))
    result, lines = drive(agent, "go")
    assert lines  # the display showed the run
    assert_every_call_answered(result)
    saved = result.model_dump_json()
    assert RunResult.model_validate_json(saved).model_dump_json() == saved
    if result.checkpoint is not None:
        checkpoint = Checkpoint.from_json(result.checkpoint.to_json())
        rejected = {pending.call.id: Reject("no") for pending in checkpoint.pending}
        resumed = Agent(ScriptedModel([answer("ok")]), TOOLS).resume_sync(checkpoint, rejected)
        assert resumed.stop_reason in ("answer", "paused")
