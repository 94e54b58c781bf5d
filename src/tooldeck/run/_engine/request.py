"""Asking the model for one turn: within the run's time, through middleware, with deltas.

Every request goes through ``ask``; the plain case (no middleware, no deltas, no history
strategy) is one awaited ``model.complete`` inside ``bounded``. A history strategy chooses
the messages sent before middleware sees them. With deltas the loop runs ``ask`` as a task
(``with_deltas``) whose writing comes out as events while it runs (middleware included), and
leaving the stream cancels it, closing the provider's response.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tooldeck._untrusted import repaired
from tooldeck.errors import MiddlewareError, ModelError
from tooldeck.messages import AssistantOutput, Message, ToolSpec
from tooldeck.models.base import Model, ModelSettings, TextChunk
from tooldeck.results import StopReason
from tooldeck.run._engine.hooks import Hooks
from tooldeck.run._engine.state import RunState, attach
from tooldeck.run.capabilities import ModelCall, RequestContext
from tooldeck.run.events import TextDelta, ToolCallDelta
from tooldeck.run.history import HistoryStrategy, prepare_history
from tooldeck.run.policy import RunPolicy

T = TypeVar("T")
Delta = TextDelta | ToolCallDelta
Emit = Callable[[Delta], None]


async def bounded(state: RunState, policy: RunPolicy, request: Awaitable[T]) -> T:
    """Await a model request within the run's remaining time; failures keep the run."""
    remaining = None if policy.limits.max_duration_s is None else policy.remaining_s()
    scope = None
    try:
        if remaining is None:
            return await request
        async with asyncio.timeout(remaining) as scope:
            return await request
    except ModelError as error:
        raise attach(error, state, StopReason.MODEL_ERROR) from None
    except Exception as error:
        if scope is not None and scope.expired():
            raise attach(policy.out_of_time(), state, StopReason.MAX_DURATION_S) from None
        failure = ModelError(f"the model call failed: {type(error).__name__}: {error}")
        raise attach(failure, state, StopReason.MODEL_ERROR) from error


@dataclass(slots=True)  # treat as read-only (made for every run; frozen costs 3x)
class Asking:
    """How a run asks its model, the same for every request of the run."""

    model: Model
    instructions: str
    hooks: Hooks | None = None
    """The request hooks of the run's capabilities (None: none)."""
    history: HistoryStrategy | None = None
    """What each request carries of a long conversation (None: all of it)."""


def ask(
    asking: Asking,
    state: RunState,
    policy: RunPolicy,
    specs: tuple[ToolSpec, ...],
    settings: ModelSettings,
    deps: Any,
    emit: Emit | None = None,
) -> Awaitable[AssistantOutput]:
    """The model's turn for the run's next request: its history chosen by the strategy,
    through middleware, with ``emit`` given each delta as the model writes. Nothing of that
    in use: one awaited ``model.complete`` within the run's time."""
    if emit is None and asking.hooks is None and asking.history is None:
        turn = asking.model.complete(state.messages, specs, settings, asking.instructions)
        return bounded(state, policy, turn)
    return _ask_through(asking, state, policy, specs, settings, deps, emit)


async def _ask_through(
    asking: Asking,
    state: RunState,
    policy: RunPolicy,
    specs: tuple[ToolSpec, ...],
    settings: ModelSettings,
    deps: Any,
    emit: Emit | None,
) -> AssistantOutput:
    """``ask`` with a history strategy, middleware or deltas in use."""
    model, hooks = asking.model, asking.hooks

    def complete(
        messages: Sequence[Message], settings: ModelSettings, instructions: str
    ) -> Awaitable[AssistantOutput]:
        if emit is None:
            turn = model.complete(messages, specs, settings, instructions)
        else:
            turn = _streamed_turn(model, messages, specs, settings, instructions, policy, emit)
        return bounded(state, policy, turn)

    messages: Sequence[Message] = state.messages
    if asking.history is not None:  # it may ask the model for a summary first
        messages = await bounded(state, policy, prepare_history(asking.history, state, model))
    if hooks is None:
        return await complete(messages, settings, asking.instructions)
    first = ModelCall(tuple(messages), settings, asking.instructions)
    context = RequestContext(policy.rounds, state.run_id, deps, specs, state.states)
    try:
        return await hooks.ask(
            first, context, lambda sent: complete(sent.messages, sent.settings, sent.instructions)
        )
    except MiddlewareError as error:
        raise attach(error, state, StopReason.MIDDLEWARE_ERROR) from error.__cause__


async def _streamed_turn(
    model: Model,
    messages: Sequence[Message],
    specs: tuple[ToolSpec, ...],
    settings: ModelSettings,
    instructions: str,
    policy: RunPolicy,
    emit: Emit,
) -> AssistantOutput:
    """The turn from the model's stream, each piece emitted as a delta event."""
    round_ = policy.rounds
    items = model.stream(messages, specs, settings, instructions)
    try:
        async for item in items:
            if isinstance(item, AssistantOutput):
                return item
            if isinstance(item, TextChunk):  # shown as it comes: no lone surrogates
                emit(TextDelta(round_, repaired(item.text)))
            else:
                call_id, name = repaired(item.call_id), repaired(item.name)
                emit(ToolCallDelta(round_, item.index, call_id, name, repaired(item.arguments)))
    finally:
        await items.aclose()
    raise ModelError(f"{model.name}: the stream ended without the turn")


async def with_deltas(
    run: Callable[[Emit], Awaitable[AssistantOutput]],
) -> AsyncGenerator[Delta | AssistantOutput, None]:
    """Run a request as a task: its deltas as they are written, then its turn last.

    Closing the generator (or cancelling its consumer) cancels the request at once.
    """
    queue: asyncio.Queue[Delta | None] = asyncio.Queue()
    task = asyncio.ensure_future(run(queue.put_nowait))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (delta := await queue.get()) is not None:
            yield delta
        yield task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
