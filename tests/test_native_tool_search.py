"""ToolSearch done by the provider: Anthropic's tool search tools and OpenAI Responses'
``tool_search``, against real HTTP servers on 127.0.0.1 through the official SDKs.

Each test asserts the JSON body the SDK sent and what the run produced. The responses'
search blocks are built with the SDKs' own types (``to_dict``), so their shapes are the
SDKs'; the tools sent are checked against the SDKs' request parameter types.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic.types import (
    ServerToolUseBlock,
    ToolParam,
    ToolReferenceBlock,
    ToolSearchToolBm25_20251119Param,
    ToolSearchToolResultBlock,
    ToolSearchToolSearchResultBlock,
)
from openai.types.responses import (
    FunctionTool as ResponsesFunctionTool,
)
from openai.types.responses import (
    FunctionToolParam,
    ResponseToolSearchCall,
    ResponseToolSearchOutputItem,
    ToolSearchToolParam,
)

from _anthropic_server import anthropic_server, message_body, message_events, text, tool_use
from _loopback import LoopbackServer, Reply
from _openai_server import (
    FakeOpenAI,
    call_item,
    completion_body,
    message_item,
    response_body,
    response_events,
    running,
)
from test_openai_deltas import chat_model, responses_model
from tooldeck import Agent, FunctionTool, tool
from tooldeck.models.anthropic import AnthropicModel
from tooldeck.models.fallback import FallbackModel
from tooldeck.search import SEARCH_TOOL, ToolSearch

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid"


def refund(*, approval: bool = False) -> FunctionTool[..., str]:
    return FunctionTool(
        name="refund_order",
        description="Refund an order's payment.",
        parameters=ORDER_SCHEMA,
        handler=lambda order_id: f"refunded {order_id}",
        defer_loading=True,
        requires_approval=approval,
    )


@tool(defer_loading=True)
def track_parcel(parcel_id: str) -> str:
    """Track a parcel in transit."""
    return "in transit"


def tools(*, approval: bool = False) -> list[Any]:
    return [lookup_order, refund(approval=approval), track_parcel]


@pytest.fixture
def anthropic() -> Iterator[LoopbackServer]:
    with anthropic_server() as fake:
        yield fake


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with running() as fake:
        yield fake


def claude(server: LoopbackServer, stream: bool = False) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-5", base_url=server.root, api_key="k", stream=stream, max_retries=0
    )


def sent(server: LoopbackServer | FakeOpenAI, index: int) -> dict[str, Any]:
    body = dict(server.bodies[index])
    body.pop("stream", None)
    return body


# --- Anthropic ---------------------------------------------------------------------------


def anthropic_search(found: list[str]) -> list[dict[str, Any]]:
    """The server's tool search in a message: its use, then its result naming ``found``."""
    use = ServerToolUseBlock(
        id="srvtoolu_01",
        input={"query": "refund"},
        name="tool_search_tool_bm25",
        type="server_tool_use",
    )
    result = ToolSearchToolResultBlock(
        tool_use_id="srvtoolu_01",
        type="tool_search_tool_result",
        content=ToolSearchToolSearchResultBlock(
            type="tool_search_tool_search_result",
            tool_references=[ToolReferenceBlock(type="tool_reference", tool_name=n) for n in found],
        ),
    )
    return [use.to_dict(mode="json"), result.to_dict(mode="json")]


def refund_found() -> list[dict[str, Any]]:
    """A turn that searches, finds ``refund_order`` and calls it."""
    return [
        *anthropic_search(["refund_order"]),
        tool_use("toolu_1", "refund_order", {"order_id": "A1"}),
    ]


def anthropic_reply(server: LoopbackServer, body: dict[str, Any], stream: bool) -> None:
    server.reply(Reply(events=message_events(body)) if stream else Reply(body=body))


