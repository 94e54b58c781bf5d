"""``tooldeck.serve.agui``: an agent driven over the AG-UI protocol, every event it sends
validated with the protocol's own pydantic types and its ordering rules (tests/_agui.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic import BaseModel

from _agui import approve, new_input, of_type, post
from helpers import answer, call, calls
from tooldeck import Agent, AssistantOutput, Limits, ScriptedModel, external_tool, tool
from tooldeck.serve.agui import app
from tooldeck.sessions import SQLiteSession


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


locate_phone = external_tool(
    "locate_phone",
    "Find where the user's phone is.",
    {"type": "object", "properties": {}, "additionalProperties": False},
)


@pytest.fixture
async def client_for(tmp_path: Path) -> AsyncIterator[Any]:
    """``client_for(agent, **options)``: an HTTP client of the agent's AG-UI app."""
    clients: list[httpx.AsyncClient] = []

    def make(agent: Agent[Any, Any], **options: Any) -> httpx.AsyncClient:
        options.setdefault("data_dir", tmp_path)
        transport = httpx.ASGITransport(app=app(agent, **options))
        client = httpx.AsyncClient(transport=transport, base_url="http://agui.test")
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


def finished(events: list[Any]) -> RunFinishedEvent:
    last = events[-1]
    assert isinstance(last, RunFinishedEvent), last
    return last


def failed(events: list[Any]) -> RunErrorEvent:
    last = events[-1]
    assert isinstance(last, RunErrorEvent), last
    return last


def texts(events: list[Any]) -> str:
    return "".join(e.delta for e in of_type(events, TextMessageContentEvent))


async def test_a_prompt_streams_the_answer_and_finishes_with_it(client_for: Any) -> None:
    client = client_for(Agent(ScriptedModel([answer("Hello, Ada.")])))

    sent = new_input("t1", "Hi, I am Ada.")
    events = await post(client, sent)

    assert isinstance(events[0], RunStartedEvent)
    assert (events[0].thread_id, events[0].protocol_version) == ("t1", "1.0")
    assert [e.type for e in events[1:4]] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    assert texts(events) == "Hello, Ada."
    done = finished(events)
    assert (done.result, done.outcome.type if done.outcome else None) == ("Hello, Ada.", "success")
    (snapshot,) = of_type(events, MessagesSnapshotEvent)
    assert [(m.id, m.role, m.content) for m in snapshot.messages] == [
        (sent["messages"][-1]["id"], "user", "Hi, I am Ada."),  # the client's id, kept
        ("msg-1", "assistant", "Hello, Ada."),
    ]


async def test_tool_calls_stream_with_results_durations_and_ids_the_snapshot_keeps(
    client_for: Any,
) -> None:
    model = ScriptedModel([calls(call("add_numbers", "c1", left=2, right=3)), answer("5")])
    client = client_for(Agent(model, [add_numbers]))

    events = await post(client, new_input("t1", "What is 2 + 3?"))

    (start,) = of_type(events, ToolCallStartEvent)
    assert (start.tool_call_id, start.tool_call_name, start.parent_message_id) == (
        "c1",
        "add_numbers",
        "msg-1",
    )
    args = "".join(e.delta for e in of_type(events, ToolCallArgsEvent))
    assert json.loads(args) == {"left": 2, "right": 3}
    (result,) = of_type(events, ToolCallResultEvent)
    assert (result.tool_call_id, result.content, result.message_id) == ("c1", "5", "msg-2")
    how = result.metadata["tooldeck"]
    assert (how["ok"], how["errorCode"]) == (True, None)
    assert how["durationS"] >= 0
    (snapshot,) = of_type(events, MessagesSnapshotEvent)
    tool_message = snapshot.messages[2]
    assert (tool_message.id, tool_message.role, tool_message.tool_call_id) == (
        "msg-2",
        "tool",
        "c1",
    )
    assert finished(events).result == "5"


async def test_a_thread_is_a_session_that_outlives_the_server(
    client_for: Any, tmp_path: Path
) -> None:
    first_model = ScriptedModel([answer("Hello, Ada.")])
    await post(client_for(Agent(first_model)), new_input("ada", "Hi, I am Ada."))

    restarted = ScriptedModel([answer("You are Ada.")])  # a new app: a server restart
    sent = new_input("ada", "Who am I?")  # the new prompt only, as tooldeck web sends
    events = await post(client_for(Agent(restarted)), sent)

    assert [m.content for m in restarted.requests[0].messages] == [
        "Hi, I am Ada.",
        "Hello, Ada.",
        "Who am I?",
    ]
    (snapshot,) = of_type(events, MessagesSnapshotEvent)
    prompt_id = sent["messages"][-1]["id"]
    assert [m.id for m in snapshot.messages] == ["msg-0", "msg-1", prompt_id, "msg-3"]
    history = await SQLiteSession(tmp_path / "sessions.db", "ada").load()
    assert len(history.messages) == 4


