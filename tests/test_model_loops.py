"""One agent, many event loops: ``run_sync`` from several threads at once, ``asyncio.run``
after ``asyncio.run``, as a worker pool or a script uses it.

A provider SDK's client keeps its connections on the event loop that first used them; the
adapters keep a client per loop when they built it (``tooldeck.models._loops``). Proved
against servers on loopback that keep connections alive between requests, as providers
do: the provider simulator (OpenAI, both APIs), and the Anthropic and Gemini fakes in
keep-alive mode. Every answer names the question it answers, so a thread that got
another's answer shows.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from _anthropic_server import MODEL as CLAUDE
from _anthropic_server import anthropic_server, message_body, text
from _gemini_server import MODEL as GEMINI
from _gemini_server import gemini_server, response_body, text_part
from _loopback import LoopbackServer, Recorded, Reply
from tooldeck import Agent
from tooldeck.errors import ModelError
from tooldeck.testing import ProviderSimulator, SimRequest, reply
from tooldeck.testing.simulator import API_KEY

QUESTIONS = [f"question {number}" for number in range(7)]
ANOTHER_LOOP = (
    "the client passed in (client=) holds connections of another event loop, so this loop "
    "cannot use it (RuntimeError: Event loop is closed; the request may have reached the "
    "provider, its answer is lost): a model shared by threads (run_sync) or asyncio.run calls "
    "needs a client for every loop. Pass no client (tooldeck makes one per loop), or build the "
    "model in each thread"
)


def answer_to(question: str) -> str:
    return f"You asked: {question}"


def answer_the_question(request: SimRequest) -> Any:
    assert request.last is not None
    return reply(answer_to(request.last.text))


def in_threads(agent: Agent[Any, Any], prompts: list[str]) -> list[str]:
    """``run_sync`` of each prompt in its own thread, all started at once."""
    start = threading.Barrier(len(prompts))

    def ask(prompt: str) -> str:
        start.wait(timeout=30)
        return agent.run_sync(prompt).answer

    with ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(ask, prompts))


def assert_every_loop_answers(agent: Agent[Any, Any]) -> None:
    """This thread's loop, then four threads at once, then two ``asyncio.run`` in a row."""
    assert agent.run_sync(QUESTIONS[0]).answer == answer_to(QUESTIONS[0])
    assert in_threads(agent, QUESTIONS[1:5]) == [answer_to(q) for q in QUESTIONS[1:5]]
    for question in QUESTIONS[5:]:
        assert asyncio.run(agent.run(question)).answer == answer_to(question)


@pytest.fixture
def asyncio_errors(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """What asyncio logged as errors (a task that failed with nobody awaiting it...)."""
    caplog.set_level(logging.ERROR, logger="asyncio")

    def logged() -> list[str]:
        gc.collect()  # a client let go is finalised now, not in a later test
        return [record.getMessage() for record in caplog.records if record.name == "asyncio"]

    return logged


def settings(client: Any) -> dict[str, Any]:
    """What a client sends with: key, address, retries, timeout, headers (those with values)."""
    headers = {
        name: value for name, value in client.default_headers.items() if isinstance(value, str)
    }
    return {
        "api_key": client.api_key,
        "base_url": client.base_url,
        "max_retries": client.max_retries,
        "timeout": client.timeout,
        "headers": headers,
    }


async def client_of(model: Any) -> Any:
    """The model's client on the running loop."""
    return model.client


# -- OpenAI, through the provider simulator --------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_one_openai_agent_answers_from_threads_at_once_and_from_new_loops(
    provider: Callable[..., ProviderSimulator],
    api: str,
    stream: bool,
    asyncio_errors: Callable[[], list[str]],
) -> None:
    sim = provider([answer_the_question] * len(QUESTIONS))
    agent = Agent(sim.model(api, stream=stream))  # type: ignore[call-overload]
    assert_every_loop_answers(agent)
    asked = sorted(exchange.request.messages[-1].text for exchange in sim.exchanges)
    assert asked == QUESTIONS  # each question asked once: no run failed and was retried
    assert asyncio_errors() == []


def test_each_loop_gets_a_client_built_like_the_first_and_a_closed_loops_is_let_go(
    provider: Callable[..., ProviderSimulator], asyncio_errors: Callable[[], list[str]]
) -> None:
    sim = provider([answer_the_question] * 2)
    model = sim.model(timeout=7.0)
    built = model.client  # outside any loop: the client built with the model
    agent = Agent(model)
    assert asyncio.run(agent.run(QUESTIONS[0])).answer == answer_to(QUESTIONS[0])
    assert asyncio.run(client_of(model)) is not built  # that loop ended; this one is new
    assert built.is_closed()  # let go when a new loop came: closed as far as it could be

    async def ask_and_close() -> Any:
        client = model.client
        assert (await agent.run(QUESTIONS[1])).answer == answer_to(QUESTIONS[1])
        await model.aclose()
        return client

    second = asyncio.run(ask_and_close())
    assert second is not built
    assert second.is_closed()
    assert settings(second) == settings(built)
    assert (second.max_retries, second.timeout) == (0, 7.0)
    assert asyncio_errors() == []


