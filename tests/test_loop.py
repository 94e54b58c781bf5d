"""The loop's happy paths: answers, tool rounds, streaming, settings and history."""

from __future__ import annotations

import asyncio

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import (
    Agent,
    AssistantOutput,
    FinalAnswer,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    RunContext,
    ScriptedModel,
    ToolCallFinished,
    ToolCallStarted,
    ToolRegistry,
    run_agent,
    tool,
)
from tooldeck.errors import ScriptExhausted
from tooldeck.messages import Usage
from tooldeck.models.scripted import RecordedRequest


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers.

    Args:
        left: The first number.
        right: The second number.
    """
    return left + right


def test_greeting_needs_no_tool() -> None:
    model = ScriptedModel([answer("Hello! How can I help?")])
    result = run_agent("Hi there", model, ToolRegistry([add_numbers]).view())
    assert result.answer == "Hello! How can I help?"
    assert result.tool_trace == ()
    assert result.stop_reason == "answer"
    assert len(model.requests) == 1
    assert [m.role for m in result.messages] == ["user", "assistant"]


def test_add_then_add_again_walkthrough() -> None:
    model = ScriptedModel(
        [
            calls(call("add_numbers", "c1", left=2, right=3)),
            calls(call("add_numbers", "c2", left=5, right=4)),
            answer("The result is 9."),
        ]
    )
    result = run_agent("Add 2 and 3, then add 4", model, ToolRegistry([add_numbers]).view())
    assert result.answer == "The result is 9."
    assert [t.result.output for t in result.tool_trace] == ["5", "9"]
    assert [t.call.arguments for t in result.tool_trace] == [
        {"left": 2, "right": 3},
        {"left": 5, "right": 4},
    ]
    assert all(t.result.ok and t.error is None for t in result.tool_trace)
    assert len(model.requests) == 3
    # the second request shows the model its first call and the result, paired by id
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert second[1].tool_calls[0].id == second[2].tool_call_id == "c1"
    assert second[2].content == "5"
    assert result.usage.requests == 3


def test_model_sees_tool_specs_and_instructions() -> None:
    model = ScriptedModel([answer("ok")])
    Agent(model, [add_numbers], instructions="Be brief.").run_sync("hi")
    request = model.requests[0]
    assert request.instructions == "Be brief."
    assert request.tool_names == ["add_numbers"]
    assert request.tools[0].parameters["required"] == ["left", "right"]
    assert request.messages == (Message.user("hi"),)


def test_parallel_calls_are_answered_in_the_models_order() -> None:
    order: list[str] = []

    @tool
    async def slow(name: str) -> str:
        """Answer slowly."""
        await asyncio.sleep(0.05)
        order.append(name)
        return f"slow {name}"

    @tool
    async def fast(name: str) -> str:
        """Answer at once."""
        order.append(name)
        return f"fast {name}"

    model = ScriptedModel(
        [calls(call("slow", "a", name="one"), call("fast", "b", name="two")), answer("done")]
    )
    result = Agent(model, [slow, fast]).run_sync("go")
    assert order == ["two", "one"]  # they ran concurrently: the fast one finished first
    assert tool_messages(result.messages) == ["slow one", "fast two"]
    assert [m.tool_call_id for m in result.messages if m.role == "tool"] == ["a", "b"]


def test_parallel_async_calls_overlap_in_time() -> None:
    both_started = asyncio.Event()
    running = 0

    @tool
    async def meet(name: str) -> str:
        """Wait until the other call is running too."""
        nonlocal running
        running += 1
        if running == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), timeout=2)
        return name

    model = ScriptedModel(
        [calls(call("meet", "a", name="x"), call("meet", "b", name="y")), answer("ok")]
    )
    result = Agent(model, [meet]).run_sync("go")
    assert [t.result.output for t in result.tool_trace] == ["x", "y"]


def test_sync_tools_run_in_worker_threads_concurrently() -> None:
    import threading

    barrier = threading.Barrier(2, timeout=2)
    threads: list[str] = []

    @tool
    def blocking(name: str) -> str:
        """Block until the other call arrives."""
        threads.append(threading.current_thread().name)
        barrier.wait()
        return name

    model = ScriptedModel(
        [calls(call("blocking", "a", name="x"), call("blocking", "b", name="y")), answer("ok")]
    )
    result = Agent(model, [blocking]).run_sync("go")
    assert [t.result.output for t in result.tool_trace] == ["x", "y"]
    assert all(name.startswith("tooldeck-tool") for name in threads)


def test_inline_sync_tool_runs_on_the_event_loop_thread() -> None:
    import threading

    seen: list[str] = []

    @tool(inline=True)
    def cheap(value: int) -> int:
        """Double a number."""
        seen.append(threading.current_thread().name)
        return value * 2

    result = Agent(ScriptedModel([calls(call("cheap", value=4)), answer("8")]), [cheap]).run_sync(
        "x"
    )
    assert result.tool_trace[0].result.output == "8"
    assert seen == [threading.current_thread().name]


def test_sequential_tool_never_overlaps_others() -> None:
    active = 0
    overlapped: list[str] = []

    async def busy(name: str) -> str:
        nonlocal active
        active += 1
        await asyncio.sleep(0.02)
        if active > 1 and name.startswith("seq"):
            overlapped.append(name)
        active -= 1
        return name

    @tool
    async def work(name: str) -> str:
        """Do some work."""
        return await busy(name)

    @tool(sequential=True)
    async def exclusive(name: str) -> str:
        """Do work that must run alone."""
        nonlocal active
        if active:
            overlapped.append(name)
        return await busy(name)

    model = ScriptedModel(
        [
            calls(
                call("work", "a", name="w1"),
                call("exclusive", "b", name="seq"),
                call("work", "c", name="w2"),
                call("work", "d", name="w3"),
            ),
            answer("ok"),
        ]
    )
    result = Agent(model, [work, exclusive]).run_sync("go")
    assert overlapped == []
    assert tool_messages(result.messages) == ["w1", "seq", "w2", "w3"]


def test_max_concurrency_caps_calls_running_at_once() -> None:
    active = 0
    peak = 0

    @tool
    async def job(n: int) -> int:
        """A job."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return n

    model = ScriptedModel([calls(*(call("job", f"c{i}", n=i) for i in range(6))), answer("ok")])
    result = Agent(model, [job], max_concurrency=2).run_sync("go")
    assert peak == 2
    assert tool_messages(result.messages) == ["0", "1", "2", "3", "4", "5"]


