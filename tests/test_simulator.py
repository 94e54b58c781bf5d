"""The provider simulator (tooldeck.testing) behaves like a hosted provider: fresh call ids
in every response, usage that a known model's price applies to, text and argument deltas
over several chunks, both APIs; read by tooldeck's own adapters and the official SDK."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from tooldeck import Agent, FinalAnswer, ModelResponse, TextDelta, ToolCallDelta, tool
from tooldeck.messages import Message
from tooldeck.models import ModelSettings
from tooldeck.testing import (
    ProviderSimulator,
    UnscriptedRequests,
    after_tool,
    call,
    fail,
    last_tool_result_contains,
    last_user_contains,
    reply,
    rule,
)

Provider = Callable[..., ProviderSimulator]
APIS = ["chat", "responses"]


@tool(side_effects=True)
def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"order {order_id} refunded"


@tool
def lookup(id: int) -> str:
    """Look an order up."""
    return f"order {id}: shipped"


def tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, text) of each tool result a request carried, whichever API."""
    if "messages" in body:
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    items = body["input"]
    return [(i["call_id"], i["output"]) for i in items if i.get("type") == "function_call_output"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_agent_runs_against_it_and_the_model_reads_the_tool_result(
    provider: Provider, api: str, stream: bool
) -> None:
    sim = provider([call("refund_order", {"order_id": "A1"}), reply("Refunded.")])
    agent = Agent(sim.model(api, stream=stream), tools=[refund_order])
    result = agent.run_sync("Refund A1")
    assert result.answer == "Refunded."
    (call_id,) = sim.call_ids
    assert call_id.startswith("call_")
    assert tool_results(sim.requests[1]) == [(call_id, "order A1 refunded")]
    assert [trace.call.id for trace in result.tool_trace] == [call_id]


@pytest.mark.parametrize("api", APIS)
def test_two_identical_requests_get_different_call_ids(provider: Provider, api: str) -> None:
    step = call("lookup", {"id": 1})
    sim = provider([step, reply("done"), step, reply("done")])
    first = Agent(sim.model(api), tools=[lookup]).run_sync("Where is order 1?")
    second = Agent(sim.model(api), tools=[lookup]).run_sync("Where is order 1?")
    first_ids = [t.call.id for t in first.tool_trace]
    second_ids = [t.call.id for t in second.tool_trace]
    assert sim.requests[0] == sim.requests[2]  # the same request ...
    assert first_ids != second_ids  # ... answered with a fresh id, as a provider does
    assert len(set(sim.call_ids)) == len(sim.call_ids) == 2


def test_ids_differ_between_simulators_running_the_same_script(provider: Provider) -> None:
    script = [call(("lookup", {"id": 1}), ("lookup", {"id": 2}))]
    ids = []
    for _ in range(2):
        sim = provider(list(script))
        client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0)
        completion = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        ids += [c.id for c in completion.choices[0].message.tool_calls or ()]
    assert len(ids) == 4
    assert len(set(ids)) == 4


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_every_response_has_usage_and_a_known_price(
    provider: Provider, api: str, stream: bool
) -> None:
    sim = provider([call("lookup", {"id": 7}), reply("Order 7 has shipped.")])
    agent = Agent(sim.model(api, stream=stream), tools=[lookup])
    events = [event async for event in agent.stream("Where is 7?")]
    usages = [e.output.usage for e in events if isinstance(e, ModelResponse)]
    assert len(usages) == 2
    for usage in usages:
        assert usage is not None
        assert usage.input_tokens > 0
        assert usage.output_tokens > 0
        assert usage.cost_usd is not None
        assert usage.cost_usd > 0
    first, second = (usage for usage in usages if usage is not None)
    # the second request carries the first turn and its result: it counts more input
    assert second.input_tokens > first.input_tokens
    (final,) = [e for e in events if isinstance(e, FinalAnswer)]
    assert final.result.usage.cost_usd == pytest.approx(
        (first.cost_usd or 0) + (second.cost_usd or 0)
    )


def test_usage_grows_with_the_text(provider: Provider) -> None:
    sim = provider([reply("short"), reply("a much longer answer " * 20)])
    model = sim.model()
    agent = Agent(model)
    short, long = agent.run_sync("hi"), agent.run_sync("hi " * 200)
    assert long.usage.input_tokens > short.usage.input_tokens
    assert long.usage.output_tokens > short.usage.output_tokens


