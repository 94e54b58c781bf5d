"""The ReAct loop: ask the model, run the tools it chose, feed the results back, repeat.

``Agent.stream()`` and ``Agent.resume_stream()`` both drive the one loop (``_drive``);
``run``, ``run_sync``, ``resume``, ``resume_sync`` and ``run_agent`` consume it.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Literal

from typing_extensions import TypeVar

from tooldeck.errors import LimitExceeded, MiddlewareError, RunStopped, ToolExecutionError
from tooldeck.messages import AssistantOutput, Message
from tooldeck.models.base import Model, ModelSettings
from tooldeck.models.resolve import resolve_model
from tooldeck.results import Checkpoint, RunResult, StopReason
from tooldeck.run._sync import run_sync
from tooldeck.run.agent_tool import agent_tool, check_nested
from tooldeck.run.answers import output_plan, request_settings, shown_specs, take_answer
from tooldeck.run.calls.round import (
    CallOptions,
    RoundContext,
    run_decided_calls,
    run_new_calls,
)
from tooldeck.run.checkpoint import (
    Decision,
    check_decisions,
    check_tools,
    make_checkpoint,
    restore,
    verify,
)
from tooldeck.run.events import Event, FinalAnswer, ModelRequest, ModelResponse, NestedEvent
from tooldeck.run.history import HistoryStrategy, current_turn
from tooldeck.run.middleware import Middleware, MiddlewareStack
from tooldeck.run.observer import (
    PARENT_CALL,
    SESSION_ID,
    Instrumenter,
    RunInfo,
    RunObserver,
    StreamObserver,
    default_instrumenter,
    observed,
)
from tooldeck.run.output import OutputMode
from tooldeck.run.policy import Limits, RunPolicy
from tooldeck.run.request import Request, ask, bounded, with_deltas
from tooldeck.run.state import OpenTurn, RunState, attach, checked_run_id
from tooldeck.run.untrusted import safe_output
from tooldeck.tools.registry import EntryWrapper, ToolsLike, ToolSource, ToolView

if TYPE_CHECKING:
    from tooldeck.run.session import Session

DepsT = TypeVar("DepsT", default=Any)
"""The type of ``deps`` a run passes to its tools; ``Any`` unless ``deps_type=`` says."""
OutputT = TypeVar("OutputT", default=str)
"""The type of ``RunResult.output``: ``output_type``, or the answer text without one."""
OnLimit = Literal["raise", "final_answer"]


class Agent(Generic[DepsT, OutputT]):
    """A model, the tools it may call, and the rules of the run.

    Args:
        model: A Model, or a model string such as ``"local"`` or ``"openai:gpt-4.1-mini"``.
        tools: A ToolRegistry or a list of tools and Toolsets (read again before each model
            turn, so tools added or removed, also by tools through ``ctx.tools``, apply from
            the next turn), or a fixed ToolView.
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
        middleware: Hooks around each model request and each tool call
            (``tooldeck.run.middleware.Middleware``), in order going in, reverse coming out.
        output_type: The type of the answer (a pydantic model, dataclass, TypedDict,
            ``list[...]``, ``Literal``, a scalar): ``result.output`` holds it, validated.
        output_mode: ``"auto"`` (the model's own structured output when it has one, else a
            ``final_answer`` tool), ``"native"`` or ``"tool"``.
        output_retries: Answers that do not validate before the run stops (default: the
            limits' ``tool_retries``).
        output_validators: Functions ``(output)`` or ``(ctx, output)``, sync or async, run on
            the validated answer in order; each may return a new value, or raise ModelRetry
            to ask the model again with its message.
        deps_type: The type of the ``deps`` runs pass to tools, for type checkers only.
        instrument: Trace this agent's runs: a ``tooldeck.observe.Instrumentation``; False
            never traces it; None (the default) follows ``tooldeck.instrument()``.
        history: What each request carries of a long conversation (``KeepLastTurns``,
            ``TokenBudget``, ``Summarize`` from ``tooldeck.run.history``); everything by default.
            The run keeps the whole conversation either way.
        run_log: Where every run is recorded (``RunLog(path)`` from ``tooldeck.runlog``):
            an observer of the event stream, off by default. The runs of this agent as an
            agent tool are logged as their own runs, linked to the call that made them.

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
        output_type: type[OutputT] | None = None,
        output_mode: OutputMode = "auto",
        output_retries: int | None = None,
        output_validators: Sequence[Callable[..., Any]] = (),
        middleware: Sequence[Middleware] = (),
        deps_type: type[DepsT] | None = None,
        instrument: Instrumenter | bool | None = None,
        history: HistoryStrategy | None = None,
        run_log: StreamObserver | None = None,
    ) -> None:
        del deps_type  # only binds DepsT for type checkers
        if instrument is True:
            raise ValueError(
                "instrument=True is not a setting: pass tooldeck.observe.Instrumentation() "
                "(the global tracer provider) or call tooldeck.instrument() for every agent"
            )
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
        self.limits = limits or Limits()
        self.on_limit: OnLimit = on_limit
        self.checkpoint_key = checkpoint_key
        self.instrument: Instrumenter | Literal[False] | None = instrument
        if history is not None and not isinstance(history, HistoryStrategy):
            raise TypeError(
                f"history must be a history strategy such as KeepLastTurns(10), got {history!r}"
                " (a run's earlier messages go to run(..., history=...))"
            )
        self.history = history
        self.run_log = run_log
        """The run log (or any StreamObserver) that sees every run's events; None: off."""
        self._middleware = MiddlewareStack(middleware) if middleware else None
        self._call_options = CallOptions(
            include_error_details, max_concurrency, self._middleware, self._tools.registry
        )
        self._output = output_plan(self.model, output_type, output_mode, output_validators)
        self.output_retries = self.limits.tool_retries if output_retries is None else output_retries
        self._requests = request_settings(self.settings, self._output)

    @property
    def tools(self) -> ToolView:
        """The tools of the latest model turn (a registry's tools can change between rounds)."""
        return self._tools.current

    as_tool = agent_tool
    """This agent as a tool of another agent (see ``tooldeck.run.agent_tool.agent_tool``)."""

    async def run(
        self,
        prompt: str,
        *,
        deps: DepsT | None = None,
        history: Sequence[Message] = (),
        session: Session | None = None,
        run_id: str | None = None,
    ) -> RunResult[OutputT]:
        """Run until the model answers or the run pauses; raise a RunStopped (with
        ``.result``) if it cannot go on."""
        stream = self.stream(prompt, deps=deps, history=history, session=session, run_id=run_id)
        return await _last_result(stream)

    def run_sync(
        self,
        prompt: str,
        *,
        deps: DepsT | None = None,
        history: Sequence[Message] = (),
        session: Session | None = None,
        run_id: str | None = None,
    ) -> RunResult[OutputT]:
        """``run()`` for synchronous code.

        Called inside a running event loop (Jupyter, an async web handler) it still works:
        the run goes on tooldeck's background loop in another thread while the caller's
        loop waits, so a tool bound to the caller's loop (a client made on it, work
        scheduled on it) cannot work there. In async code ``await agent.run(...)`` is the
        better way.
        """
        return run_sync(
            self.run(prompt, deps=deps, history=history, session=session, run_id=run_id)
        )

    def stream(
        self,
        prompt: str,
        *,
        deps: DepsT | None = None,
        history: Sequence[Message] = (),
        deltas: bool = False,
        session: Session | None = None,
        run_id: str | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Run, yielding each event as it happens; the last event is FinalAnswer.

        ``history`` is an earlier conversation to continue (e.g. ``result.messages``).
        ``deltas=True`` also yields the model's text and tool calls as it writes them
        (TextDelta, ToolCallDelta), from models that can stream. Close the stream early
        (``aclose()``, or leave an ``aclosing`` block) to stop the run and its request.
        ``session`` (``tooldeck.sessions``) keeps the conversation instead of ``history``:
        the run starts from its history, and its turn is committed before FinalAnswer.
        ``run_id`` is an id the application already has for this run (a request or
        workflow id); a random one is drawn otherwise.
        """
        if session is not None:
            if history:
                raise ValueError("pass history= or session=, not both: a session has its history")
            from tooldeck.run.in_session import stream_in_session  # sessions sit above the loop

            return stream_in_session(self, session, prompt, deps, deltas, run_id)
        state = RunState(messages=[*history, Message.user(prompt)])
        if run_id is not None:
            state.run_id = checked_run_id(run_id)
        return self._start(state, RunPolicy(self.limits), deps, deltas)

    async def resume(
        self,
        checkpoint: Checkpoint | str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        *,
        deps: DepsT | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        """Go on with a paused run; ``decisions`` maps pending call ids to Approve(),
        Reject(...) or, for an external call, its ToolResult. Calls without a decision stay
        pending: the run pauses again at once, without asking the model.

        With ``session=``, the session's paused run is resumed (the checkpoint may be left
        out) and claimed: a second resume of the same pause is refused with CheckpointError.
        """
        events = self.resume_stream(checkpoint, decisions, deps=deps, session=session)
        return await _last_result(events)

    def resume_sync(
        self,
        checkpoint: Checkpoint | str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        *,
        deps: DepsT | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        """``resume()`` for synchronous code (inside a running loop, as ``run_sync``)."""
        return run_sync(self.resume(checkpoint, decisions, deps=deps, session=session))

    def resume_stream(
        self,
        checkpoint: Checkpoint | str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        *,
        deps: DepsT | None = None,
        deltas: bool = False,
        session: Session | None = None,
    ) -> AsyncGenerator[Event, None]:
        """``resume()`` as the event stream (``deltas`` as in ``stream()``); raises
        CheckpointError before anything runs for a changed or broken checkpoint or decisions
        that do not fit it (at once, or, with a session, on the first step)."""
        if session is not None:
            from tooldeck.run.in_session import resume_in_session  # sessions sit above the loop

            return resume_in_session(self, session, checkpoint, decisions, deps, deltas)
        if checkpoint is None:
            raise TypeError("resume() needs the paused run's checkpoint, or session= holding it")
        if isinstance(checkpoint, str):
            checkpoint = Checkpoint.from_json(checkpoint)
        self._check_paused(checkpoint)
        decided = check_decisions(checkpoint, decisions or {})
        state, policy = restore(checkpoint, self.limits)
        return self._start(state, policy, deps, deltas, decided, checkpoint)

    def _check_paused(self, checkpoint: Checkpoint, view: ToolView | None = None) -> None:
        """Refuse a checkpoint this agent cannot go on from (changed, or a pending call's tool
        gone, in paused agent tools' runs too); the tools are checked when known without
        loading (else by the loop, before anything runs)."""
        if view is None:
            verify(checkpoint, self.checkpoint_key)
            view = self._tools.unchanged()
        if view is not None:
            check_tools(checkpoint, view.names)
            check_nested(checkpoint, view)

    def wrapped(
        self,
        *,
        model: Callable[[Model], Model] | None = None,
        tool: EntryWrapper | None = None,
    ) -> Agent[DepsT, OutputT]:
        """A copy of this agent whose model, and each of its tool entries (wrapped again
        whenever its tools change), pass through the given wrappers; everything else is
        shared. ``tooldeck.durable`` makes each model request and tool call a step this way.
        A model wrapper keeps the model's ``native_output``. The copy closes nothing."""
        twin = copy.copy(self)
        twin._owns_model = False
        if model is not None:
            twin.model = model(self.model)
        if tool is not None:
            twin._tools = self._tools.wrapped(tool)
        return twin

    async def aclose(self) -> None:
        """Close the toolsets (MCP connections...) and a model the agent made from a string."""
        await self._tools.aclose()
        if self._owns_model:
            await self.model.aclose()

    async def __aenter__(self) -> Agent[DepsT, OutputT]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _start(
        self,
        state: RunState,
        policy: RunPolicy,
        deps: Any,
        deltas: bool,
        decisions: dict[str, Decision] | None = None,
        resumed: Checkpoint | None = None,
    ) -> AsyncGenerator[Event, None]:
        """The run's event stream, observed when this agent or every agent is instrumented,
        and logged when the agent has a run log (the StreamObserver sees what tracing sees)."""
        instrumenter = self.instrument if self.instrument is not None else default_instrumenter()
        observer = None
        if instrumenter:
            observer = instrumenter.start_run(
                self.model, state.messages, self.instructions, state.run_id
            )
        events = self._drive(state, policy, deps, deltas, observer, decisions, resumed)
        if observer is not None:
            events = observed(observer, events)
        if self.run_log is None:
            return events
        return self.run_log.observe(events, self._run_info(state, decisions))

    def _run_info(
        self, state: RunState, decisions: Mapping[str, Decision] | None = None
    ) -> RunInfo:
        """What the run log is told as a run starts or resumes (``decisions`` given)."""
        prompt = state.messages[current_turn(state.messages)].content
        return RunInfo(
            state.run_id,
            prompt,
            self.model.name,
            self.instructions,
            SESSION_ID.get(),
            decisions,
            PARENT_CALL.get(),
        )

    async def _drive(
        self,
        state: RunState,
        policy: RunPolicy,
        deps: Any,
        deltas: bool,
        observer: RunObserver | None,
        decisions: dict[str, Decision] | None = None,
        resumed: Checkpoint | None = None,
    ) -> AsyncGenerator[Event, None]:
        """The loop. It starts from a prompt or from a paused run (``decisions`` given)."""
        source = self._tools
        view = source.unchanged() or await source.view()
        if resumed is not None:
            self._check_paused(resumed, view)
        ctx = RoundContext(
            view, policy, self._call_options, deps, 0, state.run_id, observer, state.messages
        )
        model = self.model if observer is None else observer.model(self.model)
        plain = not deltas and self._middleware is None and self.history is None
        while True:
            turn = state.turn
            stop: RunStopped | None = None
            if turn is not None:
                ctx.view, ctx.round = view, turn.round
                ctx.outcome = None
                calls = _round(turn, ctx, decisions)
                try:
                    async for item in calls:
                        if isinstance(item, NestedEvent):
                            state.count_nested(item.event)
                        yield item
                except MiddlewareError as error:
                    raise attach(error, state, StopReason.MIDDLEWARE_ERROR) from error.__cause__
                finally:  # closed or cancelled mid-round: the calls stop now
                    await calls.aclose()
                decisions = None
                outcome = ctx.outcome
                assert outcome is not None  # the round runner always ends with its outcome
                if state.close_round(turn, outcome.traces, outcome.pending):
                    checkpoint = make_checkpoint(state, policy, self.checkpoint_key)
                    yield FinalAnswer(state.result("", StopReason.PAUSED, checkpoint))
                    return
                stop = policy.stop_after_round(
                    view.dispatch, outcome.raised, outcome.over_call_limit
                )
            stop = stop or policy.stop_before_request()
            if stop is None:
                view = source.unchanged() or await source.view()
                specs = view.specs if self._output is None else shown_specs(self._output, view)
                reason = StopReason.ANSWER
                settings = self._requests[0] if policy.rounds == 0 else self._requests[1]
            else:  # raise, or ask once more for an answer without tools
                reason = self._last_request(state, stop)
                specs, settings = shown_specs(self._output, ToolView.of(())), self._requests[2]
            policy.rounds += 1
            yield ModelRequest(policy.rounds, len(state.messages), settings, specs)
            if not plain:
                request = Request(
                    state, policy, model, specs, settings, self.instructions, deps, self.history
                )
                output = None
                async with aclosing(self._asked(request, deltas)) as asked_for:
                    async for written in asked_for:
                        if isinstance(written, AssistantOutput):
                            output = written
                        else:
                            yield written
                assert output is not None  # the request ends with its turn or raises
            else:  # the usual request: one awaited complete(), nothing around it
                asked = model.complete(state.messages, specs, settings, self.instructions)
                output = await bounded(state, policy, asked)
            output = safe_output(output)  # what a model sends is untrusted: _untrusted
            state.record_output(output, policy.rounds)
            yield ModelResponse(policy.rounds, output)
            if stop is None and self._output is None and output.tool_calls:
                continue  # the usual round: run the calls (no coroutine for _ended)
            ended = await self._ended(state, policy, output, deps, stop, reason)
            if ended is not None:
                yield FinalAnswer(ended)
                return

    async def _asked(
        self, request: Request, deltas: bool
    ) -> AsyncGenerator[Event | AssistantOutput, None]:
        """A request through middleware and/or with its deltas as events, then its turn."""
        if not deltas:
            yield await ask(request, self._middleware, None)
            return
        written = with_deltas(lambda emit: ask(request, self._middleware, emit))
        async with aclosing(written):  # closed or cancelled mid-turn: end the request now
            async for item in written:
                yield item

    async def _ended(
        self,
        state: RunState,
        policy: RunPolicy,
        output: AssistantOutput,
        deps: Any,
        stop: RunStopped | None,
        reason: StopReason,
    ) -> RunResult[Any] | None:
        """The run's result if this turn ends it: an answer (typed, when asked for), or the
        last answer at a limit; None to go on with the turn's calls."""
        if self._output is not None:
            answered = await take_answer(
                self._output, self.output_retries, state, policy, output, deps
            )
            if answered is not None:
                if stop is None:
                    return answered
                return answered.model_copy(update={"stop_reason": reason})
        elif stop is None and not output.tool_calls:
            return state.result(output.content, StopReason.ANSWER, None, output.content)
        if stop is None:
            return None
        state.turn = None  # calls made despite tool_choice="none" are not run
        return state.result(output.content, reason, None, output.content)

    def _last_request(self, state: RunState, stop: RunStopped) -> StopReason:
        """At a limit: raise it, or (``on_limit="final_answer"``) the reason the run ends with
        after one last request without tools."""
        if isinstance(stop, ToolExecutionError):
            raise attach(stop, state, StopReason.TOOL_RAISED) from stop.__cause__
        assert isinstance(stop, LimitExceeded)
        reason = StopReason(stop.limit)
        if self.on_limit == "raise":
            raise attach(stop, state, reason)
        return reason


def _round(
    turn: OpenTurn, ctx: RoundContext, decisions: Mapping[str, Decision] | None
) -> AsyncGenerator[Event, None]:
    """A new turn's calls (but a final_answer already answered), or a resumed turn's
    decided calls."""
    if turn.started:
        return run_decided_calls(turn, decisions or {}, ctx)
    turn.started = True
    if turn.answered:
        return run_new_calls([c for c in turn.calls if c.id not in turn.answered], ctx)
    return run_new_calls(turn.calls, ctx)


async def _last_result(stream: AsyncIterator[Event]) -> RunResult[Any]:
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
    max_rounds: int | None = None,
    **options: Any,
) -> RunResult[Any]:
    """Run one prompt synchronously: the original entry point, a wrapper over ``Agent``.

    ``options`` are Agent's keyword options (``instructions=``, ``limits=``, ...).
    ``max_rounds``, when given, overrides the one in ``limits``; by default the run has
    ``Limits().max_rounds`` (10) rounds, like an ``Agent``. A run that pauses returns its
    result (``stop_reason == "paused"``); go on with
    ``Agent(...).resume_sync(result.checkpoint, ...)``.
    """
    limits = options.pop("limits", None) or Limits()
    if max_rounds is not None:
        limits = replace(limits, max_rounds=max_rounds)
    agent: Agent[Any, Any] = Agent(model, tool_view, limits=limits, **options)
    return agent.run_sync(prompt)
