"""Pausing a run for a person or the application, and going on later from its checkpoint."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import (
    Agent,
    Approve,
    Checkpoint,
    FinalAnswer,
    Limits,
    ModelRequest,
    Reject,
    RunContext,
    ScriptedModel,
    ToolCallFinished,
    ToolCallStarted,
    ToolResult,
    external_tool,
    run_agent,
    tool,
)
from tooldeck.errors import CheckpointError

ran: list[str] = []


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    ran.append(f"add_numbers({left}, {right})")
    return left + right


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append(f"delete_file({path})")
    return f"deleted {path}"


locate_phone = external_tool(
    "locate_phone",
    "Find where the user's phone is.",
    {"type": "object", "properties": {"precise": {"type": "boolean"}}, "required": ["precise"]},
)


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


def mixed_turn() -> ScriptedModel:
    return ScriptedModel(
        [
            calls(
                call("add_numbers", "c1", left=1, right=2),
                call("delete_file", "c2", path="a.txt"),
                call("locate_phone", "c3", precise=True),
            ),
            answer("done"),
        ]
    )


def agent_for(model: ScriptedModel, **options: Any) -> Agent[Any]:
    return Agent(model, [add_numbers, delete_file, locate_phone], **options)


def test_a_mixed_turn_runs_the_plain_call_then_pauses_for_the_others() -> None:
    model = mixed_turn()
    result = agent_for(model).run_sync("tidy up")
    assert result.stop_reason == "paused"
    assert result.answer == ""
    assert [(p.call.id, p.call.name, p.kind) for p in result.pending] == [
        ("c2", "delete_file", "approval"),
        ("c3", "locate_phone", "external"),
    ]
    assert ran == ["add_numbers(1, 2)"]
    assert [(t.call.id, t.result.output) for t in result.tool_trace] == [("c1", "3")]
    # the transcript holds the model's turn; its tool messages come when all are answered
    assert result.messages[-1].role == "assistant"
    assert tool_messages(result.messages) == []
    assert result.checkpoint is not None
    assert result.checkpoint.pending == result.pending
    assert len(model.requests) == 1


def test_resuming_with_every_decision_answers_each_call_once_in_the_models_order() -> None:
    model = mixed_turn()
    agent = agent_for(model)
    paused = agent.run_sync("tidy up")
    assert paused.checkpoint is not None
    done = agent.resume_sync(
        paused.checkpoint,
        {"c2": Approve(), "c3": ToolResult.success("in the kitchen")},
    )
    assert done.stop_reason == "answer"
    assert done.answer == "done"
    assert done.run_id == paused.run_id
    assert ran == ["add_numbers(1, 2)", "delete_file(a.txt)"]
    roles = [(m.role, m.tool_call_id) for m in done.messages]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("tool", "c3"),
        ("assistant", None),
    ]
    assert tool_messages(model.requests[1].messages) == ["3", "deleted a.txt", "in the kitchen"]
    assert [t.call.id for t in done.tool_trace] == ["c1", "c2", "c3"]
    assert done.pending == ()
    assert done.checkpoint is None


def test_a_run_that_did_not_pause_has_no_pending_calls_and_no_checkpoint() -> None:
    result = agent_for(ScriptedModel([answer("hi")])).run_sync("hello")
    assert (result.pending, result.checkpoint) == ((), None)


def test_reject_answers_the_call_with_the_reviewers_message() -> None:
    model = ScriptedModel([calls(call("delete_file", "c1", path="a.txt")), answer("ok")])
    agent = agent_for(model)
    paused = agent.run_sync("delete a.txt")
    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint, {"c1": Reject(message="keep that file")})
    assert ran == []
    assert tool_messages(done.messages) == ["error[rejected]: keep that file"]
    assert done.tool_trace[0].result.error_code == "rejected"
    assert done.answer == "ok"


def test_reject_without_a_message_says_a_person_rejected_it() -> None:
    model = ScriptedModel([calls(call("delete_file", "c1", path="a.txt")), answer("ok")])
    agent = agent_for(model)
    paused = agent.run_sync("delete a.txt")
    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint, {"c1": Reject()})
    assert tool_messages(done.messages) == [
        "error[rejected]: a person rejected this call; do not make it again"
    ]


def test_an_approved_edit_runs_with_the_new_arguments_and_the_model_is_told() -> None:
    model = ScriptedModel([calls(call("delete_file", "c1", path="a.txt")), answer("ok")])
    agent = agent_for(model)
    paused = agent.run_sync("delete a.txt")
    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint, {"c1": Approve(arguments={"path": "b.txt"})})
    assert ran == ["delete_file(b.txt)"]
    assert tool_messages(done.messages) == [
        'deleted b.txt\n(run with arguments edited by a person: {"path": "b.txt"})'
    ]
    assert done.tool_trace[0].call.arguments == {"path": "b.txt"}


def test_an_invalid_edit_is_an_invalid_arguments_observation() -> None:
    model = ScriptedModel([calls(call("delete_file", "c1", path="a.txt")), answer("ok")])
    agent = agent_for(model)
    paused = agent.run_sync("delete a.txt")
    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint, {"c1": Approve(arguments={"path": 7, "x": 1})})
    assert ran == []
    assert tool_messages(done.messages) == [
        "error[invalid_arguments]: the arguments for 'delete_file' do not match its schema:\n"
        "- path: Input should be a valid string (got 7)\n"
        "- x: unexpected argument (the tool takes: path)\n"
        '(run with arguments edited by a person: {"path": 7, "x": 1})'
    ]
    assert done.answer == "ok"


def test_partial_decisions_pause_again_without_asking_the_model() -> None:
    model = mixed_turn()
    agent = agent_for(model)
    paused = agent.run_sync("tidy up")
    assert paused.checkpoint is not None
    again = agent.resume_sync(paused.checkpoint, {"c2": Approve()})
    assert again.stop_reason == "paused"
    assert [p.call.id for p in again.pending] == ["c3"]
    assert len(model.requests) == 1
    assert ran == ["add_numbers(1, 2)", "delete_file(a.txt)"]
    assert [t.call.id for t in again.tool_trace] == ["c1", "c2"]
    assert again.checkpoint is not None
    done = agent.resume_sync(again.checkpoint, {"c3": ToolResult.failure("tool_error", "no GPS")})
    assert tool_messages(done.messages) == ["3", "deleted a.txt", "error[tool_error]: no GPS"]
    assert done.answer == "done"


def test_resuming_with_no_decisions_pauses_again_at_once() -> None:
    model = mixed_turn()
    agent = agent_for(model)
    paused = agent.run_sync("tidy up")
    assert paused.checkpoint is not None
    again = agent.resume_sync(paused.checkpoint)
    assert again.stop_reason == "paused"
    assert again.pending == paused.pending
    assert len(model.requests) == 1


def test_a_call_that_fails_validation_never_reaches_a_person() -> None:
    model = ScriptedModel(
        [
            calls(call("delete_file", "c1", path=3), call("delete_file", "c2", path="a.txt")),
            answer("ok"),
        ]
    )
    paused = agent_for(model).run_sync("delete")
    assert [p.call.id for p in paused.pending] == ["c2"]
    assert paused.tool_trace[0].result.error_code == "invalid_arguments"


def test_a_turn_whose_only_calls_failed_checks_does_not_pause() -> None:
    model = ScriptedModel([calls(call("delete_files", "c1", path="a")), answer("sorry")])
    result = agent_for(model).run_sync("delete")
    assert result.stop_reason == "answer"
    assert result.tool_trace[0].result.error_code == "unknown_tool"


# --- predicates ------------------------------------------------------------------------


def transfer_agent(rule: Any, outputs: list[Any]) -> tuple[Agent[Any], ScriptedModel]:
    @tool(requires_approval=rule)
    def transfer(amount: int, to: str) -> str:
        """Send money."""
        ran.append(f"transfer({amount}, {to})")
        return f"sent {amount} to {to}"

    model = ScriptedModel(outputs)
    return Agent(model, [transfer]), model


def two_transfers() -> list[Any]:
    return [
        calls(
            call("transfer", "small", amount="50", to="ann"),
            call("transfer", "big", amount=500, to="bob"),
        ),
        answer("ok"),
    ]


def test_a_sync_predicate_decides_per_call_from_validated_arguments() -> None:
    seen: list[tuple[str, Any, str]] = []

    def above_100(ctx: RunContext[str], arguments: dict[str, Any]) -> bool:
        seen.append((ctx.call_id, arguments["amount"], ctx.deps))
        return bool(arguments["amount"] > 100)

    agent, _ = transfer_agent(above_100, two_transfers())
    result = agent.run_sync("pay", deps="bank")
    assert seen == [("small", 50, "bank"), ("big", 500, "bank")]  # "50" arrived validated as 50
    assert [p.call.id for p in result.pending] == ["big"]
    assert ran == ["transfer(50, ann)"]


def test_an_async_predicate_works_the_same() -> None:
    async def above_100(ctx: RunContext[Any], arguments: dict[str, Any]) -> bool:
        await asyncio.sleep(0)
        return bool(arguments["amount"] > 100)

    agent, _ = transfer_agent(above_100, two_transfers())
    assert [p.call.id for p in agent.run_sync("pay").pending] == ["big"]


def test_a_predicate_that_raises_needs_approval() -> None:
    def broken(ctx: RunContext[Any], arguments: dict[str, Any]) -> bool:
        raise KeyError("limit")

    agent, _ = transfer_agent(broken, two_transfers())
    assert [p.call.id for p in agent.run_sync("pay").pending] == ["small", "big"]
    assert ran == []


# --- refusals ---------------------------------------------------------------------------


def paused_run(**options: Any) -> tuple[Agent[Any], Checkpoint]:
    agent = agent_for(mixed_turn(), **options)
    result = agent.run_sync("tidy up")
    assert result.checkpoint is not None
    return agent, result.checkpoint


def test_a_decision_for_a_call_that_is_not_pending_is_refused_before_anything_runs() -> None:
    agent, checkpoint = paused_run()
    with pytest.raises(CheckpointError) as caught:
        agent.resume_sync(checkpoint, {"c2": Approve(), "c1": Approve()})
    assert str(caught.value) == (
        "no pending call with id 'c1'; pending: 'c2' (delete_file, approval), "
        "'c3' (locate_phone, external)"
    )
    assert ran == ["add_numbers(1, 2)"]


def test_a_tool_result_for_an_approval_call_is_refused() -> None:
    agent, checkpoint = paused_run()
    with pytest.raises(
        CheckpointError,
        match=r"call 'c2' \(delete_file\): needs Approve\(\) or Reject\(\), got ToolResult",
    ):
        agent.resume_sync(checkpoint, {"c2": ToolResult.success("fine")})


def test_an_approval_for_an_external_call_is_refused() -> None:
    agent, checkpoint = paused_run()
    with pytest.raises(
        CheckpointError,
        match=r"call 'c3' \(locate_phone\): is an external call: send the ToolResult",
    ):
        agent.resume_sync(checkpoint, {"c3": Approve()})


def test_an_external_call_may_be_rejected() -> None:
    agent, checkpoint = paused_run()
    again = agent.resume_sync(checkpoint, {"c3": Reject(message="the user declined")})
    assert [p.call.id for p in again.pending] == ["c2"]


def tampered(checkpoint: Checkpoint, path: str = "/etc/passwd") -> str:
    data = json.loads(checkpoint.to_json())
    data["turn"]["pending"][0]["call"]["arguments"]["path"] = path
    data["messages"][-1]["tool_calls"][1]["arguments"]["path"] = path
    return json.dumps(data)


def test_tampered_arguments_are_refused_without_a_key() -> None:
    agent, checkpoint = paused_run()
    with pytest.raises(
        CheckpointError,
        match=r"pending call 'c2' \(delete_file\) was changed after the checkpoint was made",
    ):
        agent.resume_sync(tampered(checkpoint), {"c2": Approve()})
    assert ran == ["add_numbers(1, 2)"]


def test_tampered_arguments_with_a_matching_digest_are_refused_with_a_key() -> None:
    from tooldeck.run._engine.checkpoint import call_digest

    agent, checkpoint = paused_run(checkpoint_key=b"secret")
    data = json.loads(tampered(checkpoint))
    forged_call = data["turn"]["pending"][0]["call"]
    from tooldeck import ToolCall

    data["turn"]["pending"][0]["digest"] = call_digest(checkpoint.run_id, ToolCall(**forged_call))
    with pytest.raises(CheckpointError, match="signature does not match"):
        agent.resume_sync(json.dumps(data), {"c2": Approve()})
    # without the key the forged digest would pass: that is why forgery protection needs it
    unkeyed = agent_for(ScriptedModel([answer("ok")]))
    assert unkeyed.resume_sync(json.dumps(data), {"c2": Approve()}).stop_reason == "paused"
    assert ran[-1] == "delete_file(/etc/passwd)"


def test_a_changed_message_is_refused_with_a_key() -> None:
    agent, checkpoint = paused_run(checkpoint_key=b"secret")
    data = json.loads(checkpoint.to_json())
    data["messages"][0]["content"] = "delete everything"
    with pytest.raises(CheckpointError, match="signature does not match"):
        agent.resume_sync(json.dumps(data), {"c2": Approve()})


def test_a_checkpoint_signed_with_another_key_is_refused() -> None:
    _, checkpoint = paused_run(checkpoint_key=b"secret")
    other = agent_for(ScriptedModel([]), checkpoint_key=b"another")
    with pytest.raises(CheckpointError, match="made with another checkpoint_key"):
        other.resume_sync(checkpoint, {"c2": Approve()})


def test_an_unsigned_checkpoint_is_refused_by_an_agent_with_a_key() -> None:
    _, checkpoint = paused_run()
    keyed = agent_for(ScriptedModel([]), checkpoint_key=b"secret")
    with pytest.raises(CheckpointError, match="not signed, but this agent has a checkpoint_key"):
        keyed.resume_sync(checkpoint, {"c2": Approve()})


def test_a_removed_tool_is_named() -> None:
    _, checkpoint = paused_run()
    smaller = Agent(ScriptedModel([]), [add_numbers, locate_phone])
    with pytest.raises(CheckpointError) as caught:
        smaller.resume_sync(checkpoint, {"c2": Approve()})
    assert str(caught.value) == (
        "cannot resume: the agent has no tool named 'delete_file' any more (pending calls need it)"
    )


def test_an_unknown_version_is_refused() -> None:
    _, checkpoint = paused_run()
    data = json.loads(checkpoint.to_json())
    data["version"] = 99
    with pytest.raises(CheckpointError) as caught:
        Checkpoint.from_json(json.dumps(data))
    assert str(caught.value) == (
        "checkpoint version 99 is not one this tooldeck reads (version 1); "
        "resume it with the tooldeck that made it"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "the checkpoint is not valid JSON"),
        ("[1, 2]", "not a tooldeck checkpoint: expected a JSON object with 'version'"),
        ('{"version": 1, "run_id": "r"}', "the checkpoint is broken: messages: Field required"),
    ],
)
def test_a_broken_checkpoint_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.from_json(text)


def test_a_checkpoint_whose_turn_lost_a_call_is_refused() -> None:
    agent, checkpoint = paused_run()
    data = json.loads(checkpoint.to_json())
    data["turn"]["answered"] = {}
    with pytest.raises(CheckpointError, match="does not account for each of the model's calls"):
        agent.resume_sync(json.dumps(data), {"c2": Approve()})


def test_edited_arguments_must_be_json_data() -> None:
    agent, checkpoint = paused_run()
    with pytest.raises(
        CheckpointError, match=r"Approve\(arguments=...\) for 'c2' must be JSON data"
    ):
        agent.resume_sync(checkpoint, {"c2": Approve(arguments={"path": object()})})


# --- time, streams, entry points ------------------------------------------------------------


def test_time_spent_paused_does_not_count_against_max_duration() -> None:
    model = ScriptedModel([calls(call("delete_file", "c1", path="a.txt")), answer("ok")])
    agent = agent_for(model, limits=Limits(max_duration_s=0.5))
    paused = agent.run_sync("delete")
    assert paused.checkpoint is not None
    used = paused.checkpoint.counters.elapsed_s
    assert 0 <= used < 0.5
    time.sleep(0.6)  # longer than the whole limit, while paused
    done = agent.resume_sync(paused.checkpoint.to_json(), {"c1": Approve()})
    assert done.stop_reason == "answer"


async def test_resume_stream_yields_the_decided_calls_then_the_next_turn() -> None:
    model = mixed_turn()
    agent = agent_for(model)
    paused = await agent.run("tidy up")
    assert paused.checkpoint is not None
    events = [
        event
        async for event in agent.resume_stream(
            paused.checkpoint, {"c2": Approve(), "c3": ToolResult.success("here")}
        )
    ]
    kinds = [type(event).__name__ for event in events]
    assert kinds == [
        "ToolCallFinished",  # c3, answered by the application
        "ToolCallStarted",
        "ToolCallFinished",  # c2, approved and run
        "ModelRequest",
        "ModelResponse",
        "FinalAnswer",
    ]
    assert isinstance(events[1], ToolCallStarted)
    assert events[1].call.id == "c2"
    assert isinstance(events[0], ToolCallFinished)
    assert events[0].trace.call.id == "c3"
    assert isinstance(events[3], ModelRequest)
    assert events[3].round == 2
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert final.result.answer == "done"


async def test_a_paused_stream_ends_with_final_answer_holding_the_paused_result() -> None:
    events = [event async for event in agent_for(mixed_turn()).stream("tidy up")]
    final = events[-1]
    assert isinstance(final, FinalAnswer)
    assert final.result.stop_reason == "paused"


def test_run_agent_pauses_the_same_way() -> None:
    result = run_agent("tidy up", mixed_turn(), [add_numbers, delete_file, locate_phone])
    assert result.stop_reason == "paused"
    assert [p.kind for p in result.pending] == ["approval", "external"]


def test_a_decision_is_bound_to_the_stored_call_not_a_call_sent_back() -> None:
    agent, checkpoint = paused_run()
    # the application cannot smuggle in another call: it only names an id
    done = agent.resume_sync(checkpoint, {"c2": Approve(), "c3": ToolResult.success("x")})
    assert "delete_file(a.txt)" in ran
    assert done.tool_trace[1].call == checkpoint.pending[0].call


def test_the_checkpoint_round_trips_through_json_exactly() -> None:
    _, checkpoint = paused_run(checkpoint_key=b"k")
    again = Checkpoint.from_json(checkpoint.to_json())
    assert again == checkpoint
    assert again.to_json() == checkpoint.to_json()


def test_counters_survive_the_pause() -> None:
    model = ScriptedModel(
        [
            calls(call("add_numbers", "a", left=1, right=1)),
            calls(call("add_numbers", "b", left=1, right=1), call("delete_file", "c", path="x")),
            calls(call("add_numbers", "d", left=1, right=1)),
            answer("ok"),
        ]
    )
    agent = agent_for(model, limits=Limits(repeat_limit=2, max_tool_calls=10))
    paused = agent.run_sync("go")
    assert paused.checkpoint is not None
    assert paused.checkpoint.counters.rounds == 2
    assert paused.checkpoint.counters.tool_calls == 3
    done = agent.resume_sync(paused.checkpoint.to_json(), {"c": Approve()})
    # the third identical add_numbers call is refused: the repeat count came through the pause
    assert done.tool_trace[-1].result.output == (
        "error[repeated_call]: you already called 'add_numbers' with these exact arguments "
        "2 times; do not call it again with the same arguments. Its last result was:\n2"
    )


# --- another process ---------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, sys
    from tooldeck import Agent, Approve, ScriptedModel, ToolResult, tool
    from tooldeck import AssistantOutput as Out, ToolCall

    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        '''Delete a file.'''
        return f"deleted {path}"

    model = ScriptedModel([Out(content="all done")])
    agent = Agent(model, [delete_file], checkpoint_key=b"shared secret")
    text = sys.stdin.read()
    result = agent.resume_sync(text, {"c1": Approve(by="ops")})
    print(json.dumps({"answer": result.answer, "tools": [m.content for m in result.messages if m.role == "tool"],
                      "seen": [m.content for m in model.requests[0].messages]}))
    """
)


def test_a_paused_run_resumes_in_a_new_process(tmp_path: Path) -> None:
    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    model = ScriptedModel([calls(call("delete_file", "c1", path="a.txt"))])
    paused = Agent(model, [delete_file], checkpoint_key=b"shared secret").run_sync("delete a.txt")
    assert paused.checkpoint is not None
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    done = subprocess.run(
        [sys.executable, str(script)],
        input=paused.checkpoint.to_json(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "answer": "all done",
        "tools": ["deleted a.txt"],
        "seen": ["delete a.txt", "", "deleted a.txt"],
    }