@pytest.mark.parametrize("api", APIS)
async def test_streamed_deltas_reassemble_to_the_same_call(provider: Provider, api: str) -> None:
    arguments = {"order_id": "A-1234567890", "reason": "the parcel arrived broken"}
    sim = provider([call("refund_order", arguments), reply("It is refunded, as you asked.")])

    @tool(side_effects=True)
    def refund_order(order_id: str, reason: str) -> str:
        """Refund an order."""
        return "refunded"

    agent = Agent(sim.model(api, stream=True), tools=[refund_order])
    pieces: list[str] = []
    texts: list[str] = []
    async for event in agent.stream("Refund A-1234567890", deltas=True):
        if isinstance(event, ToolCallDelta):
            pieces.append(event.arguments_delta)
        elif isinstance(event, TextDelta):
            texts.append(event.text)
    assert len([p for p in pieces if p]) >= 3  # split over several chunks
    assert json.loads("".join(pieces)) == arguments
    assert len(texts) >= 3
    assert "".join(texts) == "It is refunded, as you asked."


def test_parallel_calls_come_in_one_response_with_their_own_ids(provider: Provider) -> None:
    sim = provider([call(("lookup", {"id": 1}), ("lookup", {"id": 2})), reply("Both shipped.")])
    result = Agent(sim.model(), tools=[lookup]).run_sync("Where are 1 and 2?")
    assert [t.result.output for t in result.tool_trace] == ["order 1: shipped", "order 2: shipped"]
    ids = [t.call.id for t in result.tool_trace]
    assert ids == sim.call_ids
    assert len(set(ids)) == 2
    assert [i for i, _ in tool_results(sim.requests[1])] == ids


def test_the_official_sdk_reads_every_shape(provider: Provider) -> None:
    sim = provider(
        [
            call("lookup", {"id": 1}, text="Let me look."),
            reply("Hello there, friend."),
            call(("lookup", {"id": 1}), ("lookup", {"id": 2})),
            reply("Streamed answer, in pieces."),
        ]
    )
    client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0)
    asked: list[Any] = [{"role": "user", "content": "hi"}]
    completion = client.chat.completions.create(model="m", messages=asked)
    message = completion.choices[0].message
    assert message.content == "Let me look."
    assert message.tool_calls is not None
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.model == "gpt-4.1-mini"
    chunks = list(
        client.chat.completions.create(
            model="m", messages=asked, stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Hello there, friend."
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    response = client.responses.create(model="m", input="hi")
    assert [item.type for item in response.output] == ["function_call", "function_call"]
    assert response.usage is not None
    with client.responses.stream(model="m", input="hi") as events:
        kinds = [event.type for event in events]
        final = events.get_final_response()
    assert final.output_text == "Streamed answer, in pieces."
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") >= 3
    assert [m.id for m in client.models.list().data] == ["gpt-4.1-mini"]


def test_the_include_usage_option_is_honoured(provider: Provider) -> None:
    sim = provider([reply("one"), reply("two")])
    client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0)
    asked: list[Any] = [{"role": "user", "content": "hi"}]
    without = list(client.chat.completions.create(model="m", messages=asked, stream=True))
    assert all(chunk.usage is None for chunk in without)
    assert all(chunk.choices for chunk in without)
    with_usage = list(
        client.chat.completions.create(
            model="m", messages=asked, stream=True, stream_options={"include_usage": True}
        )
    )
    assert [chunk.usage is not None for chunk in with_usage].count(True) == 1


def test_rules_answer_by_what_the_request_says(provider: Provider) -> None:
    sim = provider(
        rules=[
            rule(last_user_contains("refund"), call("refund_order", {"order_id": "A1"})),
            rule(last_tool_result_contains("refunded"), reply("Refunded.")),
            rule(after_tool("lookup"), reply("It has shipped.")),
            rule(last_user_contains("where"), call("lookup", {"id": 3})),
        ]
    )
    agent = Agent(sim.model(api="responses"), tools=[refund_order, lookup])
    assert agent.run_sync("Please REFUND order A1").answer == "Refunded."
    assert agent.run_sync("Where is order 3?").answer == "It has shipped."
    assert agent.run_sync("And refund it too").answer == "Refunded."  # rules repeat
    assert len(sim.requests) == 6


def test_a_rule_with_a_list_answers_once_per_step_then_the_list_takes_over(
    provider: Provider,
) -> None:
    sim = provider(
        [reply("from the list")],
        rules=[rule(last_user_contains("hi"), [reply("first"), reply("second")])],
    )
    agent = Agent(sim.model())
    assert [agent.run_sync("hi").answer for _ in range(3)] == ["first", "second", "from the list"]


def test_a_step_can_be_computed_from_the_request(provider: Provider) -> None:
    sim = provider([lambda request: reply(f"You said: {request.last.text}")])
    assert Agent(sim.model()).run_sync("pineapple").answer == "You said: pineapple"


def test_the_requests_are_recorded_for_asserts_on_what_the_model_read(provider: Provider) -> None:
    sim = provider([reply("ok")])
    Agent(sim.model(), instructions="Be brief.").run_sync("Hello?")
    (body,) = sim.requests
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello?"},
    ]
    (exchange,) = sim.exchanges
    assert exchange.request.api == "chat"
    assert exchange.request.headers["authorization"].startswith("Bearer ")
    assert exchange.step == reply("ok")