def test_aclose_after_a_loop_ended_closes_its_client_as_far_as_it_can(
    provider: Callable[..., ProviderSimulator], asyncio_errors: Callable[[], list[str]]
) -> None:
    sim = provider([answer_the_question])
    model = sim.model()
    agent = Agent(model)

    async def ask() -> Any:
        client = model.client
        assert (await agent.run(QUESTIONS[0])).answer == answer_to(QUESTIONS[0])
        return client

    used = asyncio.run(ask())  # a kept-alive connection holds the loop, closed now
    assert not used.is_closed()
    asyncio.run(model.aclose())
    assert used.is_closed()
    assert asyncio_errors() == []


def test_a_client_passed_in_is_used_on_every_loop_and_another_loop_is_told_what_to_do(
    provider: Callable[..., ProviderSimulator],
) -> None:
    from openai import AsyncOpenAI

    from tooldeck.models.openai import OpenAIChatModel

    sim = provider([answer_the_question] * 2)
    client = AsyncOpenAI(
        base_url=sim.base_url, api_key=API_KEY, max_retries=0, default_headers={"x-mine": "1"}
    )
    model = OpenAIChatModel(sim.model_name, client=client)
    agent = Agent(model)

    async def ask(question: str) -> str:
        assert model.client is client
        try:
            return (await agent.run(question)).answer
        finally:
            await model.aclose()  # the owner's client: left open

    assert asyncio.run(ask(QUESTIONS[0])) == answer_to(QUESTIONS[0])
    assert not client.is_closed()
    with pytest.raises(ModelError) as caught:
        asyncio.run(ask(QUESTIONS[1]))
    assert str(caught.value) == f"openai-chat:{sim.model_name}: " + ANOTHER_LOOP
    # Each went out through it (the second may have been sent before its answer was lost).
    assert {exchange.request.headers["x-mine"] for exchange in sim.exchanges} == {"1"}
    assert not client.is_closed()
    asyncio.run(client.close())


def test_aclose_closes_each_loops_client_where_it_can_and_the_model_goes_on(
    provider: Callable[..., ProviderSimulator],
) -> None:
    sim = provider([answer_the_question] * 5)
    model = sim.model()
    agent = Agent(model)
    running = asyncio.new_event_loop()  # a loop running in another thread
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    idle = asyncio.new_event_loop()  # a loop between runs, as a worker's run_sync loop is

    def on_running(work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, running).result(timeout=30)

    async def ask_and_close() -> Any:
        client = model.client
        assert (await agent.run(QUESTIONS[2])).answer == answer_to(QUESTIONS[2])
        await model.aclose()
        return client

    try:
        assert on_running(agent.run(QUESTIONS[0])).answer == answer_to(QUESTIONS[0])
        assert idle.run_until_complete(agent.run(QUESTIONS[1])).answer == answer_to(QUESTIONS[1])
        there, waiting = on_running(client_of(model)), idle.run_until_complete(client_of(model))
        here = asyncio.run(ask_and_close())
        assert here.is_closed()  # this loop's: closed
        deadline = time.monotonic() + 10
        while not there.is_closed() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert there.is_closed()  # the running loop's: closed on that loop
        assert not waiting.is_closed()  # the idle loop's cannot be: let go

        for loop_runs, question in (
            (on_running, QUESTIONS[3]),
            (idle.run_until_complete, QUESTIONS[4]),
        ):
            assert loop_runs(agent.run(question)).answer == answer_to(question)
        assert on_running(client_of(model)) not in (there, here)
        assert idle.run_until_complete(client_of(model)) is not waiting
        on_running(model.aclose())
    finally:
        running.call_soon_threadsafe(running.stop)
        thread.join(timeout=30)
        running.close()
        idle.close()


def test_an_azure_model_gets_an_azure_client_per_loop_built_like_the_first() -> None:
    from openai import AsyncAzureOpenAI

    from tooldeck.models.openai import OpenAIChatModel

    model = OpenAIChatModel.azure(
        "my-gpt",
        endpoint="https://example-resource.openai.azure.com",
        api_version="2024-10-21",
        api_key="az-key",
        max_retries=1,
        timeout=9.0,
    )
    first, second = asyncio.run(client_of(model)), asyncio.run(client_of(model))
    assert first is model.client  # outside a loop: the one built with the model
    assert isinstance(second, AsyncAzureOpenAI)
    assert second is not first
    assert settings(second) == settings(first)
    assert second.default_query == {"api-version": "2024-10-21"}


