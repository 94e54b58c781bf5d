"""The ReAct loop: ask the model, run the tools it chose, feed the results back, repeat.

``Agent.stream()`` is the only implementation; ``run``, ``run_sync`` and ``run_agent``
consume it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from tooldeck._calls import CallOptions, TurnOutcome, run_turn
from tooldeck._state import Limits, RunState
from tooldeck._sync import run_sync
from tooldeck.contracts import AssistantOutput, Message, RunResult
from tooldeck.errors import LimitExceeded, ModelError, RunStopped, ToolExecutionError
from tooldeck.events import Event, FinalAnswer, ModelRequest, ModelResponse
from tooldeck.models.base import Model, ModelSettings
from tooldeck.models.resolve import resolve_model
from tooldeck.tools.registry import ToolsLike, ToolView, as_view

DepsT = TypeVar("DepsT", default=Any)
"""The type of ``deps`` a run passes to its tools; ``Any`` unless ``deps_type=`` says."""
OnLimit = Literal["raise", "final_answer"]


class Agent(Generic[DepsT]):
    """A model, the tools it may call, and the rules of the run.

    Args:
        model: A Model, or a model string such as ``"local"`` or ``"openai:gpt-4.1-mini"``.
        tools: A ToolView, a ToolRegistry, or a list of tools (plain functions are made tools).
        instructions: The system prompt.
        settings: Tool choice and sampling for every request. A forced tool choice
            (``"required"`` or a tool name) applies to the first turn only.
        limits: When the run stops (rounds, tool calls, duration, retries, repeats).
        on_limit: ``"raise"`` ends a run at a limit with LimitExceeded; ``"final_answer"``
            asks the model once more, without tools, for an answer.
        include_error_details: Show the model the exception text of a failing tool
            (by default it reads a generic line; the host always has the exception).
        max_concurrency: At most this many calls of one turn run at once.
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
        deps_type: type[DepsT] | None = None,
    ) -> None:
        del deps_type  # only binds DepsT for type checkers
        if on_limit not in ("raise", "final_answer"):
            raise ValueError(f"on_limit must be 'raise' or 'final_answer', got {on_limit!r}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
        self.model = resolve_model(model)
        self.tools: ToolView = as_view(tools)
        self.instructions = instructions
        self.settings = settings or ModelSettings()
        self.limits = limits or Limits()
        self.on_limit: OnLimit = on_limit
        self._call_options = CallOptions(
            include_error_details=include_error_details,
            repeat_limit=self.limits.repeat_limit,
            max_concurrency=max_concurrency,
            max_tool_calls=self.limits.max_tool_calls,
        )
        self._retries = {
            name: entry.retries if entry.retries is not None else self.limits.tool_retries
            for name, entry in self.tools.dispatch.items()
        }

    async def run(
        self, prompt: str, *, deps: DepsT | None = None, history: Sequence[Message] = ()
    ) -> RunResult:
        """Run until the model answers; raise a RunStopped (with ``.result``) if it cannot."""
        result = None
        # Read the stream to its end (FinalAnswer is its last event): an async generator
        # left suspended would be closed later by asyncio's finalizer, a task per run.
        async for event in self.stream(prompt, deps=deps, history=history):
            if isinstance(event, FinalAnswer):
                result = event.result
        if result is None:
            raise AssertionError("the event stream ended without a final answer")
        return result

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
        return self._drive(RunState(messages=[*history, Message.user(prompt)]), deps)

    async def _drive(self, state: RunState, deps: Any) -> AsyncIterator[Event]:
        """The loop. It starts from any state, including one with calls still pending."""
        settings = self.settings
        while True:
            stop = None
            if state.pending:
                outcome = TurnOutcome()
                turn = run_turn(state.pending, self.tools, state, self._call_options, deps, outcome)
                async for event in turn:
                    yield event
                state.pending = ()
                if settings.forces_a_call:
                    settings = settings.with_tool_choice("auto")
                stop = self._stop_after_turn(state, outcome)
            stop = stop or self._stop_before_request(state)
            if stop is not None:
                async for event in self._end_at_limit(state, stop):
                    yield event
                return
            yield ModelRequest(state.rounds + 1, len(state.messages), settings)
            output = await self._ask(state, settings)
            state.record_output(output)
            yield ModelResponse(state.rounds, output)
            if not output.tool_calls:
                yield FinalAnswer(state.result(output.content, "answer"))
                return

    async def _ask(self, state: RunState, settings: ModelSettings) -> AssistantOutput:
        """One model call, bounded by the run's remaining time; failures keep the run."""
        remaining = self._remaining_s(state)
        complete = self.model.complete(
            state.messages, self.tools.specs, settings, self.instructions
        )
        scope = None
        try:
            if remaining is None:
                return await complete
            async with asyncio.timeout(remaining) as scope:
                return await complete
        except ModelError as error:
            self._attach(error, state, "model_error")
            raise
        except Exception as error:
            if scope is not None and scope.expired():
                stop = LimitExceeded(
                    f"the run took longer than max_duration_s={self.limits.max_duration_s}",
                    "max_duration_s",
                )
                raise self._attach(stop, state, "max_duration_s") from None
            failure = ModelError(f"the model call failed: {type(error).__name__}: {error}")
            raise self._attach(failure, state, "model_error") from error

    def _remaining_s(self, state: RunState) -> float | None:
        if self.limits.max_duration_s is None:
            return None
        return max(0.0, self.limits.max_duration_s - state.elapsed_s)

    def _stop_before_request(self, state: RunState) -> LimitExceeded | None:
        limits = self.limits
        if state.rounds >= limits.max_rounds:
            return LimitExceeded(
                f"the model asked for tools after {state.rounds} rounds "
                f"(max_rounds={limits.max_rounds})",
                "max_rounds",
            )
        remaining = self._remaining_s(state)
        if remaining is not None and remaining <= 0:
            return LimitExceeded(
                f"the run took longer than max_duration_s={limits.max_duration_s}",
                "max_duration_s",
            )
        return None

    def _stop_after_turn(self, state: RunState, outcome: TurnOutcome) -> LimitExceeded | None:
        if outcome.raised:
            trace, error = outcome.raised[0]
            stopped = ToolExecutionError(
                f"tool {trace.call.name!r} raised {type(error).__name__}: {error}",
                trace.call.name,
            )
            raise self._attach(stopped, state, "tool_raised") from error
        if outcome.over_call_limit:
            return LimitExceeded(
                f"the model asked for more than max_tool_calls={self.limits.max_tool_calls} calls",
                "max_tool_calls",
            )
        for name, failures in state.failures.items():
            allowed = self._retries.get(name, self.limits.tool_retries)
            if failures > allowed:
                return LimitExceeded(
                    f"tool {name!r} failed {failures} times in a row (retries={allowed})",
                    "retries",
                )
        return None

    async def _end_at_limit(self, state: RunState, stop: LimitExceeded) -> AsyncIterator[Event]:
        if self.on_limit == "raise":
            raise self._attach(stop, state, stop.limit)
        settings = self.settings.with_tool_choice("none")
        yield ModelRequest(state.rounds + 1, len(state.messages), settings)
        output = await self._ask(state, settings)
        state.record_output(output)
        state.pending = ()
        yield ModelResponse(state.rounds, output)
        yield FinalAnswer(state.result(output.content, stop.limit))

    @staticmethod
    def _attach(error: RunStopped, state: RunState, reason: str | None = None) -> RunStopped:
        if error.result is None:
            error.result = state.result("", reason or type(error).__name__)
        return error


def run_agent(
    prompt: str,
    model: Model | str,
    tool_view: ToolsLike | None = None,
    max_rounds: int = 3,
    **options: Any,
) -> RunResult:
    """Run one prompt synchronously: the original entry point, a wrapper over ``Agent``.

    ``options`` are Agent's keyword options (``instructions=``, ``limits=``, ...);
    ``max_rounds`` overrides the one in ``limits``.
    """
    limits = options.pop("limits", None) or Limits()
    agent: Agent[Any] = Agent(
        model, tool_view, limits=replace(limits, max_rounds=max_rounds), **options
    )
    return agent.run_sync(prompt)
