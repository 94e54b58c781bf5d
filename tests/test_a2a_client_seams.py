"""A2AAgent where it meets the world: a caller that gives up before the remote names its
task, a stream cut while the task works, auth objects, a handoff's conversation, and two
replies to one pause at two server processes. Real processes: the a2a-sdk sample server
(examples/a2a_sample_agent.py), a proxy that cuts streams (tests/_a2a_cut_proxy.py), and
``tooldeck a2a serve``; every model is the provider simulator (fresh call ids)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from a2a.types import GetTaskRequest, TaskState

from _a2a import REFUND_A1, TOKEN, a2a_client, served
from _a2a_remote import cut_sample, sample_server, settled_states
from helpers import tool_messages
from tooldeck import Agent, Approve
from tooldeck.errors import ToolDeckError
from tooldeck.messages import AssistantOutput, Message
from tooldeck.remote import A2AAgent, ApiKey, BearerToken, RemoteReply
from tooldeck.remote.relay import ANSWER_LAST, HANDED_OVER
from tooldeck.testing import ProviderSimulator, call, reply

Provider = Callable[..., ProviderSimulator]


@pytest.fixture(scope="module")
def remote_url() -> Iterator[str]:
    with sample_server() as url:
        yield url


# --- giving up before the remote names its task -----------------------------------------


async def test_a_tool_timeout_before_the_remote_names_its_task_still_cancels_it(
    remote_url: str, provider: Provider
) -> None:
    # "late": the remote makes its task only after 3 s; the caller gives up after 1 s
    remote = A2AAgent(remote_url, allowed=[remote_url])
    await remote.connect()
    sim = provider([call("sample", {"input": "late tool"}), reply("It took too long.")])
    result = await Agent(sim.model(), tools=[remote.as_tool(timeout=1.0)]).run("Ask")
    (read,) = tool_messages(result.messages)
    assert read.startswith("error[tool_timeout]: 'sample' did not finish within 1 s")
    assert result.answer == "It took too long."
    assert await settled_states(remote_url, "late tool") == [TaskState.TASK_STATE_CANCELED]


async def test_a_run_timeout_before_the_remote_names_its_task_says_it_was_cancelled(
    remote_url: str,
) -> None:
    remote = A2AAgent(remote_url, allowed=[remote_url], timeout=1.0)
    with pytest.raises(ToolDeckError) as timed_out:
        await remote.run("late run")
    assert str(timed_out.value) == (
        "the remote agent 'sample' did not finish within 1.0 s (its task was cancelled)"
    )
    assert await settled_states(remote_url, "late run") == [TaskState.TASK_STATE_CANCELED]


async def test_cancelling_the_caller_before_the_remote_names_its_task_cancels_it(
    remote_url: str, provider: Provider
) -> None:
    remote = A2AAgent(remote_url, allowed=[remote_url])
    await remote.connect()
    sim = provider([call("sample", {"input": "late cancel"})], strict=False)
    handle = Agent(sim.model(), tools=[remote.as_tool()]).start("Ask")
    asyncio.get_running_loop().call_later(1.0, handle.cancel)
    result = await handle.result()
    assert str(result.stop_reason) == "cancelled"
    assert await settled_states(remote_url, "late cancel") == [TaskState.TASK_STATE_CANCELED]


# --- a stream that ends while the task works -------------------------------------------


async def test_a_stream_cut_while_the_task_works_is_followed_to_its_end() -> None:
    with cut_sample() as url:
        remote = A2AAgent(url, allowed=[url])
        answer = await remote.run("steady resubscribed")
    assert (answer.state, answer.text) == ("completed", "step one, step two")


async def test_a_cut_stream_is_followed_by_asking_when_the_remote_will_not_stream_again() -> None:
    with cut_sample(refuse_subscribe=True) as url:
        remote = A2AAgent(url, allowed=[url])
        answer = await remote.run("steady polled")
        assert (answer.state, answer.text) == ("completed", "step one, step two")
        slow = A2AAgent(url, allowed=[url], timeout=2.0)
        with pytest.raises(ToolDeckError) as timed_out:
            await slow.run("slow polled")  # works a minute: the polling is bounded
        assert str(timed_out.value) == (
            "the remote agent 'sample' did not finish within 2.0 s (its task was cancelled)"
        )
        assert await settled_states(url, "slow polled") == [TaskState.TASK_STATE_CANCELED]


# --- auth objects -----------------------------------------------------------------------


async def test_auth_objects_speak_the_servers_schemes(tmp_path: Path, provider: Provider) -> None:
    sim = provider([reply("Hello, bearer."), reply("Hello, key.")])
    (tmp_path / "b").mkdir()
    (tmp_path / "k").mkdir()
    with served(tmp_path / "b", sim) as (bearer_url, _):
        bearer = A2AAgent(bearer_url, allowed=[bearer_url], auth=BearerToken(TOKEN))
        said = await bearer.run("Hi")
        wrong = A2AAgent(bearer_url, allowed=[bearer_url], auth=BearerToken("x" * 20))
        with pytest.raises(ToolDeckError) as refused:
            await wrong.run("Hi")
    with served(tmp_path / "k", sim, "--auth", "api-key") as (key_url, _):
        keyed = A2AAgent(key_url, allowed=[key_url], auth=ApiKey(TOKEN))
        said_too = await keyed.run("Hi")
    assert (said.text, said_too.text) == ("Hello, bearer.", "Hello, key.")
    assert "401 Unauthorized" in str(refused.value)
    assert len(sim.requests) == 2  # the refused one reached no model


def test_auth_and_headers_may_not_both_carry_the_secret(remote_url: str) -> None:
    with pytest.raises(ToolDeckError) as both:
        A2AAgent(
            remote_url,
            allowed=[remote_url],
            headers={"authorization": "Bearer a"},
            auth=BearerToken(TOKEN),
        )
    assert str(both.value) == (
        "A2AAgent: headers= and auth= both set authorization; pass the secret once, as auth="
    )


# --- a handoff carries the conversation ------------------------------------------------


async def test_a_handoff_sends_the_remote_the_conversation_it_carries(
    remote_url: str, provider: Provider
) -> None:
    remote = A2AAgent(remote_url, allowed=[remote_url])
    await remote.connect()
    sim = provider([call("lookup", {"order": "A1"}), call("transfer_to_sample", {})])

    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: paid"

    front = Agent(sim.model(), tools=[lookup], handoffs=[remote.as_handoff()], name="front")
    earlier = [
        Message.user("Hi, I am Ada."),
        Message.assistant(AssistantOutput(content="Hello Ada.")),
    ]
    result = await front.run("Refund order A1, please.", history=earlier)
    handed = "\n".join(
        [
            HANDED_OVER,
            "user: Hi, I am Ada.",
            "assistant: Hello Ada.",
            "user: Refund order A1, please.",
            'assistant called lookup({"order": "A1"})',
            "tool result: order A1: paid",
            "",
            ANSWER_LAST,
            "Refund order A1, please.",
        ]
    )
    assert result.answer == f"echo: {handed}"
    assert result.agent == "sample"
    assert result.tainted_by is not None


async def test_a_handoff_that_shows_only_the_last_user_message_sends_only_it(
    remote_url: str, provider: Provider
) -> None:
    remote = A2AAgent(remote_url, allowed=[remote_url])
    await remote.connect()
    sim = provider([call("transfer_to_sample", {})])
    front = Agent(sim.model(), handoffs=[remote.as_handoff(sees="last_user")])
    earlier = [
        Message.user("Hi, I am Ada."),
        Message.assistant(AssistantOutput(content="Hello Ada.")),
    ]
    result = await front.run("Refund order A1.", history=earlier)
    assert result.answer == "echo: Refund order A1."


# --- two replies to one pause at two server processes ----------------------------------


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
async def test_two_replies_to_one_pause_at_two_servers_one_wins_the_other_is_refused(
    tmp_path: Path, provider: Provider, database: str, request: pytest.FixtureRequest
) -> None:
    store = request.getfixturevalue("postgres_dsn") if database == "postgres" else None
    sim = provider([REFUND_A1, reply("Refunded.")])
    with (
        served(tmp_path, sim, store=store) as (first, _),
        served(tmp_path, sim, store=store) as (second, _),
    ):
        here = A2AAgent(first, allowed=[first], auth=BearerToken(TOKEN))
        there = A2AAgent(second, allowed=[second], auth=BearerToken(TOKEN))
        await there.connect()
        paused = await here.run("Refund order A1.")
        assert paused.state == "input_required"
        decided = {paused.pending[0].id: Approve()}
        outcomes = await asyncio.gather(
            here.reply(paused, decided), there.reply(paused, decided), return_exceptions=True
        )
        async with a2a_client(first) as client:
            task = await client.get_task(GetTaskRequest(id=paused.task_id))
    won = [o for o in outcomes if isinstance(o, RemoteReply)]
    lost = [o for o in outcomes if isinstance(o, ToolDeckError)]
    assert len(won) == 1, outcomes
    assert len(lost) == 1, outcomes
    assert (won[0].state, won[0].text) == ("completed", "Refunded.")
    assert "a pause takes one reply" in str(lost[0]), str(lost[0])
    assert "this one was not used" in str(lost[0])
    assert len((tmp_path / "effects.txt").read_text().splitlines()) == 1
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
