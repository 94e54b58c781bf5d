"""Capabilities: the one extension point (tooldeck.run.capabilities), at each of its points.

The loop's logic, so ScriptedModel; the checkpoint seam goes through JSON and another
Agent, as a resume in another process does.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from helpers import answer, call, calls
from tooldeck import Agent, Approve, ScriptedModel, ToolCall, ToolResult, tool
from tooldeck.errors import ErrorCode, GuardrailTripped, MiddlewareError
from tooldeck.messages import AssistantOutput
from tooldeck.results import Checkpoint, RunResult, StopReason
from tooldeck.run.capabilities import (
    CallNext,
    Capability,
    LargeOutputs,
    ModelCall,
    RequestContext,
    RunView,
)
from tooldeck.run.events import Event, FinalAnswer, ToolCallFinished
from tooldeck.run.guardrails import Guardrails
from tooldeck.run.history import KeepLastExchanges
from tooldeck.run.middleware import Middleware
from tooldeck.run.observer import Observing
from tooldeck.run.untrusted import UntrustedPolicy
from tooldeck.tools.context import RunContext
from tooldeck.tools.guardrails import GuardrailResult


@tool
def add(left: int, right: int) -> int:
    """Add two numbers."""
    return left + right


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def today() -> str:
    """The day of the week today."""
    return "Saturday"


class Calendar(Capability):
    """A tool and an instruction, together."""

    def tools(self) -> list[Any]:
        return [today]

    def instructions(self, ctx: RunView) -> str:
        return f"Check the day first (run {ctx.run_id[:4]}...)."


def test_a_capability_adds_its_tools_and_instructions_to_every_request() -> None:
    model = ScriptedModel([calls(call("today")), answer("It is Saturday.")])
    agent = Agent(model, [add], instructions="Be brief.", capabilities=[Calendar()])

    result = agent.run_sync("What day is it?")

    assert result.answer == "It is Saturday."
    assert result.tool_trace[0].result.output == "Saturday"
    for request in model.requests:
        assert [spec.name for spec in request.tools] == ["add", "today"]
        assert request.instructions.startswith("Be brief.\n\nCheck the day first (run ")


def test_a_capability_tool_named_as_an_agent_tool_is_refused_naming_both() -> None:
    @tool(name="today")
    def other_today() -> str:
        """Another."""
        return "Monday"

    with pytest.raises(Exception, match="today"):
        Agent(ScriptedModel([]), [other_today], capabilities=[Calendar()])


class Weekdays(Capability):
    """Refuses bookings on weekends: a call hook answering in the tool's place."""

    async def wrap_call(
        self, call: ToolCall, ctx: RunContext[Any], call_next: CallNext
    ) -> ToolResult:
        if call.name == "book" and call.arguments.get("day") in ("Saturday", "Sunday"):
            return ToolResult.failure(ErrorCode.REFUSED, "no bookings on weekends")
        return await call_next(call)


def test_a_call_hook_answers_in_the_tools_place_and_the_tool_does_not_run() -> None:
    booked: list[str] = []

    @tool
    def book(day: str) -> str:
        """Book a table."""
        booked.append(day)
        return f"booked {day}"

    model = ScriptedModel(
        [calls(call("book", "a", day="Sunday"), call("book", "b", day="Monday")), answer("ok")]
    )
    result = Agent(model, [book], capabilities=[Weekdays()]).run_sync("book")

    assert booked == ["Monday"]
    outputs = [trace.result.output for trace in result.tool_trace]
    assert outputs == ["error[refused]: no bookings on weekends", "booked Monday"]


class Doubling(Capability):
    """Changes the arguments on the way in and the result on the way out."""

    async def wrap_call(
        self, call: ToolCall, ctx: RunContext[Any], call_next: CallNext
    ) -> ToolResult:
        doubled = {key: value * 2 for key, value in call.arguments.items()}
        result = await call_next(call.model_copy(update={"arguments": doubled}))
        return ToolResult.success(f"{result.output} (doubled)")


def test_a_call_hook_changes_arguments_and_result() -> None:
    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("6")])
    result = Agent(model, [add], capabilities=[Doubling()]).run_sync("1+2")
    assert result.tool_trace[0].result.output == "6 (doubled)"
    assert model.requests[1].messages[-1].content == "6 (doubled)"


