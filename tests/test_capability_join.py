"""``Capability.join_messages``: the messages a capability brings join the conversation after
the round's results, ahead of the next model request, once (read on the provider
simulator's recorded request bodies, fresh call ids); brought as the run answers, they make
it ask again; a hook that brings what is not a user message ends the run naming it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from helpers import said
from tooldeck import Agent, ScriptedModel, tool
from tooldeck.errors import MiddlewareError
from tooldeck.messages import Message
from tooldeck.results import StopReason
from tooldeck.run.capabilities import Capability, RunView
from tooldeck.run.events import MessageJoined, ModelRequest
from tooldeck.testing import call, reply


@tool
def survey(bay: str) -> str:
    """Survey a bay."""
    return f"bay {bay}: calm"


class Mailbox(Capability):
    """Brings the messages posted for the request of a given round (1 for the first)."""

    def __init__(self, posted: dict[int, list[Message]]) -> None:
        self.posted = posted
        self.asked: list[int] = []

    async def join_messages(self, ctx: RunView) -> Sequence[Message]:
        self.asked.append(ctx.round)
        return self.posted.pop(ctx.round, [])


async def test_a_message_a_capability_brings_joins_before_the_next_request_once(
    provider: Any,
) -> None:
    sim = provider([call("survey", {"bay": "north"}), reply("Calm, briefly.")])
    mailbox = Mailbox({2: [Message.user("Keep it brief.")]})
    agent = Agent(sim.model(), [survey], capabilities=[mailbox])

    events = [event async for event in agent.stream("Survey the north bay.")]

    assert said(sim.requests[1]) == [
        ("user", "Survey the north bay."),
        ("assistant", "survey"),
        ("tool", "bay north: calm"),
        ("user", "Keep it brief."),
    ]
    joined = [e for e in events if isinstance(e, MessageJoined)]
    assert [(e.round, [m.content for m in e.messages], e.sent) for e in joined] == [
        (2, ["Keep it brief."], True)
    ]
    requests = [e for e in events if isinstance(e, ModelRequest)]
    assert events.index(joined[0]) == events.index(requests[1]) - 1  # just before it
    assert mailbox.asked == [1, 2, 2]  # before each request, and as the run answered


async def test_a_message_a_capability_brings_as_the_run_answers_is_answered(
    provider: Any,
) -> None:
    sim = provider([reply("The tides are lunar."), reply("Lunar, in brief.")])

    class AsItAnswers(Mailbox):
        async def join_messages(self, ctx: RunView) -> Sequence[Message]:
            self.asked.append(ctx.round)
            return [Message.user("Shorter, please.")] if len(self.asked) == 2 else []

    mailbox = AsItAnswers({})
    result = await Agent(sim.model(), capabilities=[mailbox]).run("Explain tides.")

    assert result.answer == "Lunar, in brief."
    assert said(sim.requests[1]) == [
        ("user", "Explain tides."),
        ("assistant", "The tides are lunar."),
        ("user", "Shorter, please."),
    ]
    assert [m.content for m in result.messages] == [
        "Explain tides.",
        "The tides are lunar.",
        "Shorter, please.",
        "Lunar, in brief.",
    ]


async def test_a_capability_that_brings_what_is_not_a_user_message_ends_the_run_naming_it(
    provider: Any,
) -> None:
    sim = provider([])
    wrong = Mailbox({1: [Message(role="assistant", content="I said so.")]})

    with pytest.raises(MiddlewareError) as stopped:
        await Agent(sim.model(), capabilities=[wrong]).run("Hi.")

    assert str(stopped.value).startswith(
        "middleware Mailbox.join_messages returned [Message(role='assistant'"
    )
    assert str(stopped.value).endswith("expected a list of user Messages (Message.user(...))")
    assert stopped.value.result is not None
    assert stopped.value.result.stop_reason == StopReason.MIDDLEWARE_ERROR
    assert sim.requests == []  # nothing was asked


def test_a_join_messages_hook_must_be_async() -> None:
    class Sync(Capability):
        def join_messages(self, ctx: RunView) -> Sequence[Message]:
            return ()

    with pytest.raises(TypeError) as refused:
        Agent(ScriptedModel([]), capabilities=[Sync()])

    assert str(refused.value) == (
        "Sync.join_messages must be an async method (async def join_messages...)"
    )
