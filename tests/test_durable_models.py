"""Durable runs with the real models: the OpenAI adapters against the loopback server, and
the local model. A replay is forced with DBOS's own ``fork_workflow`` (a new execution of
the run whose earlier steps come from the database), so the test sees exactly what a
recovered run sends the provider after reading its recorded turns back."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from dbos import DBOS

from _openai_server import (
    FakeOpenAI,
    Reply,
    add_numbers_tool,
    call_item,
    chat_call,
    completion_body,
    message_item,
    response_body,
)
from tooldeck import Agent, ModelSettings
from tooldeck.cli.demo import get_weather
from tooldeck.durable import DurableAgent
from tooldeck.models.base import Model
from tooldeck.models.local import LocalModel
from tooldeck.models.openai import OpenAIChatModel, OpenAIResponsesModel
from tooldeck.run.policy import Limits

pytestmark = pytest.mark.usefixtures("launched_dbos")


async def replay_last_request(durable: DurableAgent[Any, Any], run_id: str) -> Any:
    """Execute the run again from its last model request: everything before it replays."""
    steps = await DBOS.list_workflow_steps_async(run_id)
    last_request = max(s["function_id"] for s in steps if s["function_name"].endswith(".model"))
    handle = await DBOS.fork_workflow_async(run_id, last_request)
    return await handle.get_result()


def chat(server: FakeOpenAI) -> Model:
    return OpenAIChatModel("gpt-4.1-mini", base_url=server.url, api_key="sk-test", max_retries=0)


def responses(server: FakeOpenAI) -> Model:
    return OpenAIResponsesModel(
        "gpt-4.1-mini", base_url=server.url, api_key="sk-test", max_retries=0, store=False
    )


async def test_chat_completions_turns_replay_into_the_same_request(server: FakeOpenAI) -> None:
    call = chat_call("call_a", "add_numbers", '{"a": 2, "b": 3}')
    server.reply(Reply(body=completion_body(None, [call])), Reply(body=completion_body("5.")))
    durable = DurableAgent(
        Agent(chat(server), [add_numbers_tool()]), name=f"chat-{uuid.uuid4().hex[:6]}"
    )
    result = await durable.run("Add 2 and 3.")
    assert result.answer == "5."

    server.reply(Reply(body=completion_body("5, again.")))
    again = await replay_last_request(durable, result.run_id)

    assert again.answer == "5, again."
    assert len(server.requests) == 3  # the replayed first turn asked nothing
    assert server.bodies[2] == server.bodies[1]
    assert again.messages[:-1] == result.messages[:-1]


async def test_responses_turns_replay_with_their_reasoning_items(server: FakeOpenAI) -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    first = response_body([reasoning, call_item("call_a", "add_numbers", '{"a":2,"b":3}')])
    server.reply(Reply(body=first), Reply(body=response_body([message_item("5.")], id="r2")))
    model = responses(server)
    durable = DurableAgent(Agent(model, [add_numbers_tool()]), name=f"resp-{uuid.uuid4().hex[:6]}")
    result = await durable.run("Add 2 and 3.")

    server.reply(Reply(body=response_body([message_item("5, again.")], id="r3")))
    again = await replay_last_request(durable, result.run_id)

    assert again.answer == "5, again."
    assert len(server.requests) == 3
    assert server.bodies[2] == server.bodies[1]
    assert server.bodies[2]["input"][1] == reasoning
    assert again.messages[1].provider_items == (reasoning,)


@pytest.mark.slow
async def test_the_local_model_runs_durably_and_replays_its_first_turn() -> None:
    local = LocalModel()
    agent = Agent(
        local,
        [get_weather],
        settings=ModelSettings(tool_choice="required", max_tokens=48),
        limits=Limits(max_rounds=1),
        on_limit="final_answer",  # two turns: the forced call, then an answer without tools
    )
    durable = DurableAgent(agent, name=f"local-{uuid.uuid4().hex[:6]}")
    result = await durable.run("What's the weather like in Tokyo?")
    assert result.tool_trace[0].call.name == "get_weather"
    assert result.tool_trace[0].result.ok
    assert result.answer.strip()

    first_turn = local.last_turn
    again = await replay_last_request(durable, result.run_id)
    # The first turn and the tool call came from the database; only the answer ran again.
    assert again.messages[:-1] == result.messages[:-1]
    assert [(t.call, t.result) for t in again.tool_trace] == [
        (t.call, t.result) for t in result.tool_trace
    ]
    assert local.last_turn is not first_turn
    assert again.answer.strip()