class Corrupting(Capability):
    async def wrap_call(
        self, call: ToolCall, ctx: RunContext[Any], call_next: CallNext
    ) -> ToolResult:
        return await call_next(call.model_copy(update={"arguments": {"left": "x"}}))


def test_arguments_a_call_hook_breaks_end_the_run_naming_it() -> None:
    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("never")])
    with pytest.raises(MiddlewareError, match="middleware Corrupting changed the arguments") as e:
        Agent(model, [add], capabilities=[Corrupting()]).run_sync("1+2")
    assert (e.value.middleware, e.value.hook) == ("Corrupting", "wrap_call")
    assert e.value.result is not None
    assert e.value.result.stop_reason == "middleware_error"


class Layer(Capability):
    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag, self.log = tag, log

    async def before_request(
        self, request: ModelCall, ctx: RequestContext
    ) -> ModelCall | AssistantOutput:
        self.log.append(f"{self.tag}>request")
        return request

    async def after_response(
        self, request: ModelCall, output: AssistantOutput, ctx: RequestContext
    ) -> AssistantOutput:
        self.log.append(f"{self.tag}<response")
        return output

    async def wrap_call(
        self, call: ToolCall, ctx: RunContext[Any], call_next: CallNext
    ) -> ToolResult:
        self.log.append(f"{self.tag}>call")
        result = await call_next(call)
        self.log.append(f"{self.tag}<call")
        return result


def test_hooks_nest_in_list_order_with_middleware_among_them() -> None:
    log: list[str] = []

    class Old(Middleware):
        async def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> ToolCall:
            log.append("middleware>call")
            return call

    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    agent = Agent(model, [add], middleware=[Old()], capabilities=[Layer("a", log), Layer("b", log)])
    agent.run_sync("1+2")

    assert log[:8] == [
        "a>request",
        "b>request",
        "b<response",
        "a<response",
        "middleware>call",
        "a>call",
        "b>call",
        "b<call",
    ]
    assert log[8] == "a<call"


class Signed(Capability):
    """Sees the answer and changes it."""

    async def on_answer(self, result: RunResult[Any], ctx: RunView) -> RunResult[Any]:
        return result.model_copy(update={"output": f"{result.output} — {ctx.agent}"})


class NoApologies(Capability):
    async def on_answer(self, result: RunResult[Any], ctx: RunView) -> RunResult[Any]:
        if "sorry" in str(result.output):
            raise GuardrailTripped("the answer apologises", "no_apologies", "output")
        return result


def test_an_answer_hook_changes_the_answer_or_stops_the_run() -> None:
    signed = Agent(ScriptedModel([answer("Hi")]), name="desk", capabilities=[Signed()])
    assert signed.run_sync("hello").output == "Hi — desk"

    stopped = Agent(ScriptedModel([answer("sorry, no")]), capabilities=[NoApologies()])
    with pytest.raises(GuardrailTripped) as error:
        stopped.run_sync("hello")
    assert error.value.result is not None
    assert error.value.result.stop_reason == StopReason.GUARDRAIL


class Counting(Capability):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_event(self, event: Event, ctx: RunView) -> None:
        self.seen.append(type(event).__name__)


def test_an_event_hook_sees_every_event_of_the_run() -> None:
    counting = Counting()
    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    agent = Agent(model, [add], capabilities=[counting])

    async def collect() -> list[str]:
        return [type(event).__name__ async for event in agent.stream("1+2")]

    import asyncio

    streamed = asyncio.run(collect())
    assert counting.seen == streamed
    assert streamed[-1] == "FinalAnswer"
    assert "ToolCallFinished" in streamed


class Tally(Capability):
    """Counts the calls of each run in its own state."""

    def initial_state(self) -> dict[str, Any]:
        return {"calls": 0}

    async def wrap_call(
        self, call: ToolCall, ctx: RunContext[Any], call_next: CallNext
    ) -> ToolResult:
        state = self.state(ctx)
        state["calls"] += 1
        result = await call_next(call)
        return ToolResult.success(f"{result.output} (call {state['calls']} of this run)")


