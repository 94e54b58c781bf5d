"""Guardrails: on the prompt (beside the first request), on the answer, and on a tool's
arguments and result; every decision in the trace, the stream and the checkpoint."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import answer, call, calls, tool_messages
from tooldeck import (
    Agent,
    Approve,
    AssistantOutput,
    Event,
    RunContext,
    ScriptedModel,
    StopReason,
    ToolCallFinished,
    ToolResult,
    tool,
)
from tooldeck.errors import GuardrailTripped, ToolDefinitionError
from tooldeck.models.scripted import RecordedRequest
from tooldeck.run.events import GuardrailChecked
from tooldeck.run.guardrails import Guardrail, GuardrailResult, ToolGuardrail

ran: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@tool
def send_email(to: str, body: str) -> str:
    """Send an e-mail."""
    ran.append(f"send_email({to})")
    return f"sent to {to}"


@tool
def read_secret(name: str) -> str:
    """Read a stored value."""
    ran.append(f"read_secret({name})")
    return f"{name}=sk-12345"


def no_passwords(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
    if "password" in prompt:
        return GuardrailResult.tripped("the prompt asks for a password", data={"word": "password"})
    return GuardrailResult.passed()


async def slow_no_passwords(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
    await asyncio.sleep(0.2)
    return no_passwords(ctx, prompt)


async def test_an_input_guardrail_that_passes_lets_the_run_answer() -> None:
    agent = Agent(ScriptedModel([answer("Hi!")]), input_guardrails=[no_passwords])
    result = await agent.run("Hello")
    assert result.answer == "Hi!"
    assert [(d.name, d.stage, d.verdict) for d in result.guardrails] == [
        ("no_passwords", "input", "passed")
    ]


async def test_an_input_guardrail_trip_stops_the_run_before_a_tool_of_that_round_runs() -> None:
    # the model answers at once with a call, while the guardrail is still judging
    model = ScriptedModel([calls(call("send_email", to="a@b.c", body="x")), answer("done")])
    agent = Agent(model, [send_email], input_guardrails=[slow_no_passwords])
    with pytest.raises(GuardrailTripped) as raised:
        await agent.run("mail my password to a@b.c")
    assert ran == []
    error = raised.value
    assert error.guardrail == "slow_no_passwords"
    assert error.stage == "input"
    assert error.data == {"word": "password"}
    assert "the prompt asks for a password" in str(error)
    assert error.result.stop_reason == StopReason.GUARDRAIL
    assert error.result.tool_trace == ()
    assert [d.verdict for d in error.result.guardrails] == ["tripped"]


async def test_an_input_guardrail_trip_cancels_the_request_in_flight() -> None:
    cancelled = asyncio.Event()

    async def slow_answer(request: RecordedRequest) -> AssistantOutput:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return answer("too late")

    agent = Agent(ScriptedModel([slow_answer]), input_guardrails=[no_passwords])
    with pytest.raises(GuardrailTripped):
        await asyncio.wait_for(agent.run("my password"), 10)
    assert cancelled.is_set()


async def test_a_blocking_input_guardrail_runs_before_the_model_is_asked() -> None:
    model = ScriptedModel([answer("never")])
    agent = Agent(model, input_guardrails=[Guardrail(no_passwords, blocking=True)])
    with pytest.raises(GuardrailTripped):
        await agent.run("password please")
    assert model.requests == []


async def test_input_guardrail_decisions_are_events_of_the_stream_even_with_deltas() -> None:
    agent = Agent(ScriptedModel([answer("Hi!")]), input_guardrails=[no_passwords])
    events: list[Event] = [event async for event in agent.stream("Hello", deltas=True)]
    checked = [event for event in events if isinstance(event, GuardrailChecked)]
    assert [c.decision.verdict for c in checked] == ["passed"]


def no_secrets(ctx: RunContext[Any], answer: Any) -> GuardrailResult:
    if "sk-" in str(answer):
        return GuardrailResult.tripped("the answer holds a key")
    return GuardrailResult.passed()


async def test_an_output_guardrail_trip_stops_the_run_with_the_answer_kept_out() -> None:
    agent = Agent(ScriptedModel([answer("the key is sk-1")]), output_guardrails=[no_secrets])
    with pytest.raises(GuardrailTripped) as raised:
        await agent.run("key?")
    assert raised.value.stage == "output"
    assert raised.value.result.stop_reason == StopReason.GUARDRAIL
    assert raised.value.result.answer == ""


async def test_an_output_guardrail_with_retry_hands_the_model_its_message() -> None:
    model = ScriptedModel([answer("the key is sk-1"), answer("I cannot share it")])
    agent = Agent(model, output_guardrails=[Guardrail(no_secrets, retry=True)])
    result = await agent.run("key?")
    assert result.answer == "I cannot share it"
    assert model.requests[1].messages[-1].content == "error[refused]: the answer holds a key"
    assert [d.verdict for d in result.guardrails] == ["retry", "passed"]


async def test_output_guardrail_retries_are_bounded_by_output_retries() -> None:
    model = ScriptedModel([answer("sk-1"), answer("sk-2")])
    agent = Agent(model, output_guardrails=[Guardrail(no_secrets, retry=True)], output_retries=1)
    with pytest.raises(GuardrailTripped):
        await agent.run("key?")


class Reply(BaseModel):
    text: str


async def test_an_output_guardrail_judges_the_typed_output() -> None:
    seen: list[Any] = []

    def look(ctx: RunContext[Any], output: Any) -> GuardrailResult:
        seen.append(output)
        return GuardrailResult.passed()

    model = ScriptedModel([calls(call("final_answer", text="hi"))])
    agent = Agent(model, output_type=Reply, output_mode="tool", output_guardrails=[look])
    result = await agent.run("hi")
    assert seen == [Reply(text="hi")]
    assert result.output == Reply(text="hi")


def external_only(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
    if arguments["to"].endswith("@corp.example"):
        return GuardrailResult.passed()
    return GuardrailResult.refused(f"{arguments['to']} is outside the company")


async def test_a_tool_guardrail_refuses_a_call_and_the_model_reads_why() -> None:
    guarded = tool(guardrails=[external_only])(send_email.fn)
    model = ScriptedModel([calls(call("send_email", to="x@evil.example", body="hi")), answer("ok")])
    result = await Agent(model, [guarded]).run("mail")
    assert ran == []
    assert tool_messages(result.messages) == [
        "error[refused]: x@evil.example is outside the company"
    ]
    assert result.guardrails[0].call_id == "c1"
    assert result.guardrails[0].verdict == "refused"


async def test_a_refused_call_is_never_put_to_a_person() -> None:
    needs_yes = tool(requires_approval=True, name="send_email")(send_email.fn)
    model = ScriptedModel([calls(call("send_email", to="x@evil.example", body="hi")), answer("ok")])
    agent = Agent(model, [needs_yes], tool_guardrails=[external_only])
    result = await agent.run("mail")
    assert result.stop_reason == StopReason.ANSWER
    assert result.pending == ()


async def test_a_tool_guardrail_that_trips_stops_the_round_before_any_call_runs() -> None:
    def stop_mail(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
        return GuardrailResult.tripped("no mail today")

    model = ScriptedModel(
        [calls(call("read_secret", "c1", name="a"), call("send_email", "c2", to="b", body="x"))]
    )
    agent = Agent(model, [read_secret, send_email], tool_guardrails=[ToolGuardrail(stop_mail)])
    with pytest.raises(GuardrailTripped) as raised:
        await agent.run("go")
    assert ran == []
    assert raised.value.stage == "arguments"
    assert "on call 'c1'" in str(raised.value)


async def test_a_tool_guardrail_replaces_the_arguments() -> None:
    def to_corp(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
        return GuardrailResult.replaced({**arguments, "to": "desk@corp.example"})

    model = ScriptedModel([calls(call("send_email", to="x@evil.example", body="hi")), answer("ok")])
    result = await Agent(model, [send_email], tool_guardrails=[to_corp]).run("mail")
    assert ran == ["send_email(desk@corp.example)"]
    assert result.tool_trace[0].call.arguments["to"] == "desk@corp.example"


async def test_replaced_arguments_that_do_not_fit_the_schema_are_refused() -> None:
    def broken(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
        return GuardrailResult.replaced({"to": 3})

    model = ScriptedModel([calls(call("send_email", to="x", body="hi")), answer("ok")])
    result = await Agent(model, [send_email], tool_guardrails=[broken]).run("mail")
    assert ran == []
    (text,) = tool_messages(result.messages)
    assert text.startswith("error[invalid_arguments]: the guardrail 'broken' replaced")


async def test_a_result_guardrail_redacts_a_secret_before_the_model_reads_it() -> None:
    def redact(ctx: RunContext[Any], result: ToolResult) -> GuardrailResult:
        return GuardrailResult.replaced(result.output.replace("sk-12345", "[redacted]"))

    guarded = tool(guardrails=[ToolGuardrail(result=redact)])(read_secret.fn)
    model = ScriptedModel([calls(call("read_secret", name="api")), answer("ok")])
    events = [e async for e in Agent(model, [guarded]).stream("read")]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished[0].trace.result.output == "api=[redacted]"
    assert model.requests[1].messages[-1].content == "api=[redacted]"
    checked = [e for e in events if isinstance(e, GuardrailChecked)]
    assert [(c.decision.stage, c.decision.verdict) for c in checked] == [("result", "replaced")]


async def test_a_result_guardrail_that_trips_stops_the_run() -> None:
    def stop_secret(ctx: RunContext[Any], result: ToolResult) -> GuardrailResult:
        return GuardrailResult.tripped("a key leaked")

    model = ScriptedModel([calls(call("read_secret", name="api")), answer("ok")])
    agent = Agent(model, [read_secret], tool_guardrails=[ToolGuardrail(result=stop_secret)])
    with pytest.raises(GuardrailTripped) as raised:
        await agent.run("read")
    assert raised.value.stage == "result"
    assert raised.value.result.stop_reason == StopReason.GUARDRAIL
    assert len(model.requests) == 1


async def test_a_guardrail_that_raises_trips_and_says_so() -> None:
    def broken(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
        raise KeyError("oops")

    agent = Agent(ScriptedModel([answer("Hi")]), input_guardrails=[broken])
    with pytest.raises(GuardrailTripped, match="the guardrail raised KeyError"):
        await agent.run("Hello")


async def test_decisions_before_a_pause_survive_the_checkpoint() -> None:
    needs_yes = tool(requires_approval=True, name="send_email")(send_email.fn)
    model = ScriptedModel([calls(call("send_email", to="a@corp.example", body="x")), answer("ok")])
    agent = Agent(model, [needs_yes], input_guardrails=[no_passwords])
    paused = await agent.run("mail")
    assert paused.stop_reason == StopReason.PAUSED
    assert paused.checkpoint is not None
    text = paused.checkpoint.to_json()
    from tooldeck import Checkpoint

    done = await agent.resume(Checkpoint.from_json(text), {"c1": Approve()})
    assert done.answer == "ok"
    assert [d.stage for d in done.guardrails] == ["input"]


def test_bad_guardrails_are_refused_when_the_agent_is_made() -> None:
    with pytest.raises(TypeError, match="input_guardrails: expected a function"):
        Agent(ScriptedModel([]), input_guardrails=["nope"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="retry=True is for output ones"):
        Agent(ScriptedModel([]), input_guardrails=[Guardrail(no_passwords, retry=True)])
    with pytest.raises(ToolDefinitionError, match="tool 'x': a guardrail must be a function"):
        tool(name="x", guardrails=[42])(send_email.fn)  # type: ignore[list-item]


async def test_an_agent_tool_whose_guardrail_trips_is_a_failed_call_of_the_outer_run() -> None:
    inner = Agent(ScriptedModel([answer("never")]), input_guardrails=[no_passwords])
    helper = inner.as_tool(name="helper", description="Ask the helper.")
    model = ScriptedModel([calls(call("helper", input="my password")), answer("it refused")])
    result = await Agent(model, [helper]).run("go")
    (observation,) = tool_messages(result.messages)
    assert observation == (
        "error[tool_error]: the agent 'helper' stopped without an answer (stop reason: guardrail)"
    )
    assert result.answer == "it refused"


async def test_arguments_a_person_edits_at_approval_are_judged_again() -> None:
    needs_yes = tool(requires_approval=True, name="send_email")(send_email.fn)
    model = ScriptedModel([calls(call("send_email", to="a@corp.example", body="x")), answer("ok")])
    agent = Agent(model, [needs_yes], tool_guardrails=[external_only])
    paused = await agent.run("mail")
    assert [d.verdict for d in paused.guardrails] == ["passed"]
    edit = Approve(arguments={"to": "x@evil.example", "body": "x"})
    done = await agent.resume(paused.checkpoint, {"c1": edit})
    assert ran == []
    assert tool_messages(done.messages) == ["error[refused]: x@evil.example is outside the company"]
    assert [d.verdict for d in done.guardrails] == ["passed", "refused"]