def test_a_request_with_no_step_left_is_a_500_naming_it_and_fails_the_block() -> None:
    answers: list[str] = []

    def ask_twice() -> None:
        with ProviderSimulator([reply("one")]) as sim:
            client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0)
            asked: list[Any] = [{"role": "user", "content": "1"}]
            client.chat.completions.create(model="m", messages=asked)
            asked = [{"role": "user", "content": "second question"}]
            with pytest.raises(openai.InternalServerError) as error:
                client.chat.completions.create(model="m", messages=asked)
            answers.append(str(error.value))

    with pytest.raises(UnscriptedRequests) as raised:
        ask_twice()
    expected = (
        "no step left for request 2 (POST /v1/chat/completions, newest message: user "
        "'second question'): the list's 1 step(s) are used"
    )
    assert str(raised.value) == expected
    (answer,) = answers
    assert f"tooldeck simulator: {expected}" in answer


def test_a_request_no_rule_matches_names_the_rules(provider: Provider) -> None:
    sim = provider(rules=[rule(last_user_contains("refund"), reply("ok"), times=1)], strict=False)
    agent = Agent(sim.model())
    agent.run_sync("refund")
    with pytest.raises(Exception, match="no step left for request 2"):
        agent.run_sync("refund again")
    (problem,) = sim.unscripted
    assert "1 rule(s), none matched (spent: last_user_contains('refund'))" in problem


def test_a_step_function_that_raises_is_recorded_and_answered_500(provider: Provider) -> None:
    def broken(request: Any) -> Any:
        raise KeyError("no such order")

    sim = provider([broken], strict=False)
    with pytest.raises(Exception, match="the step function raised KeyError"):
        Agent(sim.model()).run_sync("hi")
    assert sim.unscripted == ["the step function raised KeyError('no such order')"]


def test_unknown_paths_and_bad_bodies_get_the_api_error_format(provider: Provider) -> None:
    sim = provider([])
    unknown = httpx.post(f"{sim.base_url}/embeddings", json={})
    assert unknown.status_code == 404
    assert "is not an endpoint of the simulator" in unknown.json()["error"]["message"]
    bad = httpx.post(f"{sim.base_url}/chat/completions", content=b"{nope")
    assert bad.status_code == 400
    assert bad.json()["error"]["message"].startswith("the body is not JSON")
    assert sim.requests == []  # neither took a step
    model = httpx.get(f"{sim.base_url}/models/gpt-4.1-mini").json()
    assert model["owned_by"] == "tooldeck-simulator"


def test_the_model_name_is_the_one_reported_and_priced(provider: Provider) -> None:
    cheap = provider([reply("x" * 400)], model="gpt-4.1-nano")
    dear = provider([reply("x" * 400)], model="gpt-4.1")
    costs = [Agent(sim.model()).run_sync("hi").usage.cost_usd for sim in (cheap, dear)]
    cheap_cost, dear_cost = costs
    assert cheap_cost is not None
    assert dear_cost is not None
    assert dear_cost > cheap_cost > 0


async def test_async_with_serves_and_stops() -> None:
    async with ProviderSimulator([reply("async")]) as sim:
        result = await Agent(sim.model()).run("hi")
    assert result.answer == "async"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{sim.base_url}/models")


