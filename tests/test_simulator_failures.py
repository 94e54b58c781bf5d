"""The simulator's failures on demand, and how tooldeck's OpenAI models, ``RetryingModel``
and ``FallbackModel`` take them: 429 (with ``retry-after``), 500, a hang, a stream cut
mid-way, a slow first byte. A request is tried again only when nothing of it reached the
caller (docs/run-control.md, "Fallback and retries")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from tooldeck import Agent, ModelResponse, TextDelta
from tooldeck.errors import ModelRateLimited, ModelUnavailable
from tooldeck.models import FallbackModel, RetryingModel, RetryPolicy
from tooldeck.testing import ProviderSimulator, call, fail, reply

Provider = Callable[..., ProviderSimulator]
NOW = RetryPolicy(max_attempts=3, backoff=0)
ASKED: list[Any] = [{"role": "user", "content": "hi"}]


async def texts_into(seen: list[str], agent: Agent[Any, Any]) -> None:
    """Run ``agent`` with deltas, keeping the text it streamed in ``seen`` (it may raise)."""
    async for event in agent.stream("hi", deltas=True):
        if isinstance(event, TextDelta):
            seen.append(event.text)


def test_a_429_carries_retry_after_in_the_api_error_format(provider: Provider) -> None:
    sim = provider([fail.status(429, retry_after=1.5)])
    answer = httpx.post(f"{sim.base_url}/chat/completions", json={"messages": ASKED})
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "1.5"
    assert answer.json()["error"]["code"] == "rate_limit_exceeded"


def test_the_sdk_waits_retry_after_then_gets_the_next_step(provider: Provider) -> None:
    sim = provider([fail.status(429, retry_after=1), reply("after the wait")])
    client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=1)
    started = time.monotonic()
    completion = client.chat.completions.create(model="m", messages=ASKED)
    assert completion.choices[0].message.content == "after the wait"
    assert time.monotonic() - started >= 1.0  # it honoured retry-after
    assert len(sim.requests) == 2


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_person_reads_which_status_stopped_the_run(provider: Provider, api: str) -> None:
    sim = provider([fail.status(429, retry_after=1), fail.status(500)])
    agent = Agent(sim.model(api))
    with pytest.raises(ModelRateLimited, match=r"answered HTTP 429 \(rate limited\)"):
        agent.run_sync("hi")
    with pytest.raises(ModelUnavailable, match=r"answered HTTP 500 \(server error"):
        agent.run_sync("hi")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_retry_policy_retries_429_and_500_until_an_answer(provider: Provider, api: str) -> None:
    sim = provider([fail.status(429, retry_after=0), fail.status(500), reply("third time")])
    result = Agent(RetryingModel(sim.model(api), NOW)).run_sync("hi")
    assert result.answer == "third time"
    assert len(sim.requests) == 3


def test_retry_policy_gives_up_after_its_attempts_and_says_so(provider: Provider) -> None:
    sim = provider([fail.status(503), fail.status(503), reply("never asked")])
    model = RetryingModel(sim.model(), RetryPolicy(max_attempts=2, backoff=0))
    with pytest.raises(ModelUnavailable) as error:
        Agent(model).run_sync("hi")
    assert "failed 2 times (RetryPolicy.max_attempts)" in (error.value.__notes__ or [])
    assert sim.steps_left == 1


def test_a_400_is_not_retried(provider: Provider) -> None:
    sim = provider([fail.status(400, message="bad field 'x'"), reply("never asked")])
    with pytest.raises(Exception, match="bad field 'x'"):
        Agent(RetryingModel(sim.model(), NOW)).run_sync("hi")
    assert len(sim.requests) == 1


async def test_fallback_takes_the_request_when_the_primary_fails(provider: Provider) -> None:
    primary = provider([fail.status(500)], model="gpt-4.1")
    backup = provider([reply("from the backup")], model="gpt-4.1-mini")
    agent = Agent(FallbackModel(primary.model(), backup.model()))
    events = [event async for event in agent.stream("hi")]
    (response,) = [event for event in events if isinstance(event, ModelResponse)]
    assert response.output.content == "from the backup"
    assert response.output.model == "openai-chat:gpt-4.1-mini"  # who answered the round
    assert len(primary.requests) == len(backup.requests) == 1


def test_a_hang_lasts_until_the_client_gives_up(provider: Provider) -> None:
    sim = provider([fail.hang(), reply("the next step")])
    agent = Agent(RetryingModel(sim.model(timeout=1.0), NOW))
    assert agent.run_sync("hi").answer == "the next step"
    with_timeout = provider([fail.hang()])
    with pytest.raises(ModelUnavailable, match="timed out"):
        Agent(with_timeout.model(timeout=0.5)).run_sync("hi")


def test_the_simulator_stops_promptly_while_a_request_hangs() -> None:
    sim = ProviderSimulator([fail.hang()])
    sim.start()
    outcome: list[object] = []

    def ask() -> None:
        try:
            outcome.append(httpx.post(f"{sim.base_url}/chat/completions", json={}, timeout=120))
        except httpx.HTTPError as error:
            outcome.append(error)

    client = threading.Thread(target=ask)
    client.start()
    sim.wait_for_requests(1)  # held now
    started = time.monotonic()
    sim.stop()
    client.join(timeout=60)
    assert time.monotonic() - started < 10  # not the 120 s the client would wait
    assert not client.is_alive()
    (answered,) = outcome
    assert isinstance(answered, httpx.Response)
    assert answered.status_code == 503
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{sim.base_url}/models")


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_stream_cut_after_text_reached_the_caller_is_not_retried(
    provider: Provider, api: str
) -> None:
    # two text deltas through: Chat's role chunk first, Responses' four opening events first
    cut = fail.cut_stream(after_chunks=3 if api == "chat" else 6)
    primary = provider([cut, reply("never asked")])
    backup = provider([reply("the backup, never asked")])
    model = FallbackModel(RetryingModel(primary.model(api, stream=True), NOW), backup.model())
    seen: list[str] = []
    with pytest.raises(ModelUnavailable) as error:
        await texts_into(seen, Agent(model))
    assert "".join(seen) == "This answer "  # the caller had text: no silent restart
    assert "closed the connection before the response was complete" in str(error.value)
    assert len(primary.requests) == 1
    assert backup.requests == []


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_stream_cut_before_anything_reached_the_caller_is_retried(
    provider: Provider, api: str
) -> None:
    # Chat Completions' first chunk carries only the role; Responses' first two events
    # only announce the response: nothing the caller reads.
    cut = fail.cut_stream(after_chunks=1 if api == "chat" else 2)
    sim = provider([cut, reply("the second try")])
    model = RetryingModel(sim.model(api, stream=True), NOW)
    texts = [
        event.text
        async for event in Agent(model).stream("hi", deltas=True)
        if isinstance(event, TextDelta)
    ]
    assert "".join(texts) == "the second try"
    assert len(sim.requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_cut_response_without_deltas_is_retried_whole(provider: Provider, stream: bool) -> None:
    cut_call = fail.cut_stream(after_chunks=3, answer=call("lookup", {"id": 1}))
    sim = provider([cut_call, reply("whole this time")])
    result = Agent(RetryingModel(sim.model(stream=stream), NOW)).run_sync("hi")
    assert result.answer == "whole this time"
    assert result.tool_trace == ()  # the cut call never ran
    assert len(sim.requests) == 2


def test_a_cut_response_is_what_the_sdk_sees_as_a_broken_connection(provider: Provider) -> None:
    sim = provider([fail.cut_stream(after_chunks=2), fail.cut_stream()])
    client = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0)
    received: list[str] = []

    def read() -> None:
        for chunk in client.chat.completions.create(model="m", messages=ASKED, stream=True):
            received.append(chunk.choices[0].delta.content or "")

    with pytest.raises(openai.APIConnectionError):
        read()
    assert len(received) == 2  # exactly the chunks before the cut
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=ASKED)  # half a body


def test_a_slow_first_byte_answers_late(provider: Provider) -> None:
    sim = provider([fail.slow_first_byte(1.0, answer=reply("late, but here"))])
    started = time.monotonic()
    assert Agent(sim.model()).run_sync("hi").answer == "late, but here"
    assert time.monotonic() - started >= 1.0


def test_a_slow_first_byte_past_the_timeout_is_a_timeout_then_retried(
    provider: Provider,
) -> None:
    sim = provider([fail.slow_first_byte(30.0), reply("quick")])
    model = sim.model(stream=True, timeout=0.5)
    with pytest.raises(ModelUnavailable, match="timed out"):
        Agent(model).run_sync("hi")
    assert Agent(RetryingModel(model, NOW)).run_sync("hi").answer == "quick"


def test_a_client_killed_mid_stream_leaves_the_simulator_serving(provider: Provider) -> None:
    long = reply("word " * 2000)
    sim = provider([long, reply("still here")])
    with httpx.stream(
        "POST", f"{sim.base_url}/chat/completions", json={"messages": ASKED, "stream": True}
    ) as response:
        next(response.iter_bytes())  # the client goes away after the first bytes
    assert Agent(sim.model()).run_sync("hi").answer == "still here"
