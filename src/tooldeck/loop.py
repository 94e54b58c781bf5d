"""The ReAct loop: ask the model, run the tools it chose, feed the results back, repeat.

``Agent.stream()`` and ``Agent.resume_stream()`` both drive the one loop (``_drive``);
``run``, ``run_sync``, ``resume``, ``resume_sync`` and ``run_agent`` consume it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from tooldeck._calls import (
    CallOptions,
    RoundContext,
    RoundItem,
    RoundOutcome,
    run_decided_calls,
    run_new_calls,
)
from tooldeck._state import OpenTurn, RunState
from tooldeck._sync import run_sync
from tooldeck.checkpoint import (
    Decision,
    check_decisions,
    check_tools,
    make_checkpoint,
    restore,
    verify,
)
from tooldeck.contracts import AssistantOutput, Checkpoint, Message, RunResult, StopReason
from tooldeck.errors import LimitExceeded, ModelError, RunStopped, ToolExecutionError
from tooldeck.events import Event, FinalAnswer, ModelRequest, ModelResponse
from tooldeck.models.base import Model, ModelSettings
from tooldeck.models.resolve import resolve_model
from tooldeck.policy import Limits, RunPolicy
from tooldeck.tools.registry import ToolsLike, ToolSource, ToolView

DepsT = TypeVar("DepsT", default=Any)
"""The type of ``deps`` a run passes to its tools; ``Any`` unless ``deps_type=`` says."""
OnLimit = Literal["raise", "final_answer"]


class Agent(Generic[DepsT]):
    """A model, the tools it may call, and the rules of the run.

    Args:
        model: A Model, or a model string such as ``"local"`` or ``"openai:gpt-4.1-mini"``.
        tools: A ToolView, a ToolRegistry (read again before each model turn, so tools
            added or removed apply from the next turn), or a list of tools and Toolsets.
        instructions: The system prompt.
        settings: Tool choice and sampling for every request. A forced tool choice
            (``"required"`` or a tool name) applies to the first turn only.
        limits: When the run stops (rounds, tool calls, duration, retries, repeats).
        on_limit: ``"raise"`` ends a run at a limit with LimitExceeded; ``"final_answer"``
            asks the model once more, without tools, for an answer.
        include_error_details: Show the model the exception text of a failing tool
            (by default it reads a generic line; the host always has the exception).
        max_concurrency: At most this many calls of one turn run at once.
        checkpoint_key: Sign the checkpoints of paused runs (HMAC-SHA256) and refuse to
            resume one that was changed or signed with another key.
        deps_type: The type of the ``deps`` runs pass to tools, for type checkers only.

    Example:
        >>> from tooldeck import Agent, AssistantOutput, ScriptedModel
        >>> agent = Agent(ScriptedModel([AssistantOutput(content="Hi!")]))
        >>> agent.run_sync("Hello").answer
        'Hi!'
    """

    def __init__(
        self,
        model: Model | str,
        tools: ToolsLike | None = None,
        *,
        instructions: str = "",
        settings: ModelSettings | None = None,
        limits: Limits | None = None,
        on_limit: OnLimit = "raise",
        include_error_details: bool = False,
        max_concurrency: int | None = None,
        checkpoint_key: bytes | None = None,
        deps_type: type[DepsT] | None = None,
    ) -> None:
        del deps_type  # only binds DepsT for type checkers
        if on_limit not in ("raise", "final_answer"):
            raise ValueError(f"on_limit must be 'raise' or 'final_answer', got {on_limit!r}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
        if checkpoint_key is not None and not isinstance(checkpoint_key, bytes):
            raise TypeError(f"checkpoint_key must be bytes, got {type(checkpoint_key).__name__}")
        self._owns_model = isinstance(model, str)
        self.model = resolve_model(model)
        self._tools = ToolSource(tools)
        self.instructions = instructions
        self.settings = settings or ModelSettings()
        self._later_settings = (
            self.settings.with_tool_choice("auto") if self.settings.forces_a_call else self.settings
        )
        self.limits = limits or Limits()
        self.on_limit: OnLimit = on_limit
        self.checkpoint_key = checkpoint_key
        self._call_options = CallOptions(include_error_details, max_concurrency)

    @property
    def tools(self) -> ToolView:
        """The tools of the latest model turn (a registry's tools can change between turns)."""
        return self._tools.current

    async def run(
        self, prompt: str, *, deps: DepsT | None = None, history: Sequence[Message] = ()
    ) -> RunResult:
        """Run until the model answers or the run pauses; raise a RunStopped (with
        ``.result``) if it cannot go on."""
        return await _last_result(self.stream(prompt, deps=deps, history=history))

    def run_sync(
        self, prompt: str, *, deps: DepsT | None = None, history: Sequence[Message] = ()
    ) -> RunResult:
        """``run()`` for synchronous code (not from inside a running event loop)."""
        return run_sync(self.run(prompt, deps=deps, history=history))

    def stream(
        self, prompt: str, *, deps: DepsT | None = None, history: Sequence[Message] = ()
    ) -> AsyncIterator[Event]:
        """Run, yielding each step as it happens; the last event is FinalAnswer.

        ``history`` is an earlier conversation to continue (e.g. ``result.messages``).
        """
        state = RunState(messages=[*history, Message.user(prompt)])
        return self._drive(state, RunPolicy(self.limits), deps)

    async def resume(
        self,
        checkpoint: Checkpoint | str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        deps: DepsT | None = None,
    ) -> RunResult:
        """Go on with a paused run; ``decisions`` maps pending call ids to Approve(),
        Reject(...) or, for an external call, its ToolResult. Calls without a decision stay
        pending: the run pauses again at once, without asking the model."""
        return await _last_result(self.resume_stream(checkpoint, decisions, deps=deps))

    def resume_sync(
        self,
        checkpoint: Checkpoint | str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        deps: DepsT | None = None,
    ) -> RunResult:
        """``resume()`` for synchronous code."""
        return run_sync(self.resume(checkpoint, decisions, deps=deps))

    def resume_stream(
        self,
        checkpoint: Checkpoint | str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        deps: DepsT | None = None,
    ) -> AsyncIterator[Event]:
        """``resume()`` as the event stream; raises CheckpointError at once, before anything
        runs, for a changed or broken checkpoint or decisions that do not fit it."""
        if isinstance(checkpoint, str):
            checkpoint = Checkpoint.from_json(checkpoint)
        decided = dict(decisions or {})
        verify(checkpoint, self.checkpoint_key)
        check_decisions(checkpoint, decided)
        if self._tools.fixed is not None:
            check_tools(checkpoint, self._tools.fixed.names)
        state, policy = restore(checkpoint, self.limits)
        return self._drive(state, policy, deps, decided, checkpoint)

    async def aclose(self) -> None:
        """Close the toolsets (MCP connections...) and a model the agent made from a string."""
        await self._tools.aclose()
        if self._owns_model:
            await self.model.aclose()

    async def __aenter__(self) -> Agent[DepsT]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _drive(
        self,
        state: RunState,
        policy: RunPolicy,
        deps: Any,
        decisions: dict[str, Decision] | None = None,
        resumed: Checkpoint | None = None,
    ) -> AsyncIterator[Event]:
        """The loop. It starts from a prompt or from a paused run (``decisions`` given)."""
        source = self._tools
        view = source.fixed or await source.view()
        if resumed is not None:
            check_tools(resumed, view.names)
        ctx = RoundContext(view, policy, self._call_options, deps, 0, state.run_id)
        while True:
            turn = state.turn
            stop: RunStopped | None = None
            if turn is not None:
                ctx.view, ctx.round = view, turn.round
                outcome = None
                async for item in _round(turn, ctx, decisions):
                    if isinstance(item, RoundOutcome):
                        outcome = item
                    else:
                        yield item
                decisions = None
                assert outcome is not None  # the round runner always ends with its outcome
                _apply(state, turn, outcome)
                if turn.pending:
                    checkpoint = make_checkpoint(state, policy, self.checkpoint_key)
                    yield FinalAnswer(state.result("", StopReason.PAUSED, checkpoint))
                    return
                state.close_turn()
                stop = policy.stop_after_round(
                    view.dispatch, outcome.raised, outcome.over_call_limit
                )
            stop = stop or policy.stop_before_request()
            if stop is not None:
                async for event in self._end_at_limit(state, policy, stop):
                    yield event
                return
            view = source.fixed or await source.view()
            policy.rounds += 1
            settings = self.settings if policy.rounds == 1 else self._later_settings
            yield ModelRequest(policy.rounds, len(state.messages), settings)
            output = await self._ask(state, policy, view, settings)
            state.record_output(output, policy.rounds)
            yield ModelResponse(policy.rounds, output)
            if not output.tool_calls:
                yield FinalAnswer(state.result(output.content, StopReason.ANSWER))
                return

    async def _ask(
        self, state: RunState, policy: RunPolicy, view: ToolView, settings: ModelSettings
    ) -> AssistantOutput:
        """One model call, bounded by the run's remaining time; failures keep the run."""
        remaining = policy.remaining_s()
        complete = self.model.complete(state.messages, view.specs, settings, self.instructions)
        scope = None
        try:
            if remaining is None:
                return await complete
            async with asyncio.timeout(remaining) as scope:
                return await complete
        except ModelError as error:
            raise _attach(error, state, StopReason.MODEL_ERROR) from None
        except Exception as error:
            if scope is not None and scope.expired():
                raise _attach(policy.out_of_time(), state, StopReason.MAX_DURATION_S) from None
            failure = ModelError(f"the model call failed: {type(error).__name__}: {error}")
            raise _attach(failure, state, StopReason.MODEL_ERROR) from error

    async def _end_at_limit(
        self, state: RunState, policy: RunPolicy, stop: RunStopped
    ) -> AsyncIterator[Event]:
        if isinstance(stop, ToolExecutionError):
            raise _attach(stop, state, StopReason.TOOL_RAISED) from stop.__cause__
        assert isinstance(stop, LimitExceeded)
        reason = StopReason(stop.limit)
        if self.on_limit == "raise":
            raise _attach(stop, state, reason)
        settings = self.settings.with_tool_choice("none")
        policy.rounds += 1
        yield ModelRequest(policy.rounds, len(state.messages), settings)
        output = await self._ask(state, policy, ToolView.of(()), settings)
        state.record_output(output, policy.rounds)
        state.turn = None  # calls made despite tool_choice="none" are not run
        yield ModelResponse(policy.rounds, output)
        yield FinalAnswer(state.result(output.content, reason))


def _round(
    turn: OpenTurn, ctx: RoundContext, decisions: Mapping[str, Decision] | None
) -> AsyncIterator[RoundItem]:
    """A new turn's calls, or a resumed turn's decided calls."""
    if turn.started:
        return run_decided_calls(turn, decisions or {}, ctx)
    turn.started = True
    return run_new_calls(turn.calls, ctx)


def _apply(state: RunState, turn: OpenTurn, outcome: RoundOutcome) -> None:
    """Keep the round's answered calls in the trace and the open turn."""
    for trace in outcome.traces:
        state.trace.append(trace)
        turn.answered[trace.call.id] = trace.result
    turn.pending = outcome.pending


def _attach(error: RunStopped, state: RunState, reason: StopReason) -> RunStopped:
    if error.result is None:
        error.result = state.result("", reason)
    return error


async def _last_result(stream: AsyncIterator[Event]) -> RunResult:
    # Read the stream to its end (FinalAnswer is its last event): an async generator left
    # suspended would be closed later by asyncio's finalizer, a task per run.
    result = None
    async for event in stream:
        if isinstance(event, FinalAnswer):
            result = event.result
    if result is None:
        raise AssertionError("the event stream ended without a final answer")
    return result


def run_agent(
    prompt: str,
    model: Model | str,
    tool_view: ToolsLike | None = None,
    max_rounds: int = 3,
    **options: Any,
) -> RunResult:
    """Run one prompt synchronously: the original entry point, a wrapper over ``Agent``.

    ``options`` are Agent's keyword options (``instructions=``, ``limits=``, ...);
    ``max_rounds`` overrides the one in ``limits``. A run that pauses returns its result
    (``stop_reason == "paused"``); go on with ``Agent(...).resume_sync(result.checkpoint, ...)``.
    """
    limits = options.pop("limits", None) or Limits()
    agent: Agent[Any] = Agent(
        model, tool_view, limits=replace(limits, max_rounds=max_rounds), **options
    )
    return agent.run_sync(prompt)
