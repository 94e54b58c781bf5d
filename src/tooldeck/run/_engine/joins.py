"""Where messages sent to a working run join its conversation: before each model request
(those ``RunHandle.send`` put in the run's inbox, then those its capabilities bring with
``join_messages``, as ``DurableAgent.send``'s do) and, for the capabilities', as the run
would end with its answer (the run then asks again, so they are answered). A run with
neither an inbox nor capabilities pays only the loop's test of the two attributes."""

from __future__ import annotations

from typing import Any

from tooldeck.errors import MiddlewareError
from tooldeck.results import StopReason
from tooldeck.run._engine.hooks import Hooks
from tooldeck.run._engine.state import RunState, attach
from tooldeck.run.capabilities import RunView
from tooldeck.run.events import MessageJoined
from tooldeck.run.policy import RunPolicy


async def joins_before_request(
    hooks: Hooks | None, state: RunState, policy: RunPolicy, deps: Any
) -> tuple[MessageJoined, ...]:
    """The messages sent to the run that join it ahead of this round's request: those
    ``RunHandle.send`` put in its inbox, then those its capabilities bring."""
    joins: list[MessageJoined] = []
    if state.inbox is not None and state.inbox.waiting:
        joins.append(state.inbox.join(state.messages, policy.rounds, state.agent))
    if hooks is not None and hooks.joining:
        joined = await _joined(hooks, state, policy, deps)
        if joined is not None:
            joins.append(joined)
    return tuple(joins)


async def joined_as_it_answers(
    hooks: Hooks | None, state: RunState, policy: RunPolicy, deps: Any
) -> MessageJoined | None:
    """As the run would end with its answer: the messages the capabilities bring now (the
    run then asks again, so they are answered), or None to end."""
    if hooks is None or not hooks.joining:
        return None
    return await _joined(hooks, state, policy, deps, policy.rounds + 1)


async def _joined(
    hooks: Hooks, state: RunState, policy: RunPolicy, deps: Any, round_: int | None = None
) -> MessageJoined | None:
    """The messages the capabilities bring now (``join_messages``), added to the
    conversation ahead of the request of ``round_`` (the next); None when none came."""
    try:
        seen = RunView(state.run_id, state.agent, policy.rounds, deps, (), state.states)
        messages = await hooks.joined(seen)
    except MiddlewareError as error:
        raise attach(error, state, StopReason.MIDDLEWARE_ERROR) from error.__cause__
    if not messages:
        return None
    state.messages.extend(messages)
    return MessageJoined(policy.rounds if round_ is None else round_, messages, True, state.agent)