# -- Anthropic and Gemini, through their loopback fakes ---------------------------------


def _answering(server: LoopbackServer, body: Callable[[str], dict[str, Any]]) -> None:
    def answer(request: Recorded) -> Reply:
        return Reply(body=body(answer_to(_question(request.body))))

    server.answer = answer


def _question(body: dict[str, Any]) -> str:
    """The newest user text of an Anthropic or Gemini request body."""
    last = (body.get("messages") or body["contents"])[-1]
    content = last.get("content", last.get("parts"))
    return content if isinstance(content, str) else str(content[-1]["text"])


def anthropic_model(server: LoopbackServer, **options: Any) -> Any:
    from tooldeck.models.anthropic import AnthropicModel

    if "client" not in options:
        options.update(base_url=server.root, api_key="sk-ant-test", max_retries=0)
    return AnthropicModel(CLAUDE, **options)


def gemini_model(server: LoopbackServer, **options: Any) -> Any:
    from tooldeck.models.gemini import GeminiModel

    if "client" not in options:
        options.update(base_url=server.root, api_key="AIza-test", max_retries=0)
    return GeminiModel(GEMINI, **options)


def test_one_anthropic_agent_answers_from_threads_at_once_and_from_new_loops(
    asyncio_errors: Callable[[], list[str]],
) -> None:
    with anthropic_server(keep_alive=True) as server:
        _answering(server, lambda said: message_body([text(said)]))
        assert_every_loop_answers(Agent(anthropic_model(server)))
    assert sorted(_question(body) for body in server.bodies) == QUESTIONS
    assert asyncio_errors() == []


def test_a_client_passed_to_anthropic_is_used_on_every_loop_and_another_loop_is_told() -> None:
    from anthropic import AsyncAnthropic

    with anthropic_server(keep_alive=True) as server:
        _answering(server, lambda said: message_body([text(said)]))
        client = AsyncAnthropic(base_url=server.root, api_key="sk-ant-test", max_retries=0)
        agent = Agent(anthropic_model(server, client=client))
        assert asyncio.run(agent.run(QUESTIONS[0])).answer == answer_to(QUESTIONS[0])
        with pytest.raises(ModelError) as caught:
            asyncio.run(agent.run(QUESTIONS[1]))
    assert str(caught.value) == f"anthropic:{CLAUDE}: " + ANOTHER_LOOP
    assert not client.is_closed()
    asyncio.run(client.close())


def test_one_gemini_agent_answers_from_threads_at_once_and_from_new_loops(
    asyncio_errors: Callable[[], list[str]],
) -> None:
    # google-genai keeps a connection pool per loop itself: the adapter builds one client.
    with gemini_server(keep_alive=True) as server:
        _answering(server, lambda said: response_body([text_part(said)]))
        assert_every_loop_answers(Agent(gemini_model(server)))
    assert sorted(_question(body) for body in server.bodies) == QUESTIONS
    assert asyncio_errors() == []


def test_a_client_passed_to_gemini_is_used_on_every_loop() -> None:
    from google import genai
    from google.genai import types

    with gemini_server(keep_alive=True) as server:
        _answering(server, lambda said: response_body([text_part(said)]))
        options = types.HttpOptions(base_url=server.root, headers={"x-mine": "1"})
        client = genai.Client(api_key="AIza-test", http_options=options)
        model = gemini_model(server, client=client)
        assert model.client is client
        assert_every_loop_answers(Agent(model))  # the SDK's client is safe on every loop
    assert [request.headers["x-mine"] for request in server.requests] == ["1"] * len(QUESTIONS)


# -- the embedded local model ----------------------------------------------------------


@pytest.mark.slow
def test_one_local_model_answers_from_two_threads_at_once() -> None:
    # No client and no loop-bound state: each turn runs in a worker thread under the model's
    # lock (one llama.cpp context), so two threads' turns take their turns.
    from tooldeck.models.local import LocalModel

    agent = Agent(LocalModel(max_tokens=8))
    start = threading.Barrier(2)

    def ask(prompt: str) -> Any:
        start.wait(timeout=30)
        return agent.run_sync(prompt)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(ask, ["Say hello.", "Name a colour."]))
    assert [result.stop_reason for result in results] == ["answer", "answer"]
    assert all(result.answer.strip() for result in results)
    assert asyncio.run(agent.run("Say hello.")).stop_reason == "answer"  # and a new loop