def test_the_steps_are_checked_when_the_simulator_is_built() -> None:
    with pytest.raises(TypeError, match=r"step 2 takes steps made by reply\(\), call\(\)"):
        ProviderSimulator([reply("ok"), "hello"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="ProviderSimulator takes a list of steps"):
        ProviderSimulator("hello")
    with pytest.raises(ValueError, match=r"fail.status\(\) takes an HTTP error status"):
        fail.status(200)
    with pytest.raises(TypeError, match="call\\(name, arguments\\) makes one call"):
        call("a", {}, ("b", {}))  # type: ignore[call-overload]


def test_history_of_the_request_reads_the_same_from_both_apis(provider: Provider) -> None:
    seen: list[list[tuple[str, str]]] = []

    def remember(request: Any) -> Any:
        seen.append([(m.role, m.text) for m in request.messages])
        return reply("ok")

    for api in APIS:
        sim = provider([call("lookup", {"id": 1}), remember])
        Agent(sim.model(api), tools=[lookup], instructions="Be brief.").run_sync("Where is 1?")
    assert (
        seen[0]
        == seen[1]
        == [
            ("system", "Be brief."),
            ("user", "Where is 1?"),
            ("assistant", ""),
            ("tool", "order 1: shipped"),
        ]
    )


def test_a_model_built_on_the_simulator_is_a_normal_model(provider: Provider) -> None:
    sim = provider([reply("ok")])
    model = sim.model()
    assert model.name == "openai-chat:gpt-4.1-mini"
    assert sim.model("responses").name == "openai:gpt-4.1-mini"
    settings = ModelSettings(max_tokens=5)
    import asyncio

    output = asyncio.run(model.complete([Message.user("hi")], [], settings))
    assert output.content == "ok"
    assert sim.requests[0]["max_tokens"] == 5


def test_steps_can_be_added_while_it_serves(provider: Provider) -> None:
    sim = provider([reply("first")])
    agent = Agent(sim.model())
    assert agent.run_sync("hi").answer == "first"
    sim.add(call("lookup", {"id": 4}), reply("then this"))
    assert sim.steps_left == 2
    result = Agent(sim.model(), tools=[lookup]).run_sync("hi")
    assert result.answer == "then this"
    with pytest.raises(TypeError, match=r"step 4 takes steps made by reply\(\)"):
        sim.add("not a step")  # type: ignore[arg-type]


def test_a_responses_chain_by_previous_response_id_reads_as_one_conversation(
    provider: Provider,
) -> None:
    sim = provider(
        rules=[
            rule(last_user_contains("where"), call("lookup", {"id": 5})),
            rule(after_tool("lookup"), reply("Shipped.")),
        ]
    )
    model = sim.model("responses", server_state=True)
    agent = Agent(model, tools=[lookup], instructions="Be brief.")
    assert agent.run_sync("Where is 5?").answer == "Shipped."
    first, second = sim.exchanges
    assert "previous_response_id" not in first.request.body
    assert second.request.body["previous_response_id"].startswith("resp_")
    assert [item["type"] for item in second.request.body["input"]] == ["function_call_output"]
    # the stored conversation is read back, so rules see the whole of it
    assert [(m.role, m.text) for m in second.request.messages] == [
        ("system", "Be brief."),
        ("user", "Where is 5?"),
        ("assistant", ""),
        ("tool", "order 5: shipped"),
    ]


def test_an_unknown_previous_response_id_is_a_400_and_takes_no_step(provider: Provider) -> None:
    sim = provider([reply("unused")], strict=False)
    client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0)
    with pytest.raises(
        openai.BadRequestError, match="Previous response with id 'resp_x' not found"
    ):
        client.responses.create(model="m", input="hi", previous_response_id="resp_x")
    assert sim.steps_left == 1


def test_answers_on_a_kept_alive_connection_do_not_wait_for_a_delayed_ack(
    provider: Provider,
) -> None:
    """Nagle's algorithm off: a body written after its headers would otherwise wait for the
    client's delayed ACK (40 ms on Linux) on every request after the first."""
    sim = provider([reply("ok")] * 15)
    times = []
    with httpx.Client() as client:
        for _ in range(15):
            started = time.perf_counter()
            client.post(f"{sim.base_url}/chat/completions", json={"messages": []})
            times.append(time.perf_counter() - started)
    assert statistics.median(times) < 0.025, times