def anthropic_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description, "input_schema": schema}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_anthropic_searches_its_deferred_tools_and_the_found_tool_runs(
    anthropic: LoopbackServer, stream: bool
) -> None:
    searched = refund_found()
    anthropic_reply(anthropic, message_body(searched), stream)
    anthropic_reply(anthropic, message_body([text("Refunded.")]), stream)

    result = await Agent(claude(anthropic, stream), tools(), capabilities=[ToolSearch()]).run(
        "Refund order A1"
    )

    assert result.answer == "Refunded."
    assert result.messages[2].content == "refunded A1"
    first, second = sent(anthropic, 0), sent(anthropic, 1)
    lookup = anthropic_tool("lookup_order", "Look an order up.", lookup_order.spec.parameters)
    deferred_refund = {
        **anthropic_tool("refund_order", "Refund an order's payment.", ORDER_SCHEMA),
        "defer_loading": True,
    }
    deferred_track = {
        **anthropic_tool(
            "track_parcel", "Track a parcel in transit.", track_parcel.spec.parameters
        ),
        "defer_loading": True,
    }
    native = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert first["tools"] == [lookup, native, deferred_refund, deferred_track]
    assert set(native) <= set(ToolSearchToolBm25_20251119Param.__annotations__)
    assert set(deferred_refund) <= set(ToolParam.__annotations__)
    assert SEARCH_TOOL not in json.dumps(first["tools"])
    # the found tool is shown from then on; the search is sent back with the turn
    plain_refund = anthropic_tool("refund_order", "Refund an order's payment.", ORDER_SCHEMA)
    assert second["tools"] == [lookup, native, plain_refund, deferred_track]
    assistant = second["messages"][1]
    assert [block["type"] for block in assistant["content"]] == [
        "server_tool_use",
        "tool_search_tool_result",
        "tool_use",
    ]
    assert assistant["content"][:2] == anthropic_search(["refund_order"])


async def test_anthropic_regex_strategy_asks_for_the_regex_search(
    anthropic: LoopbackServer,
) -> None:
    anthropic_reply(anthropic, message_body([text("Nothing to do.")]), False)

    agent = Agent(claude(anthropic), tools(), capabilities=[ToolSearch(strategy="regex")])
    await agent.run("Hello")

    native = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    assert sent(anthropic, 0)["tools"][1] == native


async def test_a_native_reveal_is_in_the_checkpoint_and_a_resume_runs_the_revealed_tool(
    anthropic: LoopbackServer,
) -> None:
    searched = refund_found()
    anthropic_reply(anthropic, message_body(searched), False)
    anthropic_reply(anthropic, message_body([text("Refunded.")]), False)

    paused = await Agent(claude(anthropic), tools(approval=True), capabilities=[ToolSearch()]).run(
        "Refund order A1"
    )
    assert paused.checkpoint is not None
    saved = paused.checkpoint.to_json()
    assert json.loads(saved)["capability_states"]["ToolSearch"] == {"revealed": ["refund_order"]}

    from tooldeck import Approve

    done = await Agent(claude(anthropic), tools(approval=True), capabilities=[ToolSearch()]).resume(
        saved, {"toolu_1": Approve()}
    )
    assert done.answer == "Refunded."
    assert done.messages[2].content == "refunded A1"


async def test_native_false_sends_the_local_search_tool_to_anthropic(
    anthropic: LoopbackServer,
) -> None:
    anthropic_reply(anthropic, message_body([text("Hello.")]), False)

    agent = Agent(claude(anthropic), tools(), capabilities=[ToolSearch(native=False)])
    await agent.run("Hello")

    shown = sent(anthropic, 0)["tools"]
    assert [param["name"] for param in shown] == ["lookup_order", SEARCH_TOOL]
    assert "defer_loading" not in json.dumps(shown)


async def test_a_ranking_function_is_always_local(anthropic: LoopbackServer) -> None:
    anthropic_reply(anthropic, message_body([text("Hello.")]), False)

    def first(query: str, tools: Any) -> list[str]:
        return [tools[0].name]

    agent = Agent(claude(anthropic), tools(), capabilities=[ToolSearch(strategy=first)])
    await agent.run("Hello")

    assert [param["name"] for param in sent(anthropic, 0)["tools"]] == ["lookup_order", SEARCH_TOOL]


# --- OpenAI Responses and Chat Completions ----------------------------------------------


def responses_search(found: list[str]) -> list[dict[str, Any]]:
    """The hosted tool search in a response: its call, then its output loading ``found``."""
    done: dict[str, Any] = {"call_id": "call_ts", "execution": "server", "status": "completed"}
    call = ResponseToolSearchCall(
        id="tsc_1", arguments={"query": "refund"}, type="tool_search_call", **done
    )
    output = ResponseToolSearchOutputItem(
        id="tso_1",
        type="tool_search_output",
        **done,
        tools=[
            ResponsesFunctionTool(
                type="function",
                name=name,
                parameters=ORDER_SCHEMA,
                strict=True,
                description="Refund an order's payment.",
                defer_loading=True,
            )
            for name in found
        ],
    )
    return [call.to_dict(mode="json"), output.to_dict(mode="json")]