def test_stream_yields_each_step_in_order() -> None:
    model = ScriptedModel([calls(call("add_numbers", left=1, right=2)), answer("3")])
    agent = Agent(model, [add_numbers])

    async def collect() -> list[object]:
        return [event async for event in agent.stream("1+2?")]

    events = asyncio.run(collect())
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "ModelRequest",
        "ModelResponse",
        "ToolCallStarted",
        "ToolCallFinished",
        "ModelRequest",
        "ModelResponse",
        "FinalAnswer",
    ]
    assert isinstance(events[0], ModelRequest)
    assert events[0].round == 1
    assert isinstance(events[1], ModelResponse)
    assert events[1].output.tool_calls[0].name == "add_numbers"
    assert isinstance(events[2], ToolCallStarted)
    assert events[2].call.arguments == {
        "left": 1,
        "right": 2,
    }
    assert isinstance(events[3], ToolCallFinished)
    assert events[3].trace.result.output == "3"
    assert isinstance(events[-1], FinalAnswer)
    assert events[-1].result.answer == "3"


async def test_run_is_awaitable_and_passes_deps() -> None:
    @tool
    def whoami(ctx: RunContext[dict[str, str]]) -> str:
        """Say who the user is."""
        return f"{ctx.deps['user']} via {ctx.tool_name} ({ctx.call_id}, round {ctx.round})"

    model = ScriptedModel([calls(call("whoami", "call-7")), answer("done")])
    result = await Agent(model, [whoami]).run("who?", deps={"user": "ada"})
    assert result.tool_trace[0].result.output == "ada via whoami (call-7, round 1)"
    assert "ctx" not in model.requests[0].tools[0].parameters["properties"]