def test_state_is_per_run_and_travels_in_the_checkpoint_to_another_agent() -> None:
    turns = [
        calls(call("add", "c1", left=1, right=1)),
        calls(call("refund", "c2", order="A1")),
        calls(call("add", "c3", left=2, right=2)),
        answer("done"),
    ]
    first = Agent(ScriptedModel(turns[:2]), [add, refund], capabilities=[Tally()])
    paused = first.run_sync("go")
    assert paused.stop_reason == StopReason.PAUSED
    assert paused.checkpoint is not None
    stored = paused.checkpoint.to_json()
    assert '"capability_states":{"Tally":{"calls":1}}' in stored

    second = Agent(ScriptedModel(turns[2:]), [add, refund], capabilities=[Tally()])
    resumed = second.resume_sync(Checkpoint.from_json(stored), {"c2": Approve()})
    outputs = [trace.result.output for trace in resumed.tool_trace]
    assert outputs == [
        "2 (call 1 of this run)",
        "refunded A1 (call 2 of this run)",
        "4 (call 3 of this run)",
    ]
    fresh = Agent(
        ScriptedModel([calls(call("add", left=0, right=0)), answer("0")]),
        [add],
        capabilities=[Tally()],
    )
    assert fresh.run_sync("again").tool_trace[0].result.output == "0 (call 1 of this run)"


def test_a_signed_checkpoint_covers_the_capability_states() -> None:
    key = b"k" * 32
    agent = Agent(
        ScriptedModel([calls(call("refund", "c1", order="A1"))]),
        [refund],
        capabilities=[Tally()],
        checkpoint_key=key,
    )
    paused = agent.run_sync("go")
    assert paused.checkpoint is not None
    changed = paused.checkpoint.to_json().replace('"calls":0', '"calls":99')
    assert changed != paused.checkpoint.to_json()
    from tooldeck.errors import CheckpointError

    with pytest.raises(CheckpointError):
        agent.resume_sync(Checkpoint.from_json(changed), {"c1": Approve()})


def test_state_asked_of_a_capability_that_keeps_none_says_so() -> None:
    class Stateless(Capability):
        async def wrap_call(
            self, call: ToolCall, ctx: RunContext[Any], call_next: CallNext
        ) -> ToolResult:
            self.state(ctx)
            return await call_next(call)

    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    with pytest.raises(MiddlewareError, match="Stateless keeps no state in this run"):
        Agent(model, [add], capabilities=[Stateless()]).run_sync("1+2")


def test_a_hook_that_must_be_async_and_is_not_is_refused_as_the_agent_is_made() -> None:
    class Sync(Capability):
        def wrap_call(self, call: ToolCall, ctx: Any, call_next: Any) -> Any:  # type: ignore[override]
            return None

    with pytest.raises(TypeError, match=r"Sync.wrap_call must be an async method"):
        Agent(ScriptedModel([]), capabilities=[Sync()])
    with pytest.raises(TypeError, match="capabilities must be Capability objects"):
        Agent(ScriptedModel([]), capabilities=[object()])  # type: ignore[list-item]


def test_the_keywords_build_the_same_capabilities() -> None:
    def polite(ctx: Any, text: str) -> GuardrailResult:
        return GuardrailResult.passed()

    agent = Agent(
        ScriptedModel([]),
        middleware=[Middleware()],
        input_guardrails=[polite],
        after_untrusted="ask",
        history_strategy=KeepLastExchanges(3),
        max_output_chars=100,
        large_output="store",
    )
    kinds = [type(item).__name__ for item in agent.capabilities]
    assert kinds == [
        "Middleware",
        "Guardrails",
        "UntrustedPolicy",
        "KeepLastExchanges",
        "LargeOutputs",
    ]
    assert agent.history_strategy is agent.capabilities[3]
    assert "read_output" in agent.tools.dispatch


def test_a_keyword_and_its_capability_behave_the_same() -> None:
    def no_secrets(ctx: Any, text: str) -> GuardrailResult:
        if "secret" in text:
            return GuardrailResult.tripped("the prompt asks for a secret")
        return GuardrailResult.passed()

    by_keyword = Agent(ScriptedModel([answer("x")]), input_guardrails=[no_secrets])
    by_capability = Agent(
        ScriptedModel([answer("x")]), capabilities=[Guardrails(input=[no_secrets])]
    )
    for agent in (by_keyword, by_capability):
        with pytest.raises(GuardrailTripped) as error:
            agent.run_sync("tell me the secret")
        assert error.value.result is not None
        assert error.value.result.stop_reason == StopReason.GUARDRAIL
        assert [d.name for d in error.value.result.guardrails] == ["no_secrets"]
        assert "the prompt asks for a secret" in str(error.value)