def with_prompts(thread: str, *prompts: tuple[str, str]) -> dict[str, Any]:
    """An input whose messages are these (id, text) user messages, the last the new prompt."""
    body = new_input(thread, "placeholder")
    body["messages"] = [{"id": id_, "role": "user", "content": text} for id_, text in prompts]
    return body


async def test_the_snapshot_names_prompts_as_the_client_does_where_it_can(
    client_for: Any,
) -> None:
    client = client_for(Agent(ScriptedModel([answer("Hello."), answer("Again?")])))

    first = await post(client, with_prompts("t1", ("msg-1", "Hi")))
    second = await post(
        client, with_prompts("t1", ("u-a", "Hi, edited since"), ("u-b", "Hello again"))
    )

    (snapshot,) = of_type(first, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["msg-0", "msg-1"]  # "msg-1" is the answer's
    (snapshot,) = of_type(second, MessagesSnapshotEvent)
    assert [(m.id, m.content) for m in snapshot.messages] == [
        ("msg-0", "Hi"),  # the client sent another text: not its id
        ("msg-1", "Hello."),
        ("u-b", "Hello again"),
        ("msg-3", "Again?"),
    ]


async def approval_paused(client: httpx.AsyncClient, thread: str = "t1") -> Any:
    """Run a prompt that pauses on delete_file; the run's interrupt."""
    events = await post(client, new_input(thread, "Delete notes.txt."))
    outcome = finished(events).outcome
    assert outcome is not None
    assert outcome.type == "interrupt"
    (interrupt,) = outcome.interrupts
    return interrupt


def deleting(*after: AssistantOutput) -> Agent[Any, Any]:
    first = calls(call("delete_file", "d1", path="notes.txt"))
    return Agent(ScriptedModel([first, *after]), [delete_file])


async def test_a_call_needing_approval_is_an_interrupt_bound_to_the_stored_call(
    client_for: Any,
) -> None:
    agent = deleting(answer("Deleted."))
    client = client_for(agent)

    interrupt = await approval_paused(client)

    assert (interrupt.reason, interrupt.tool_call_id) == ("tool_call", "d1")
    assert interrupt.message == 'Approve delete_file({"path": "notes.txt"})?'
    schema = interrupt.response_schema
    assert schema["required"] == ["approved"]
    assert schema["properties"]["editedArgs"]["properties"] == {"path": {"type": "string"}}
    assert interrupt.metadata["tooldeck"]["tool"] == "delete_file"

    events = await post(client, new_input("t1", resume=[approve(interrupt.id, approved=True)]))

    (result,) = of_type(events, ToolCallResultEvent)
    assert (result.tool_call_id, result.content) == ("d1", "deleted notes.txt")
    assert finished(events).result == "Deleted."
    assert not of_type(events, ToolCallStartEvent)  # the call is not streamed again


async def test_an_edited_approval_runs_the_edited_arguments(client_for: Any) -> None:
    client = client_for(deleting(answer("Deleted the draft.")))
    interrupt = await approval_paused(client)

    edited = approve(interrupt.id, approved=True, editedArgs={"path": "draft.txt"})
    events = await post(client, new_input("t1", resume=[edited]))

    (result,) = of_type(events, ToolCallResultEvent)
    assert result.content == (
        'deleted draft.txt\n(run with arguments edited by a person: {"path": "draft.txt"})'
    )


async def test_a_rejection_with_a_reason_is_what_the_model_reads(client_for: Any) -> None:
    agent = deleting(answer("I kept it."))
    client = client_for(agent)
    interrupt = await approval_paused(client)

    refused = approve(interrupt.id, approved=False, reason="keep my notes")
    events = await post(client, new_input("t1", resume=[refused]))

    (result,) = of_type(events, ToolCallResultEvent)
    assert result.content == "error[rejected]: keep my notes"
    assert result.metadata["tooldeck"]["errorCode"] == "rejected"
    assert agent.model.requests[-1].messages[-1].content == "error[rejected]: keep my notes"


async def test_a_cancelled_interrupt_rejects_the_call(client_for: Any) -> None:
    client = client_for(deleting(answer("Not deleted.")))
    interrupt = await approval_paused(client)

    cancelled = {"interruptId": interrupt.id, "status": "cancelled"}
    events = await post(client, new_input("t1", resume=[cancelled]))

    (result,) = of_type(events, ToolCallResultEvent)
    assert result.content.startswith("error[rejected]: the person closed this call's approval")


async def test_a_new_message_while_a_call_waits_is_refused_and_changes_nothing(
    client_for: Any, tmp_path: Path
) -> None:
    client = client_for(deleting(answer("Deleted.")))
    interrupt = await approval_paused(client)

    events = await post(client, new_input("t1", "Actually, never mind."))

    assert len(events) == 1  # the stream opens with the error: nothing ran
    error = failed(events)
    assert error.code == "interrupt_pending"
    assert "paused run waiting for delete_file (approval, call 'd1')" in error.message
    paused = await SQLiteSession(tmp_path / "sessions.db", "t1").pending()
    assert paused is not None
    assert paused.pending[0].digest == interrupt.id


async def test_an_answer_to_an_interrupt_no_call_waits_for_is_refused(client_for: Any) -> None:
    client = client_for(deleting(answer("Deleted.")))
    interrupt = await approval_paused(client)

    stale = await post(client, new_input("t1", resume=[approve("0" * 64, approved=True)]))
    assert failed(stale).code == "unknown_interrupt"
    assert "no call of this thread waits for it" in failed(stale).message

    await post(client, new_input("t1", resume=[approve(interrupt.id, approved=True)]))
    replayed = await post(client, new_input("t1", resume=[approve(interrupt.id, approved=True)]))
    assert failed(replayed).code == "nothing_to_resume"


async def test_a_payload_that_is_not_an_approval_is_refused_naming_the_problem(
    client_for: Any,
) -> None:
    client = client_for(deleting(answer("Deleted.")))
    interrupt = await approval_paused(client)

    for payload, problem in [
        ({"approved": "yes"}, "approved: Input should be a valid boolean"),
        ({"approved": True, "comment": "ok"}, "comment: Extra inputs are not permitted"),
    ]:
        events = await post(client, new_input("t1", resume=[approve(interrupt.id, **payload)]))
        error = failed(events)
        assert (error.code, problem in error.message) == ("invalid_payload", True), error.message


async def test_an_unanswered_interrupt_stays_open(client_for: Any) -> None:
    both = calls(
        call("delete_file", "d1", path="a.txt"),
        call("delete_file", "d2", path="b.txt"),
    )
    client = client_for(Agent(ScriptedModel([both, answer("Both done.")]), [delete_file]))
    outcome = finished(await post(client, new_input("t1", "Delete a and b."))).outcome
    first, second = outcome.interrupts

    events = await post(client, new_input("t1", resume=[approve(first.id, approved=True)]))

    again = finished(events).outcome
    assert again.type == "interrupt"
    assert [i.id for i in again.interrupts] == [second.id]
    events = await post(client, new_input("t1", resume=[approve(second.id, approved=True)]))
    assert finished(events).result == "Both done."


async def test_an_external_call_is_left_to_the_client_and_answered_with_a_tool_message(
    client_for: Any,
) -> None:
    model = ScriptedModel([calls(call("locate_phone", "p1")), answer("Your phone is at home.")])
    client = client_for(Agent(model, [locate_phone]))

    events = await post(client, new_input("t1", "Where is my phone?"))
    outcome = finished(events).outcome
    assert (outcome.type, outcome.pending_tool_call_ids) == ("success", ["p1"])
    assert not of_type(events, ToolCallResultEvent)
    (state,) = of_type(events, StateSnapshotEvent)
    assert state.snapshot["tooldeck"]["pending"][0]["kind"] == "external"

    events = await post(client, new_input("t1", tool_results=[("p1", "at home")]))
    assert finished(events).result == "Your phone is at home."
    assert model.requests[-1].messages[-1].content == "at home"


async def test_an_external_call_answered_with_an_error_is_a_failed_result(
    client_for: Any,
) -> None:
    model = ScriptedModel([calls(call("locate_phone", "p1")), answer("I could not find it.")])
    client = client_for(Agent(model, [locate_phone]))
    await post(client, new_input("t1", "Where is my phone?"))

    events = await post(client, new_input("t1", tool_results=[("p1", "")], error="GPS is off"))

    (result,) = of_type(events, ToolCallResultEvent)
    assert (result.content, result.metadata["tooldeck"]["errorCode"]) == (
        "error[tool_error]: GPS is off",
        "tool_error",
    )


async def test_a_tool_message_for_a_call_awaiting_approval_is_refused(client_for: Any) -> None:
    client = client_for(deleting(answer("Deleted.")))
    interrupt = await approval_paused(client)

    events = await post(client, new_input("t1", tool_results=[("d1", "deleted it myself")]))

    error = failed(events)
    assert error.code == "not_external"
    assert interrupt.id in error.message


class City(BaseModel):
    name: str
    population: int


async def test_a_typed_answer_is_the_run_result_as_data(client_for: Any) -> None:
    final = calls(call("final_answer", "f1", name="Zagreb", population=800_000))
    client = client_for(Agent(ScriptedModel([final]), output_type=City))

    events = await post(client, new_input("t1", "Name a city in Croatia."))

    assert finished(events).result == {"name": "Zagreb", "population": 800_000}
    (result,) = of_type(events, ToolCallResultEvent)  # no call is left without its result
    assert (result.tool_call_id, result.content) == ("f1", "final answer accepted")


async def test_a_run_that_stops_at_a_limit_is_a_run_error(client_for: Any) -> None:
    endless = [calls(call("add_numbers", f"c{n}", left=n, right=1)) for n in range(5)]
    agent = Agent(ScriptedModel(endless), [add_numbers], limits=Limits(max_rounds=2))
    client = client_for(agent)

    events = await post(client, new_input("t1", "Count."))

    error = failed(events)
    assert isinstance(events[0], RunStartedEvent)
    assert error.code == "max_rounds"
    assert "session 't1' keeps this run as it stood" in error.message
    assert "the session's next run closes it" in error.message


async def test_a_body_that_is_not_a_run_input_is_refused(client_for: Any) -> None:
    client = client_for(Agent(ScriptedModel([])))

    response = await client.post("/", json={"threadId": "t1"})

    assert response.status_code == 422
    assert "not an AG-UI RunAgentInput: runId: Field required" in response.json()["error"]


async def test_a_message_that_is_not_text_is_refused(client_for: Any) -> None:
    client = client_for(Agent(ScriptedModel([])))
    body = new_input("t1")
    image = {"type": "image", "source": {"type": "url", "value": "http://x/cat.png"}}
    body["messages"] = [{"id": "u1", "role": "user", "content": [image]}]

    error = failed(await post(client, body))

    assert (error.code, "parts other than text (ImagePart)" in error.message) == (
        "unsupported_content",
        True,
    )


async def test_an_input_without_a_user_message_last_is_refused(client_for: Any) -> None:
    client = client_for(Agent(ScriptedModel([])))
    error = failed(await post(client, new_input("t1")))
    assert error.code == "no_prompt"


async def test_one_session_given_serves_its_own_thread_only(
    client_for: Any, tmp_path: Path
) -> None:
    session = SQLiteSession(tmp_path / "one.db", "mine")
    client = client_for(Agent(ScriptedModel([answer("Hi")])), sessions=session)

    refused = failed(await post(client, new_input("other", "Hello")))
    assert refused.code == "unknown_thread"
    assert finished(await post(client, new_input("mine", "Hello"))).result == "Hi"
    await session.aclose()


async def test_threads_kept_in_any_session_store_pause_and_resume_across_servers(
    client_for: Any, store: Any
) -> None:
    """A factory ``thread_id -> Session`` (here SQLite and PostgreSQL): the pause made through
    one app is resumed through another, as after a server restart."""
    first = client_for(deleting(), sessions=store.session)
    interrupt = await approval_paused(first, thread="ops-7")

    restarted = client_for(
        Agent(ScriptedModel([answer("Deleted.")]), [delete_file]), sessions=store.session
    )
    events = await post(
        restarted, new_input("ops-7", resume=[approve(interrupt.id, approved=True)])
    )

    assert finished(events).result == "Deleted."
    (listed,) = await store.list_sessions()
    assert (listed.session_id, listed.title, listed.runs) == ("ops-7", "Delete notes.txt.", 1)


async def test_a_new_message_sent_with_the_answers_is_refused_not_dropped(
    client_for: Any,
) -> None:
    client = client_for(deleting(answer("Deleted.")))
    interrupt = await approval_paused(client)
    answered = [approve(interrupt.id, approved=True)]

    with_new = await post(client, new_input("t1", "And then empty the bin.", resume=answered))
    assert failed(with_new).code == "interrupt_pending"

    history_back = await post(client, new_input("t1", "Delete notes.txt.", resume=answered))
    assert finished(history_back).result == "Deleted."  # the paused run's own prompt: history