def responses_reply(server: FakeOpenAI, body: dict[str, Any], stream: bool) -> None:
    server.reply(Reply(events=response_events(body)) if stream else Reply(body=body))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_responses_searches_its_deferred_tools_and_the_found_tool_runs(
    openai: FakeOpenAI, stream: bool
) -> None:
    searched = [
        *responses_search(["refund_order"]),
        call_item("call_1", "refund_order", '{"order_id": "A1"}'),
    ]
    responses_reply(openai, response_body(searched), stream)
    responses_reply(openai, response_body([message_item("Refunded.")], id="resp_2"), stream)

    agent = Agent(responses_model(openai, stream), tools(), capabilities=[ToolSearch()])
    result = await agent.run("Refund order A1")

    assert result.answer == "Refunded."
    assert result.messages[2].content == "refunded A1"
    first, second = sent(openai, 0), sent(openai, 1)
    shown = first["tools"]
    assert [(t["type"], t.get("name"), t.get("defer_loading")) for t in shown] == [
        ("function", "lookup_order", None),
        ("tool_search", None, None),
        ("function", "refund_order", True),
        ("function", "track_parcel", True),
    ]
    assert set(shown[1]) <= set(ToolSearchToolParam.__annotations__)
    assert set(shown[2]) <= set(FunctionToolParam.__annotations__)
    assert SEARCH_TOOL not in json.dumps(shown)
    assert [(t.get("name"), t.get("defer_loading")) for t in second["tools"]] == [
        ("lookup_order", None),
        (None, None),
        ("refund_order", None),
        ("track_parcel", True),
    ]
    sent_back = [item.get("type") for item in second["input"]]
    assert sent_back[1:4] == ["tool_search_call", "tool_search_output", "function_call"]


async def test_chat_completions_gets_the_local_search_tool(openai: FakeOpenAI) -> None:
    openai.reply(Reply(body=completion_body("Hello.")))

    await Agent(chat_model(openai), tools(), capabilities=[ToolSearch()]).run("Hello")

    shown = sent(openai, 0)["tools"]
    assert [param["function"]["name"] for param in shown] == ["lookup_order", SEARCH_TOOL]
    assert "defer_loading" not in json.dumps(shown)


async def test_a_fallback_to_another_provider_sees_the_tools_a_native_search_revealed(
    anthropic: LoopbackServer, openai: FakeOpenAI
) -> None:
    searched = refund_found()
    anthropic_reply(anthropic, message_body(searched), False)
    openai.reply(Reply(body=completion_body("Refunded.")))

    class Once(AnthropicModel):
        """Answers its first request, then is unavailable (the fallback takes over)."""

        asked = 0

        async def _request_turn(self, ask: Any) -> Any:
            self.asked += 1
            if self.asked > 1:
                from tooldeck.errors import ModelUnavailable

                raise ModelUnavailable("down")
            return await super()._request_turn(ask)

    first = Once("claude-sonnet-5", base_url=anthropic.root, api_key="k", max_retries=0)
    agent = Agent(FallbackModel(first, chat_model(openai)), tools(), capabilities=[ToolSearch()])
    result = await agent.run("Refund order A1")

    assert result.answer == "Refunded."
    shown = [param["function"]["name"] for param in sent(openai, 0)["tools"]]
    assert shown == ["lookup_order", SEARCH_TOOL, "refund_order"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_anthropic_asks_a_paused_search_to_go_on_and_the_found_tool_runs(
    anthropic: LoopbackServer, stream: bool
) -> None:
    """``pause_turn``: the API paused its own search loop; the adapter sends the turn so
    far back as the last message, and the turn goes on (Anthropic's documented handling)."""
    use, found = anthropic_search(["refund_order"])
    looking = text("Let me find the refund tool.")
    anthropic_reply(anthropic, message_body([looking, use], stop_reason="pause_turn"), stream)
    calling = tool_use("toolu_1", "refund_order", {"order_id": "A1"})
    anthropic_reply(anthropic, message_body([found, calling]), stream)
    anthropic_reply(anthropic, message_body([text("Refunded.")]), stream)

    result = await Agent(claude(anthropic, stream), tools(), capabilities=[ToolSearch()]).run(
        "Refund order A1"
    )

    assert result.answer == "Refunded."
    assert result.messages[2].content == "refunded A1"
    assert len(anthropic.bodies) == 3  # the paused turn, its continuation, the answer
    first, going_on, after = sent(anthropic, 0), sent(anthropic, 1), sent(anthropic, 2)
    assert going_on["tools"] == first["tools"]  # the same request, refund_order still deferred
    assert going_on["messages"] == [
        *first["messages"],
        {"role": "assistant", "content": [looking, use]},
    ]
    turn = result.messages[1]
    assert turn.content == "Let me find the refund tool."
    assert [call.name for call in turn.tool_calls] == ["refund_order"]
    assert [item["type"] for item in turn.provider_items] == [
        "server_tool_use",
        "tool_search_tool_result",
    ]
    assert result.usage.input_tokens == 3 * 25  # each request counted
    assert [param["name"] for param in after["tools"]][-2:] == ["refund_order", "track_parcel"]
    assert "defer_loading" not in after["tools"][-2]  # revealed: shown plain