def test_one_agent_takes_one_history_strategy_and_one_output_limit() -> None:
    with pytest.raises(ValueError, match="an agent takes one HistoryStrategy"):
        Agent(
            ScriptedModel([]),
            history_strategy=KeepLastExchanges(2),
            capabilities=[KeepLastExchanges(3)],
        )
    with pytest.raises(ValueError, match="an agent takes one LargeOutputs"):
        Agent(ScriptedModel([]), max_output_chars=5, capabilities=[LargeOutputs(10)])


def test_an_unknown_keyword_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'guardrails'"):
        Agent(ScriptedModel([]), guardrails=[])  # type: ignore[call-arg]


def test_agent_takes_fifteen_parameters_or_fewer() -> None:
    parameters = inspect.signature(Agent.__init__).parameters
    assert len(parameters) <= 15, list(parameters)
    assert "capabilities" in parameters


def test_the_run_log_keyword_is_an_observing_capability() -> None:
    seen: list[str] = []

    class Watcher:
        def observe(self, events: Any, run: Any) -> Any:
            async def watched() -> Any:
                async for event in events:
                    seen.append(type(event).__name__)
                    yield event

            return watched()

    watcher = Watcher()
    agent = Agent(ScriptedModel([answer("hi")]), run_log=watcher)
    assert agent.run_log is watcher
    assert isinstance(agent.capabilities[0], Observing)
    agent.run_sync("hello")
    assert seen[-1] == "FinalAnswer"
    agent.run_log = None
    assert agent.capabilities == ()
    assert agent.run_log is None


def test_an_untrusted_policy_capability_is_the_keyword() -> None:
    with pytest.raises(ValueError, match="after_untrusted must be"):
        UntrustedPolicy("maybe")  # type: ignore[arg-type]
    agent = Agent(ScriptedModel([]), capabilities=[UntrustedPolicy("refuse")])
    assert agent._call_options.after_untrusted == "refuse"


def test_final_answer_is_the_last_event_with_hooks_in_place() -> None:
    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    agent = Agent(model, [add], capabilities=[Counting(), Signed(), Tally()])

    async def last() -> Event:
        events = [event async for event in agent.stream("1+2")]
        return events[-1]

    import asyncio

    event = asyncio.run(last())
    assert isinstance(event, FinalAnswer)
    assert event.result.output == "3 — agent"
    assert not isinstance(event, ToolCallFinished)


