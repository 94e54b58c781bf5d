"""Handoffs: one agent hands the conversation to another, which goes on with the same run."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from helpers import answer, call, calls
from tooldeck import (
    Agent,
    Approve,
    AssistantOutput,
    Checkpoint,
    FinalAnswer,
    Limits,
    Message,
    ScriptedModel,
    StopReason,
    tool,
)
from tooldeck.errors import CheckpointError, DuplicateToolError, LimitExceeded, ToolDefinitionError
from tooldeck.observe import Instrumentation
from tooldeck.run.events import Event, HandedOff, ModelRequest, NestedEvent
from tooldeck.run.guardrails import GuardrailResult
from tooldeck.run.handoff import handoff, summary_of
from tooldeck.runlog import RunLog
from tooldeck.sessions import SQLiteSession
from tooldeck.tools.context import RunContext

CHILD = Path(__file__).with_name("_handoff_child.py")

refunds: list[str] = []


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: paid 30 EUR"


@tool
def refund(order: str) -> str:
    """Refund an order."""
    refunds.append(order)
    return f"refunded {order}"


@tool(requires_approval=True)
def guarded_refund(order: str) -> str:
    """Refund an order, once a person approved it."""
    refunds.append(order)
    return f"refunded {order}"


def transfer(target: str = "billing", call_id: str = "t1", **arguments: Any) -> Any:
    return calls(call(f"transfer_to_{target}", call_id, **arguments))


def billing_agent(*outputs: Any, **options: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(outputs))
    agent = Agent(model, [refund], name="billing", instructions="You handle billing.", **options)
    return agent, model


def triage_agent(*outputs: Any, **options: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(outputs))
    agent = Agent(model, [lookup], name="triage", instructions="Route the user.", **options)
    return agent, model


def test_the_agent_handed_to_answers_with_its_own_instructions_and_tools() -> None:
    billing, billing_model = billing_agent(calls(call("refund", "r1", order="42")), answer("Done."))
    triage, triage_model = triage_agent(transfer(), handoffs=[billing])
    result = triage.run_sync("Refund order 42")
    assert triage_model.requests[0].tool_names == ["lookup", "transfer_to_billing"]
    assert triage_model.requests[0].instructions == "Route the user."
    first = billing_model.requests[0]
    assert first.instructions == "You handle billing."
    assert first.tool_names == ["refund"]
    assert [(m.role, m.content) for m in first.messages] == [
        ("user", "Refund order 42"),
        ("assistant", ""),
        ("tool", "Transferred to 'billing'."),
    ]
    assert result.answer == "Done."
    assert result.agent == "billing"
    assert result.stop_reason == StopReason.ANSWER
    assert [trace.call.name for trace in result.tool_trace] == ["transfer_to_billing", "refund"]


def test_without_handoffs_the_result_names_the_agent() -> None:
    triage, _ = triage_agent(answer("Hi"))
    assert triage.run_sync("Hello").agent == "triage"


class Reason(BaseModel):
    reason: str


def test_typed_transfer_arguments_reach_on_handoff() -> None:
    seen: list[tuple[str, str]] = []

    async def on_handoff(ctx: RunContext[Any], given: Reason) -> None:
        seen.append((ctx.tool_name, given.reason))

    billing, _ = billing_agent(answer("Done."))
    to_billing = handoff(billing, on_handoff=on_handoff, input_type=Reason, description="Bills.")
    triage, triage_model = triage_agent(transfer(reason="a refund"), handoffs=[to_billing])
    assert triage.run_sync("Refund please").agent == "billing"
    assert seen == [("transfer_to_billing", "a refund")]
    spec = triage_model.requests[0].tools[1]
    assert spec.description == "Bills."
    assert spec.parameters["required"] == ["reason"]


def test_a_transfer_with_bad_arguments_hands_nothing_over() -> None:
    billing, billing_model = billing_agent(answer("never"))
    to_billing = handoff(billing, input_type=Reason)
    triage, triage_model = triage_agent(transfer(), answer("Sorry."), handoffs=[to_billing])
    result = triage.run_sync("Refund please")
    assert result.agent == "triage"
    assert result.answer == "Sorry."
    assert billing_model.requests == []
    assert "reason" in triage_model.requests[1].messages[-1].content


def conversation() -> list[Message]:
    return [Message.user("Hi"), Message.assistant(answer("Hello, how can I help?"))]


def seen_after_handoff(history: Any) -> list[tuple[str, str]]:
    billing, billing_model = billing_agent(answer("Done."))
    triage, _ = triage_agent(
        calls(call("lookup", "l1", order="42")),
        transfer(),
        handoffs=[handoff(billing, sees=history)],
    )
    result = triage.run_sync("Refund order 42", history=conversation())
    assert result.agent == "billing"
    shown = billing_model.requests[0].messages
    whole = [*conversation(), Message.user("Refund order 42")]
    assert list(result.messages[:3]) == whole  # the run keeps the whole conversation
    assert len(result.messages) == 8
    return [(m.role, m.content or ",".join(c.name for c in m.tool_calls)) for m in shown]


HANDED = [("assistant", "transfer_to_billing"), ("tool", "Transferred to 'billing'.")]


def test_history_all_shows_the_whole_conversation() -> None:
    assert seen_after_handoff("all") == [
        ("user", "Hi"),
        ("assistant", "Hello, how can I help?"),
        ("user", "Refund order 42"),
        ("assistant", "lookup"),
        ("tool", "order 42: paid 30 EUR"),
        *HANDED,
    ]


def test_history_last_user_shows_the_last_prompt_and_the_transfer() -> None:
    assert seen_after_handoff("last_user") == [("user", "Refund order 42"), *HANDED]


def test_history_summary_is_one_message_listing_the_conversation() -> None:
    seen = seen_after_handoff("summary")
    assert seen[1:] == HANDED
    role, text = seen[0]
    assert role == "user"
    assert text == (
        "The conversation so far, handed over by another agent:\n"
        "- user: Hi\n"
        "- assistant: Hello, how can I help?\n"
        "- user: Refund order 42\n"
        '- assistant called lookup({"order": "42"})\n'
        "- tool result: order 42: paid 30 EUR"
    )


def test_summary_clips_long_messages() -> None:
    text = summary_of([Message.user("x" * 1000)])
    assert text.endswith("- user: " + "x" * 299 + "…")


def test_history_function_chooses_what_is_shown() -> None:
    given: list[int] = []

    def last_two(messages: Any) -> list[Message]:
        given.append(len(messages))
        return [Message.user("Only this")]

    assert seen_after_handoff(last_two) == [("user", "Only this"), *HANDED]
    assert given == [5]  # the conversation before the transfer turn


def test_a_history_function_returning_no_messages_is_refused() -> None:
    billing, _ = billing_agent(answer("Done."))
    broken = handoff(billing, sees=lambda messages: "text")
    triage, _ = triage_agent(transfer(), handoffs=[broken])
    with pytest.raises(TypeError, match="handoff 'billing': the sees function must return"):
        triage.run_sync("Refund")


def test_a_ping_pong_cycle_stops_at_the_run_limit() -> None:
    bounce = [transfer("triage", f"b{i}") for i in range(10)]
    billing, _ = billing_agent(*bounce, limits=Limits(max_rounds=5))
    triage, _ = triage_agent(
        *[transfer("billing", f"t{i}") for i in range(10)], limits=Limits(max_rounds=5)
    )
    billing.handoffs.append(triage)
    triage.handoffs.append(billing)
    with pytest.raises(LimitExceeded) as raised:
        triage.run_sync("Loop")
    partial = raised.value.result
    assert partial is not None
    assert partial.stop_reason == StopReason.MAX_ROUNDS
    assert [trace.call.name for trace in partial.tool_trace] == [
        "transfer_to_billing",
        "transfer_to_triage",
    ] * 2 + ["transfer_to_billing"]


def test_each_transfer_counts_as_a_tool_call() -> None:
    billing, billing_model = billing_agent(answer("never"))
    looked_up = calls(call("lookup", "l1", order="42"))
    triage, _ = triage_agent(
        looked_up, transfer(), handoffs=[billing], limits=Limits(max_tool_calls=1)
    )
    with pytest.raises(LimitExceeded) as raised:
        triage.run_sync("Refund")
    assert raised.value.result is not None
    assert raised.value.result.stop_reason == StopReason.MAX_TOOL_CALLS
    assert raised.value.result.agent == "triage"
    assert billing_model.requests == []


async def test_every_event_of_a_run_without_handoffs_carries_the_agents_name() -> None:
    model = ScriptedModel([calls(call("lookup", "c1", order="7")), answer("Shipped.")])
    agent = Agent(model, [lookup], name="support")
    events = [event async for event in agent.stream("Where is order 7?", deltas=True)]
    assert {type(event).__name__ for event in events} >= {
        "ModelRequest", "ModelResponse", "ToolCallStarted", "ToolCallFinished", "FinalAnswer",
    }  # fmt: skip
    assert [event.agent for event in events] == ["support"] * len(events)


async def test_the_events_a_cancel_adds_carry_the_agents_name() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    model = ScriptedModel([calls(call("wait_forever", "c1"))])
    handle = Agent(model, [wait_forever], name="support").start("Wait.")
    events: list[Event] = []

    async def read() -> None:
        async for event in handle:
            events.append(event)

    reading = asyncio.create_task(read())
    await asyncio.wait_for(started.wait(), 60)
    handle.cancel(reason="enough")
    await asyncio.wait_for(reading, 60)
    assert events[-1].result.stop_reason == "cancelled"  # type: ignore[union-attr]
    assert [event.agent for event in events] == ["support"] * len(events)


async def test_events_carry_the_agent_and_the_handoff() -> None:
    billing, _ = billing_agent(answer("Done."))
    triage, _ = triage_agent(transfer(), handoffs=[billing])
    events: list[Event] = [event async for event in triage.stream("Refund")]
    names = [(type(event).__name__, event.agent) for event in events]
    assert names == [
        ("ModelRequest", "triage"),
        ("ModelResponse", "triage"),
        ("ToolCallStarted", "triage"),
        ("ToolCallFinished", "triage"),
        ("HandedOff", "triage"),
        ("ModelRequest", "billing"),
        ("ModelResponse", "billing"),
        ("FinalAnswer", "billing"),
    ]
    handed = events[4]
    assert isinstance(handed, HandedOff)
    assert (handed.source, handed.target, handed.call.id, handed.round) == (
        "triage",
        "billing",
        "t1",
        1,
    )
    assert isinstance(events[5], ModelRequest)
    assert events[5].round == 2


def paused_in_billing(tmp_path: Path) -> Checkpoint:
    model = ScriptedModel([calls(call("guarded_refund", "r1", order="42"))])
    billing = Agent(model, [guarded_refund], name="billing", instructions="You handle billing.")
    triage, _ = triage_agent(transfer(), handoffs=[billing])
    result = triage.run_sync("Refund order 42")
    assert result.stop_reason == StopReason.PAUSED
    assert result.agent == "billing"
    assert result.checkpoint is not None
    assert result.checkpoint.agent == "billing"
    return result.checkpoint


def resume_elsewhere(checkpoint: Checkpoint, tmp_path: Path, mode: str) -> dict[str, Any]:
    stored = tmp_path / "checkpoint.json"
    stored.write_text(checkpoint.to_json(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(CHILD), str(stored), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(done.stdout))


def test_a_pause_in_the_agent_handed_to_resumes_there_in_another_process(tmp_path: Path) -> None:
    checkpoint = paused_in_billing(tmp_path)
    resumed = resume_elsewhere(checkpoint, tmp_path, "approve")
    assert resumed == {
        "agent": "billing",
        "answer": "Order 42 is refunded.",
        "stop_reason": "answer",
        "instructions": "You handle billing.",
        "tools": ["guarded_refund"],
        "refunds": ["42"],
    }


def test_resuming_where_no_handoff_leads_to_the_agent_is_refused(tmp_path: Path) -> None:
    checkpoint = paused_in_billing(tmp_path)
    lost = Agent(ScriptedModel([]), name="triage", handoffs=[Agent(ScriptedModel([]), name="x")])
    with pytest.raises(CheckpointError, match="paused in agent 'billing', which is not 'triage'"):
        lost.resume_sync(checkpoint, {"r1": Approve()})
    refused = resume_elsewhere(checkpoint, tmp_path, "unknown")
    assert (
        "paused in agent 'billing', which is not 'triage' nor among its handoffs"
        in (refused["error"])
    )


def test_the_agent_handed_to_can_hand_back_and_pause_again() -> None:
    model = ScriptedModel([transfer("triage", "b1")])
    billing = Agent(model, name="billing")
    triage_model = ScriptedModel(
        [transfer(), calls(call("guarded_refund", "r1", order="7")), answer("Refunded 7.")]
    )
    triage = Agent(triage_model, [guarded_refund], name="triage", handoffs=[billing])
    billing.handoffs.append(triage)
    paused = triage.run_sync("Refund 7")
    assert paused.agent == "triage"
    assert paused.checkpoint is not None
    assert paused.checkpoint.agent == "triage"
    done = triage.resume_sync(paused.checkpoint, {"r1": Approve()})
    assert (done.agent, done.answer) == ("triage", "Refunded 7.")


def test_two_agents_with_one_name_in_the_graph_are_refused() -> None:
    first = Agent(ScriptedModel([]), name="billing")
    second = Agent(ScriptedModel([]), name="billing")
    other = Agent(ScriptedModel([]), name="other", handoffs=[second])
    triage = Agent(ScriptedModel([]), name="triage", handoffs=[first, other])
    fake = Checkpoint.model_validate({**paused_checkpoint_data(), "agent": "somewhere"})
    with pytest.raises(ValueError, match="two different agents named 'billing'"):
        triage.check_resumable(fake)


def paused_checkpoint_data() -> dict[str, Any]:
    model = ScriptedModel([calls(call("guarded_refund", "r1", order="1"))])
    paused = Agent(model, [guarded_refund], name="triage").run_sync("Refund 1")
    assert paused.checkpoint is not None
    return dict(paused.checkpoint.model_dump())


def test_bad_handoff_settings_are_refused_with_the_fix() -> None:
    billing, _ = billing_agent()
    with pytest.raises(ToolDefinitionError, match=r"handoff name 'has space'.*handoff\(name=...\)"):
        handoff(billing, name="has space")
    with pytest.raises(
        ValueError, match="sees must be one of 'none', 'all', 'summary', 'last_user'"
    ):
        handoff(billing, sees="everything")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="input_type must be a pydantic model"):
        handoff(billing, input_type=dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="handoff_resume must be 'last' or 'first'"):
        Agent(ScriptedModel([]), handoff_resume="newest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Agent\(name=...\) must be a non-empty string"):
        Agent(ScriptedModel([]), name="")


def test_a_transfer_tool_named_like_a_tool_of_the_agent_is_refused() -> None:
    @tool
    def transfer_to_billing() -> str:
        """Not a handoff."""
        return "?"

    billing, _ = billing_agent()
    triage = Agent(ScriptedModel([]), [transfer_to_billing], name="triage", handoffs=[billing])
    with pytest.raises(DuplicateToolError, match="'transfer_to_billing' from handoff to 'billing'"):
        triage.run_sync("Hi")


def test_two_handoffs_with_one_name_are_refused() -> None:
    billing, _ = billing_agent()
    twin = Agent(ScriptedModel([]), name="billing")
    triage = Agent(ScriptedModel([]), name="triage", handoffs=[billing, handoff(twin)])
    with pytest.raises(ValueError, match="two handoffs named 'billing'"):
        triage.run_sync("Hi")


async def test_an_agent_with_handoffs_works_as_a_tool() -> None:
    billing, _ = billing_agent(answer("Refunded."))
    triage, _ = triage_agent(transfer(), handoffs=[billing])
    outer = Agent(
        ScriptedModel([calls(call("support", "s1", input="Refund 42")), answer("All done.")]),
        [triage.as_tool(name="support", description="Customer support.")],
        name="outer",
    )
    events = [event async for event in outer.stream("Help")]
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert final.result.agent == "outer"
    assert final.result.tool_trace[0].result.output == "Refunded."
    nested = [event for event in events if isinstance(event, NestedEvent)]
    assert [event.event.agent for event in nested if isinstance(event.event, HandedOff)] == [
        "triage"
    ]
    assert nested[-1].event.agent == "billing"


@pytest.mark.parametrize("resume", ["last", "first"])
async def test_a_session_goes_on_with_the_agent_its_setting_names(
    tmp_path: Path, resume: str
) -> None:
    billing, billing_model = billing_agent(answer("Refunded."), answer("Billing again."))
    triage, triage_model = triage_agent(
        transfer(), answer("Triage again."), handoffs=[billing], handoff_resume=resume
    )
    session = SQLiteSession(tmp_path / "chat.db", "chat")
    try:
        first = await triage.run("Refund order 42", session=session)
        second = await triage.run("And my invoice?", session=session)
    finally:
        await session.aclose()
    assert first.agent == "billing"
    if resume == "last":
        assert (second.agent, second.answer) == ("billing", "Billing again.")
        assert len(triage_model.requests) == 1
        assert billing_model.requests[1].messages[-1].content == "And my invoice?"
    else:
        assert (second.agent, second.answer) == ("triage", "Triage again.")
        assert len(billing_model.requests) == 1
        assert triage_model.requests[1].messages[-1].content == "And my invoice?"


async def test_a_session_finds_the_last_agent_after_a_cycle(tmp_path: Path) -> None:
    billing, _ = billing_agent(transfer("triage", "b1"))
    triage, triage_model = triage_agent(transfer(), answer("Back in triage."), answer("Still."))
    triage.handoffs.append(billing)
    billing.handoffs.append(triage)
    session = SQLiteSession(tmp_path / "chat.db", "chat")
    try:
        first = await triage.run("Refund", session=session)
        second = await billing.run("Next", session=session)  # billing's graph leads to triage
    finally:
        await session.aclose()
    assert (first.agent, second.agent, second.answer) == ("triage", "triage", "Still.")
    assert triage_model.requests[2].messages[-1].content == "Next"


def test_a_chosen_history_is_kept_across_a_pause_and_resume() -> None:
    model = ScriptedModel([calls(call("guarded_refund", "r1", order="42")), answer("Refunded.")])
    billing = Agent(model, [guarded_refund], name="billing")
    to_billing = handoff(billing, sees="last_user")
    triage, _ = triage_agent(
        calls(call("lookup", "l1", order="42")), transfer(), handoffs=[to_billing]
    )
    paused = triage.run_sync("Refund order 42", history=conversation())
    assert paused.checkpoint is not None
    restored = Checkpoint.from_json(paused.checkpoint.to_json())
    done = triage.resume_sync(restored, {"r1": Approve()})
    assert done.answer == "Refunded."
    shown = [(m.role, m.content) for m in model.requests[1].messages]
    assert shown == [
        ("user", "Refund order 42"),
        ("assistant", ""),
        ("tool", "Transferred to 'billing'."),
        ("assistant", ""),
        ("tool", "refunded 42"),
    ]
    assert len(done.messages) == 10  # the run's conversation is whole


def test_the_trace_has_a_handoff_span_and_names_the_agent() -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    billing, _ = billing_agent(answer("Done."))
    triage, _ = triage_agent(
        transfer(), handoffs=[billing], instrument=Instrumentation(tracer_provider)
    )
    try:
        triage.run_sync("Refund")
    finally:
        tracer_provider.shutdown()
    spans = {span.name: span for span in exporter.get_finished_spans()}
    root = spans["invoke_agent"]
    handed = spans["handoff billing"]
    assert handed.parent is not None
    assert root.context is not None
    assert handed.parent.span_id == root.context.span_id
    assert dict(handed.attributes or {}) == {
        "tooldeck.handoff.source": "triage",
        "tooldeck.handoff.target": "billing",
        "gen_ai.tool.call.id": "t1",
        "tooldeck.round": 1,
    }
    assert (root.attributes or {})["tooldeck.agent"] == "billing"
    assert "execute_tool transfer_to_billing" in spans


async def test_the_run_log_records_each_handoff(tmp_path: Path) -> None:
    billing, _ = billing_agent(transfer("triage", "b1"))
    with RunLog(tmp_path / "logs.db") as log:
        triage, _ = triage_agent(transfer(), answer("Back."), handoffs=[billing], run_log=log)
        billing.handoffs.append(triage)
        result = await triage.run("Refund")
        log.flush()
        logged = log.run(result.run_id)
    assert [(h.round, h.call_id, h.source, h.target) for h in logged.handoffs] == [
        (1, "t1", "triage", "billing"),
        (2, "b1", "billing", "triage"),
    ]
    assert logged.answer == "Back."
    assert logged.handoffs[0].at <= logged.handoffs[1].at


def test_a_turn_hands_over_once_and_a_later_transfer_is_refused() -> None:
    billing, billing_model = billing_agent(answer("Billing here."))
    refunds_agent = Agent(ScriptedModel([answer("never")]), name="refunds")
    both = calls(call("transfer_to_billing", "t1"), call("transfer_to_refunds", "t2"))
    triage, _ = triage_agent(both, handoffs=[billing, refunds_agent])
    result = triage.run_sync("Help")
    assert (result.agent, result.answer) == ("billing", "Billing here.")
    assert [m.content for m in billing_model.requests[0].messages if m.role == "tool"] == [
        "Transferred to 'billing'.",
        "error[refused]: not transferred: the call 't1' of this turn hands the conversation "
        "over already (one handoff per turn)",
    ]


def test_the_agent_handed_to_can_store_large_outputs_and_read_them() -> None:
    @tool(max_output_chars=5, large_output="store")
    def report() -> str:
        """A long report."""
        return "0123456789"

    model = ScriptedModel(
        [
            calls(call("report", "r1")),
            calls(call("read_output", "o1", handle="r1", offset=5)),
            answer("Read it."),
        ]
    )
    reports = Agent(model, [report], name="reports")
    triage, _ = triage_agent(transfer("reports"), handoffs=[reports])
    result = triage.run_sync("Report")
    assert result.answer == "Read it."
    read = result.tool_trace[-1].result
    assert read.ok
    assert read.output.startswith("56789")


def test_a_signed_checkpoint_names_its_agent_under_the_first_agents_key() -> None:
    model = ScriptedModel([calls(call("guarded_refund", "r1", order="5")), answer("Done.")])
    billing = Agent(model, [guarded_refund], name="billing", checkpoint_key=b"billing key")
    triage, _ = triage_agent(transfer(), handoffs=[billing], checkpoint_key=b"run key")
    paused = triage.run_sync("Refund 5")
    checkpoint = paused.checkpoint
    assert checkpoint is not None
    assert checkpoint.signature is not None
    moved = checkpoint.model_copy(update={"agent": "triage"})
    with pytest.raises(CheckpointError, match="signature does not match"):
        triage.resume_sync(moved, {"r1": Approve()})
    done = triage.resume_sync(checkpoint.to_json(), {"r1": Approve()})
    assert (done.agent, done.answer) == ("billing", "Done.")


def test_on_handoff_that_raises_fails_the_transfer_and_hands_nothing_over() -> None:
    def refuse(ctx: RunContext[Any]) -> None:
        raise RuntimeError("billing is closed")

    billing, billing_model = billing_agent(answer("never"))
    closed = handoff(billing, on_handoff=refuse)
    triage, _ = triage_agent(transfer(), answer("Billing is closed."), handoffs=[closed])
    result = triage.run_sync("Refund")
    assert (result.agent, result.answer) == ("triage", "Billing is closed.")
    assert billing_model.requests == []
    assert result.tool_trace[0].result.ok is False
    assert isinstance(result.tool_trace[0].error, RuntimeError)


class Refund(BaseModel):
    order: str
    amount: int


def test_the_answer_has_the_type_of_the_agent_that_answers() -> None:
    model = ScriptedModel([AssistantOutput(content='{"order": "42", "amount": 30}')])
    billing = Agent(model, name="billing", output_type=Refund, output_mode="prompted")
    triage, _ = triage_agent(transfer(), handoffs=[billing])
    result = triage.run_sync("Refund 42")
    assert result.output == Refund(order="42", amount=30)
    assert '"amount"' in model.requests[0].instructions  # billing's schema, asked the prompted way


def test_the_agent_handed_to_checks_answers_but_not_the_prompt_again() -> None:
    checked: list[str] = []

    def prompt_check(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
        checked.append(f"prompt: {prompt}")
        return GuardrailResult.passed()

    def answer_check(ctx: RunContext[Any], text: str) -> GuardrailResult:
        checked.append(f"answer: {text}")
        return GuardrailResult.passed()

    billing, _ = billing_agent(
        answer("Done."), input_guardrails=[prompt_check], output_guardrails=[answer_check]
    )
    triage, _ = triage_agent(transfer(), handoffs=[billing])
    result = triage.run_sync("Refund")
    assert result.answer == "Done."
    assert checked == ["answer: Done."]
    assert [(d.stage, d.name) for d in result.guardrails] == [("output", "answer_check")]


def test_handoffs_that_are_not_agents_are_refused_when_given_and_when_run() -> None:
    with pytest.raises(TypeError, match=r"takes agents and handoff\(agent, ...\), got 'billing'"):
        Agent(ScriptedModel([]), handoffs=["billing"])  # type: ignore[list-item]
    triage, _ = triage_agent(answer("never"))
    triage.handoffs.append("billing")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got 'billing' \(str\)"):
        triage.run_sync("Hi")


def test_the_old_history_keyword_still_works_with_a_warning() -> None:
    billing, _ = billing_agent()
    with pytest.warns(
        DeprecationWarning, match=r"handoff\(history=...\) is now handoff\(sees=...\)"
    ):
        old = handoff(billing, history="last_user")
    assert old.sees == "last_user"
    assert old.history == "last_user"
