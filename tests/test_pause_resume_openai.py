"""A paused run goes on through the OpenAI adapters: call ids paired after the resume.

Each test pauses a run against the loopback server, keeps only the checkpoint's JSON text,
then resumes it on a new agent with a new model client (as another process would) and
asserts the request the SDK sent after the resume.
"""

from __future__ import annotations

from typing import Any

from _openai_server import (
    FakeOpenAI,
    Reply,
    add_numbers_tool,
    call_item,
    chat_call,
    completion_body,
    completion_chunks,
    message_item,
    response_body,
    response_events,
)
from tooldeck import Agent, Approve, FunctionTool, Reject
from tooldeck.models.openai import OpenAIChatModel, OpenAIResponsesModel


def delete_file_tool() -> FunctionTool[..., str]:
    return FunctionTool(
        name="delete_file",
        description="Delete a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        handler=lambda path: f"deleted {path}",
        requires_approval=True,
    )


def tools() -> list[FunctionTool[..., Any]]:
    return [add_numbers_tool(), delete_file_tool()]


async def test_chat_completions_resume_pairs_each_call_id(server: FakeOpenAI, stream: bool) -> None:
    first = completion_body(
        None,
        [
            chat_call("call_a", "add_numbers", '{"a": 2, "b": 3}'),
            chat_call("call_d", "delete_file", '{"path": "old.log"}'),
            chat_call("call_e", "delete_file", '{"path": "keep.txt"}'),
        ],
    )
    final = completion_body("Added 5, deleted old.log, kept keep.txt.")
    for body in (first, final):
        server.reply(Reply(events=completion_chunks(body)) if stream else Reply(body=body))

    def model() -> OpenAIChatModel:
        return OpenAIChatModel(
            "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, max_retries=0
        )

    paused = await Agent(model(), tools()).run("Add 2 and 3, then clean up.")
    assert paused.stop_reason == "paused"
    assert paused.checkpoint is not None
    text = paused.checkpoint.to_json()
    assert len(server.requests) == 1

    done = await Agent(model(), tools()).resume(
        text, {"call_d": Approve(), "call_e": Reject(message="keep that one")}
    )

    assert done.answer == "Added 5, deleted old.log, kept keep.txt."
    messages = server.bodies[1]["messages"]
    assert messages[1]["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "add_numbers", "arguments": '{"a": 2, "b": 3}'},
        },
        {
            "id": "call_d",
            "type": "function",
            "function": {"name": "delete_file", "arguments": '{"path": "old.log"}'},
        },
        {
            "id": "call_e",
            "type": "function",
            "function": {"name": "delete_file", "arguments": '{"path": "keep.txt"}'},
        },
    ]
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "5"},
        {"role": "tool", "tool_call_id": "call_d", "content": "deleted old.log"},
        {"role": "tool", "tool_call_id": "call_e", "content": "error[rejected]: keep that one"},
    ]


async def test_responses_resume_pairs_each_call_id(server: FakeOpenAI, stream: bool) -> None:
    first = response_body(
        [
            call_item("call_a", "add_numbers", '{"a":2,"b":3}'),
            call_item("call_d", "delete_file", '{"path":"old.log"}'),
        ]
    )
    final = response_body([message_item("Done.")], id="resp_2")
    for body in (first, final):
        server.reply(Reply(events=response_events(body)) if stream else Reply(body=body))

    def model() -> OpenAIResponsesModel:
        return OpenAIResponsesModel(
            "gpt-4.1-mini", base_url=server.url, api_key="sk-test", stream=stream, max_retries=0
        )

    paused = await Agent(model(), tools()).run("Add 2 and 3, then clean up.")
    assert paused.checkpoint is not None
    assert [p.call.id for p in paused.pending] == ["call_d"]

    done = await Agent(model(), tools()).resume(paused.checkpoint.to_json(), {"call_d": Approve()})

    assert done.answer == "Done."
    items = server.bodies[1]["input"]
    assert [(i.get("type"), i.get("call_id"), i.get("output")) for i in items[1:]] == [
        ("function_call", "call_a", None),
        ("function_call", "call_d", None),
        ("function_call_output", "call_a", "5"),
        ("function_call_output", "call_d", "deleted old.log"),
    ]