class Stamp(Capability):
    """Marks every call result with the agent's tag: shows where the hook applied."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    async def wrap_call(
        self, call: ToolCall, ctx: RunContext[Any], call_next: CallNext
    ) -> ToolResult:
        result = await call_next(call)
        return ToolResult.success(f"{result.output} [{self.tag}]")


class LastingStamp(Stamp):
    run_level = True


def _outputs(result: RunResult[Any]) -> list[str]:
    return [trace.result.output for trace in result.tool_trace]


def _handoff_pair(first_caps: list[Capability]) -> tuple[Agent[Any, str], ScriptedModel]:
    model = ScriptedModel(
        [
            calls(call("transfer_to_billing", "h1")),
            calls(call("add", "c1", left=1, right=2)),
            answer("3"),
        ]
    )
    billing = Agent(model, [add], name="billing")
    desk = Agent(model, [add], name="desk", handoffs=[billing], capabilities=first_caps)
    return desk, model


def test_a_run_level_capability_holds_after_a_handoff() -> None:
    desk, _ = _handoff_pair([])
    result = desk.run_sync("add", capabilities=[Stamp("run")])
    assert _outputs(result)[1] == "3 [run]"


def test_an_agents_own_capability_stays_with_it_unless_it_is_run_level() -> None:
    desk, _ = _handoff_pair([Stamp("desk")])
    assert _outputs(desk.run_sync("add"))[1] == "3"  # billing holds the run: desk's own is off

    desk, _ = _handoff_pair([LastingStamp("desk")])
    assert _outputs(desk.run_sync("add"))[1] == "3 [desk]"


def test_a_run_level_capability_reaches_an_agent_tools_inner_run() -> None:
    inner_model = ScriptedModel([calls(call("add", "i1", left=2, right=2)), answer("four")])
    helper = Agent(inner_model, [add], name="helper")
    outer_model = ScriptedModel([calls(call("ask_helper", "o1", input="2+2")), answer("done")])
    outer = Agent(outer_model, [helper.as_tool(name="ask_helper", description="Ask the helper.")])

    result = outer.run_sync("go", capabilities=[Stamp("run")])

    inner_read = inner_model.requests[1].messages[-1].content
    assert inner_read == "4 [run]"  # the inner run's call went through the run's hook
    assert _outputs(result) == ["four [run]"]  # and so did the outer call


def test_a_run_level_guardrail_given_to_run_trips_inside_a_handoff() -> None:
    from tooldeck.tools.guardrails import GuardrailResult, ToolGuardrail

    def never_add(ctx: Any, arguments: dict[str, Any]) -> GuardrailResult:
        if ctx.tool_name == "add":
            return GuardrailResult.refused("no adding here")
        return GuardrailResult.passed()

    desk, _ = _handoff_pair([])
    guard = Guardrails(tool=[ToolGuardrail(arguments=never_add, name="never")])
    result = desk.run_sync("add", capabilities=[guard])
    assert _outputs(result)[1] == "error[refused]: no adding here"  # billing's call


def test_run_capabilities_must_be_capabilities() -> None:
    agent = Agent(ScriptedModel([answer("x")]))
    with pytest.raises(TypeError, match="capabilities= takes Capability objects"):
        agent.run_sync("hi", capabilities=["polite"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="LargeOutputs is an agent's setting"):
        agent.run_sync("hi", capabilities=[LargeOutputs(10)])


def test_the_capability_pages_example_is_whole_in_thirty_lines_and_shown_on_the_page() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    example = root / "examples" / "weekday_bookings.py"
    assert len(example.read_text(encoding="utf-8").splitlines()) <= 30
    page = (root / "docs" / "capabilities.md").read_text(encoding="utf-8")
    assert '--8<-- "examples/weekday_bookings.py"' in page  # tests/test_docs.py runs it


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def test_approvals_wrap_the_tools_they_name_and_the_run_pauses_for_them() -> None:
    from tooldeck.run.capabilities import Approvals

    turns = [calls(call("send_email", "c1", to="bob"), call("add", "c2", left=1, right=1))]
    agent = Agent(
        ScriptedModel([*turns, answer("sent")]),
        [send_email, add],
        capabilities=[Approvals(["send_email"])],
    )
    paused = agent.run_sync("mail bob")
    assert paused.stop_reason == StopReason.PAUSED
    assert [pending.call.name for pending in paused.pending] == ["send_email"]
    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint, {"c1": Approve()})
    assert sorted(_outputs(done)) == ["2", "sent to bob"]


def test_approvals_given_to_one_run_hold_after_a_handoff() -> None:
    from tooldeck.run.capabilities import Approvals

    model = ScriptedModel(
        [calls(call("transfer_to_mailer", "h1")), calls(call("send_email", "c1", to="eve"))]
    )
    mailer = Agent(model, [send_email], name="mailer")
    desk = Agent(model, name="desk", handoffs=[mailer])

    free = desk.run_sync("mail eve", capabilities=[Approvals(lambda entry: "email" in entry.name)])

    assert free.stop_reason == StopReason.PAUSED
    assert [pending.call.name for pending in free.pending] == ["send_email"]
    with pytest.raises(TypeError, match="a list of tool names, got the string"):
        Approvals("send_email")


def test_a_wrap_tool_hook_that_returns_no_entry_is_refused_naming_it() -> None:
    class Broken(Capability):
        def wrap_tool(self, entry: Any) -> Any:
            return None

    with pytest.raises(
        TypeError, match=r"Broken\.wrap_tool returned NoneType, expected a ToolEntry"
    ):
        Agent(ScriptedModel([]), [add], capabilities=[Broken()])
