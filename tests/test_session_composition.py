"""Sessions with composition, on SQLite and a real PostgreSQL: agents as tools and middleware.

An agent tool's inner run is part of the outer run's turn, not a turn of its own: the session
keeps the outer conversation (the agent call and its answer); the inner messages stay on the
call's ``ToolTrace.inner_trace``, never in the session. A pause inside an agent tool is the
outer run's pause: stored with the outer checkpoint, resumed once from the session.
"""

from __future__ import annotations

from typing import Any

import pytest

from _stores import Store
from helpers import answer, call, calls
from tooldeck import Agent, Approve, Message, ScriptedModel, tool
from tooldeck.errors import CheckpointError, MiddlewareError
from tooldeck.run.middleware import Middleware, ModelCall, RequestContext

deleted: list[str] = []


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


def roles(messages: tuple[Message, ...]) -> list[str]:
    return [message.role for message in messages]


def cleaner(*script: Any) -> Agent[Any, Any]:
    return Agent(ScriptedModel(list(script)), [delete_file], instructions="Delete files.")


async def test_an_agent_tool_pause_is_stored_and_resumed_once_from_the_session(
    store: Store,
) -> None:
    deleted.clear()
    session = store.session()
    inner = cleaner(calls(call("delete_file", "c1", path="a.txt")), answer("gone"))
    outer_model = ScriptedModel(
        [calls(call("cleaner", "o1", input="delete a.txt")), answer("All clean.")]
    )
    outer = Agent(outer_model, [inner.as_tool(name="cleaner", description="Deletes files.")])

    paused = await outer.run("tidy up", session=session)

    (pending,) = paused.pending
    assert (pending.id, pending.path) == ("o1/c1", ("cleaner",))
    stored = await session.load()
    assert stored.messages == ()  # a pause commits its checkpoint, not half a turn
    assert stored.pending == paused.checkpoint

    done = await outer.resume(session=session, decisions={"o1/c1": Approve(by="ops")})

    assert done.answer == "All clean."
    assert deleted == ["a.txt"]
    history = await session.load()
    assert roles(history.messages) == ["user", "assistant", "tool", "assistant"]
    assert history.messages[2].content == "gone"  # the inner answer is the observation
    assert "deleted a.txt" not in [m.content for m in history.messages]  # inner run not stored
    assert history.pending is None
    with pytest.raises(CheckpointError, match="holds no paused run to resume"):
        await outer.resume(session=session, decisions={"o1/c1": Approve()})
    assert deleted == ["a.txt"]


async def test_an_agent_tool_with_full_history_sees_the_sessions_earlier_turns(
    store: Store,
) -> None:
    session = store.session()
    inner_model = ScriptedModel([answer("it was about cats")])
    inner = Agent(inner_model)
    outer = Agent(
        ScriptedModel(
            [
                answer("Cats are great."),
                calls(call("recall", "o1", input="what was the topic?")),
                answer("We talked about cats."),
            ]
        ),
        [inner.as_tool(name="recall", description="Recalls.", sees="all")],
    )
    await outer.run("tell me about cats", session=session)

    await outer.run("what did we discuss?", session=session)

    (request,) = inner_model.requests
    assert [m.content for m in request.messages] == [
        "tell me about cats",
        "Cats are great.",
        "what did we discuss?",
        "what was the topic?",
    ]
    history = await session.load()
    assert [m.content for m in history.messages if m.role != "assistant" or m.content] == [
        "tell me about cats",
        "Cats are great.",
        "what did we discuss?",
        "it was about cats",
        "We talked about cats.",
    ]


class Redact(Middleware):
    """Hides the word "secret" from the model; the conversation itself keeps it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str | None, ...]] = []

    async def before_request(self, request: ModelCall, ctx: RequestContext) -> ModelCall:
        messages = tuple(
            m.model_copy(update={"content": (m.content or "").replace("secret", "[hidden]")})
            for m in request.messages
        )
        self.sent.append(tuple(m.content for m in messages))
        return ModelCall(messages, request.settings, request.instructions)


async def test_middleware_sees_the_sessions_history_and_changes_only_what_is_sent(
    store: Store,
) -> None:
    session = store.session()
    redact = Redact()
    agent = Agent(ScriptedModel([answer("noted"), answer("ok")]), middleware=[redact])

    await agent.run("my secret is 42", session=session)
    await agent.run("and again", session=session)

    assert redact.sent[1] == ("my [hidden] is 42", "noted", "and again")
    history = await session.load()
    assert [m.content for m in history.messages] == ["my secret is 42", "noted", "and again", "ok"]


class Broken(Middleware):
    async def before_request(self, request: ModelCall, ctx: RequestContext) -> ModelCall:
        if ctx.round == 2:
            raise RuntimeError("the guard service is down")
        return request


async def test_a_run_ended_by_middleware_commits_nothing_and_keeps_its_journal(
    store: Store,
) -> None:
    session = store.session()
    await Agent(ScriptedModel([answer("first")])).run("one", session=session)
    kept = await session.load()
    agent = Agent(
        ScriptedModel([calls(call("echo", "e1", text="hi")), answer("never")]),
        [echo],
        middleware=[Broken()],
    )

    with pytest.raises(MiddlewareError) as stopped:
        await agent.run("two", session=session, run_id="two")

    assert (
        "session 'chat' keeps this run as it stood: run it again with run_id='two' to go on "
        "with it, or the session's next run closes it"
    ) in stopped.value.__notes__
    history = await session.load()
    assert (history.messages, history.head) == (kept.messages, kept.head)  # nothing committed
    assert history.unfinished is not None
    assert history.unfinished.run_id == "two"


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return text