def test_forced_tool_choice_applies_to_the_first_turn_only() -> None:
    model = ScriptedModel(
        [
            calls(call("add_numbers", "c1", left=1, right=1)),
            calls(call("add_numbers", "c2", left=2, right=2)),
            answer("4"),
        ]
    )
    settings = ModelSettings(tool_choice="add_numbers", temperature=0.0)
    Agent(model, [add_numbers], settings=settings).run_sync("go")
    choices = [request.settings.tool_choice for request in model.requests]
    assert choices == ["add_numbers", "auto", "auto"]
    assert all(request.settings.temperature == 0.0 for request in model.requests)


def test_required_tool_choice_is_reset_to_auto() -> None:
    model = ScriptedModel([calls(call("add_numbers", left=1, right=1)), answer("2")])
    Agent(model, [add_numbers], settings=ModelSettings(tool_choice="required")).run_sync("go")
    assert [r.settings.tool_choice for r in model.requests] == ["required", "auto"]


def test_history_continues_a_conversation() -> None:
    first = Agent(ScriptedModel([answer("Hi Ada.")])).run_sync("I am Ada")
    model = ScriptedModel([answer("You are Ada.")])
    second = Agent(model).run_sync("Who am I?", history=first.messages)
    assert [m.content for m in model.requests[0].messages] == ["I am Ada", "Hi Ada.", "Who am I?"]
    assert len(second.messages) == 4


def test_usage_adds_up_over_the_run() -> None:
    model = ScriptedModel(
        [
            AssistantOutput(
                tool_calls=(call("add_numbers", left=1, right=2),),
                usage=Usage(input_tokens=100, output_tokens=10),
            ),
            AssistantOutput(content="3", usage=Usage(input_tokens=120, output_tokens=5)),
        ]
    )
    usage = Agent(model, [add_numbers]).run_sync("go").usage
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (220, 15, 2)


def test_script_steps_can_be_functions_of_the_request() -> None:
    def reply(request: RecordedRequest) -> AssistantOutput:
        return answer(f"I saw {len(request.messages)} message(s)")

    assert Agent(ScriptedModel([reply])).run_sync("hi").answer == "I saw 1 message(s)"


def test_exhausted_script_says_so_and_keeps_the_run() -> None:
    model = ScriptedModel([calls(call("add_numbers", left=1, right=2))])
    with pytest.raises(ScriptExhausted) as caught:
        Agent(model, [add_numbers]).run_sync("go")
    assert "has 1 scripted outputs and was asked for output #2" in str(caught.value)
    assert caught.value.result is not None
    assert [t.result.output for t in caught.value.result.tool_trace] == ["3"]
    assert caught.value.result.stop_reason == "model_error"


def test_a_model_that_raises_becomes_a_model_error_with_the_partial_run() -> None:
    def broken(request: RecordedRequest) -> AssistantOutput:
        raise ConnectionError("socket closed")

    model = ScriptedModel([calls(call("add_numbers", left=1, right=2)), broken])
    with pytest.raises(
        ModelError, match="the model call failed: ConnectionError: socket closed"
    ) as caught:
        Agent(model, [add_numbers]).run_sync("go")
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert caught.value.result is not None
    assert len(caught.value.result.messages) == 3


def test_run_sync_reuses_one_event_loop_per_thread() -> None:
    loops: list[object] = []

    @tool
    async def which_loop() -> str:
        """Report the running loop."""
        loops.append(asyncio.get_running_loop())
        return "ok"

    for _ in range(2):
        Agent(ScriptedModel([calls(call("which_loop")), answer("ok")]), [which_loop]).run_sync("x")
    assert loops[0] is loops[1]


def test_sync_tools_still_run_in_a_forked_child() -> None:
    import subprocess
    import sys

    script = """
import os
from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, tool

@tool
def double(n: int) -> int:
    '''Double a number.'''
    return n * 2

def run(n):
    model = ScriptedModel([
        AssistantOutput(tool_calls=(ToolCall(id="c", name="double", arguments={"n": n}),)),
        AssistantOutput(content="ok"),
    ])
    return Agent(model, [double]).run_sync("go").tool_trace[0].result.output

assert run(2) == "4"  # the parent's pool has started its worker thread
pid = os.fork()
if pid == 0:
    os._exit(0 if run(5) == "10" else 1)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=20, check=False
    )
    assert done.stdout.strip() == "child 0", done.stderr[-2000:]
