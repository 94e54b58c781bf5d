"""The front door: ``Agent``, a model with the tools it may call and the rules of its runs.

Its entry points (``run``, ``stream``, ``resume``..., ``start``) take the same options
(``RunArgs``, ``options.py``) and drive the one loop (``loop.drive``): from a prompt or a
pause, in a session or not, watched by an observer and a run log when the agent has them.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Literal, cast

from typing_extensions import TypeVar, Unpack

from tooldeck.messages import Message
from tooldeck.models.base import Model, ModelSettings
from tooldeck.models.resolve import resolve_model
from tooldeck.results import Checkpoint, Decision, RunResult
from tooldeck.run._engine._checks import (
    call_options,
    check_settings,
    stores_outputs,
    strategy,
)
from tooldeck.run._engine._sync import run_sync
from tooldeck.run._engine.answers import asked_with, output_plan, request_settings
from tooldeck.run._engine.assembly import (
    AgentShorthands,
    assemble,
    check_shorthands,
    shorthand_capabilities,
)
from tooldeck.run._engine.checkpoint import check_decisions, check_tools, restore, verify
from tooldeck.run._engine.handing_over import agent_named, handoffs_of, paused_in, starting_agent
from tooldeck.run._engine.journal import JournalWriter
from tooldeck.run._engine.loop import OnLimit, RunSetup, RunStart
from tooldeck.run._engine.request import Asking
from tooldeck.run._engine.starting import run_events
from tooldeck.run._engine.state import RunState, untrusted_source
from tooldeck.run.agent_tool import agent_tool
from tooldeck.run.capabilities import Capability
from tooldeck.run.events import Event, last_result
from tooldeck.run.handle import start_resumed_run, start_run
from tooldeck.run.handoff import Handoff, HandoffAgent, RunWrappers
from tooldeck.run.history import HistoryStrategy
from tooldeck.run.observer import Observing, StreamObserver, Tracing, observing
from tooldeck.run.options import RunArgs, RunOptions
from tooldeck.run.output import OutputMode
from tooldeck.run.policy import Limits, RunPolicy
from tooldeck.run.session import records_of
from tooldeck.tools.outputs import OutputStore
from tooldeck.tools.registry import EntryWrapper, ToolsLike, ToolSource, ToolView

if TYPE_CHECKING:  # the session's engine loads with the first run in a session
    from tooldeck.run._engine.journal import Journaled
    from tooldeck.run._engine.recovery import Closed

DepsT = TypeVar("DepsT", default=Any)
"""The type of ``deps`` a run passes to its tools; ``Any`` unless ``deps_type=`` says."""
OutputT = TypeVar("OutputT", default=str)
"""The type of ``RunResult.output``: ``output_type``, or the answer text without one."""
Decided = Mapping[str, Decision] | None


class Agent(Generic[DepsT, OutputT]):
    """A model, the tools it may call, and the rules of the run.

    Args:
        model: A Model, or a model string such as ``"local"`` or ``"openai:gpt-4.1-mini"``.
        tools: A ToolRegistry or a list of tools and Toolsets (read again before each model
            turn, so tools added or removed, also by tools through ``ctx.tools``, apply from
            the next turn), or a fixed ToolView.
        instructions: The system prompt.
        settings: Tool choice and sampling for every request. A forced tool choice
            (``"required"`` or a tool name) applies to the first request of a run only.
        limits: When the run stops (rounds, tool calls, duration, retries, repeats).
        on_limit: ``"raise"`` ends a run at a limit with LimitExceeded; ``"final_answer"``
            asks the model once more, without tools, for an answer — unless a token or cost
            limit or a shared budget is spent (a spent budget lets no request out): then the
            run ends without an answer (``output`` None, the limit as its stop reason).
        output_type: The type of the answer (a pydantic model, dataclass, TypedDict,
            ``list[...]``, ``Literal``, a scalar): ``result.output`` holds it, validated.
        output_mode: ``"auto"`` (the model's own structured output when it has one, and
            the prompted way where its server refuses that; else a ``final_answer`` tool),
            ``"native"``, ``"tool"`` or ``"prompted"`` (the schema in the instructions, the
            answer read from the model's text).
        capabilities: What the agent's runs have beyond its tools: tools, instructions and
            hooks as one piece each (``tooldeck.run.capabilities``): guardrails, middleware,
            history strategies, the run log, your own.
        checkpoint_key: Sign the checkpoints of paused runs (HMAC-SHA256) and refuse to
            resume one that was changed or signed with another key.
        deps_type: The type of the ``deps`` runs pass to tools, for type checkers only.
        name: The agent's name (in events, ``RunResult.agent``, checkpoints, handoffs).
        handoffs: Agents (or ``handoff(agent, ...)``) it may hand the conversation to; a
            list, which may be changed (for cycles) until a run starts.
        **shorthands: Keywords that build capabilities, and a few settings
            (``AgentShorthands``; see below).

    Keyword shorthands (each builds the capability named, added before ``capabilities``):

    - ``middleware=[...]``: ``Middleware`` objects, hooks around each model request and
      each tool call, in order going in, reverse coming out.
    - ``input_guardrails=``, ``output_guardrails=``, ``tool_guardrails=``: checks on the
      prompt, the answer and each call: ``Guardrails(input=, output=, tool=)``.
    - ``after_untrusted=``: once a ``trust="untrusted"`` tool's result is in the
      conversation, calls of ``side_effects``/``sensitive`` tools: "allow", "ask"
      (approval), "refuse": ``UntrustedPolicy(...)``. The guardrails and this policy of the
      agent a run starts on hold for the whole run, after handoffs and inside agent tools.
    - ``history_strategy=``: what each request carries of a long conversation
      (``KeepLastExchanges``, ``TokenBudget``, ``Summarize``); everything by default (the
      history a run starts from is ``run(history=...)``). ``history=`` is its name before
      0.2 (deprecated).
    - ``max_output_chars=``, ``large_output=``: characters of a tool's output the model
      reads whole, and what happens to a longer one (``"truncate"``, ``"store"`` with the
      ``read_output`` tool, ``"error"``), for tools without their own: ``LargeOutputs``.
    - ``run_log=``: where every run is recorded (``RunLog(path)``): an ``Observing``
      capability. The runs of this agent as an agent tool are logged as their own runs.
    - ``instrument=``: trace this agent's runs (``tooldeck.observe.Instrumentation``, a
      ``Tracing`` capability); False never traces it; None follows ``tooldeck.instrument()``.

    And settings: ``include_error_details`` (show the model a failing tool's exception
    text), ``max_concurrency`` (calls of one turn at once), ``output_retries`` (answers that
    do not validate before the run stops; default the limits' ``tool_retries``),
    ``output_validators`` (functions on the validated answer, which may raise ModelRetry),
    ``handoff_resume`` (in a session, the agent a new prompt goes to: ``"last"`` or
    ``"first"``).

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
        output_type: type[OutputT] | None = None,
        output_mode: OutputMode = "auto",
        capabilities: Sequence[Capability] = (),
        checkpoint_key: bytes | None = None,
        deps_type: type[DepsT] | None = None,
        name: str = "agent",
        handoffs: Sequence[HandoffAgent | Handoff] = (),
        **shorthands: Unpack[AgentShorthands],
    ) -> None:
        del deps_type  # only binds DepsT for type checkers
        check_shorthands(shorthands)
        if isinstance(capabilities, Capability):
            raise TypeError(f"capabilities= takes a list, got one capability: {capabilities!r}")
        shorthands["history_strategy"] = strategy(
            shorthands.get("history_strategy"), shorthands.get("history")
        )
        max_concurrency = shorthands.get("max_concurrency")
        check_settings(on_limit, max_concurrency, checkpoint_key)
        resume = shorthands.get("handoff_resume", "last")
        self.name, self.handoffs, self.handoff_resume = handoffs_of(name, handoffs, resume)
        self._owns_model = isinstance(model, str)
        self.model = resolve_model(model)
        self._tools = ToolSource(tools)
        self.instructions = instructions
        self.settings = settings or ModelSettings()
        self.limits = limits or Limits()
        self.on_limit: OnLimit = on_limit
        self.checkpoint_key = checkpoint_key
        self.capabilities = (
            *shorthand_capabilities(shorthands),
            *capabilities,
            *_searching(self._tools, capabilities),
        )
        """Everything the agent's runs are given beyond its tools, the keywords' included."""
        self._take(self.capabilities, shorthands)
        self._plan_output(
            output_type,
            output_mode,
            shorthands.get("output_validators", ()),
            shorthands.get("output_retries"),
        )

    def _take(self, capabilities: tuple[Capability, ...], shorthands: AgentShorthands) -> None:
        """Read the capabilities into what the engine applies (again when they change)."""
        built = assemble(capabilities)
        if built.tools:
            self._tools = self._tools.extended(built.tools)
        if built.wrap_tool is not None:
            self._tools = self._tools.wrapped(built.wrap_tool)
        self.history_strategy = built.history
        self.observers: tuple[Observing, ...] = built.observers
        """The agent's capabilities that read each run's events (the run log among them)."""
        instrument = shorthands.get("instrument")
        self.instrument: Tracing | Literal[False] | None = (
            False if instrument is False else built.tracing
        )
        hooks = built.hooks
        self._request_hooks = hooks if hooks is not None and hooks.requests else None
        self._run_hooks = hooks if hooks is not None and hooks.runs else None
        self._guards = built.guards
        large = built.large
        self._call_options = call_options(
            shorthands.get("include_error_details", False),
            shorthands.get("max_concurrency"),
            self.limits,
            hooks if hooks is not None and hooks.calls else None,
            self._tools.registry,
            (large.max_chars, large.mode),
            built.tool_guardrails,
            built.after_untrusted,
        )
        self._stores_outputs = stores_outputs(large.mode, self._tools)

    @property
    def run_log(self) -> StreamObserver | None:
        """The run log (or any StreamObserver) that sees every run's events; None: off.
        Setting it replaces the agent's ``Observing`` capabilities with it."""
        if not self.observers:
            return None
        first = self.observers[0]
        inner = getattr(first, "_observer", None)
        return first if inner is None else cast(StreamObserver, inner)

    @run_log.setter
    def run_log(self, log: StreamObserver | None) -> None:
        kept = [item for item in self.capabilities if not isinstance(item, Observing)]
        self.capabilities = (*kept, *(() if log is None else (observing(log),)))
        self.observers = tuple(item for item in self.capabilities if isinstance(item, Observing))

    _wrappers = RunWrappers()
    """What ``wrapped`` passed this copy through (agents handed its runs pass through too)."""

    def _plan_output(
        self,
        output_type: type[OutputT] | None,
        output_mode: OutputMode,
        output_validators: Sequence[Callable[..., Any]],
        output_retries: int | None,
    ) -> None:
        self._output = output_plan(self.model, output_type, output_mode, output_validators)
        self.output_retries = self.limits.tool_retries if output_retries is None else output_retries
        self._requests = request_settings(self.settings, self._output)

    @property
    def tools(self) -> ToolView:
        """The tools of the latest model turn (a registry's tools can change between rounds)."""
        return self._tools.current

    @property
    def history(self) -> HistoryStrategy | None:
        """Deprecated: ``history_strategy``."""
        warnings.warn(
            "Agent.history is now Agent.history_strategy", DeprecationWarning, stacklevel=2
        )
        return self.history_strategy

    as_tool = agent_tool
    """This agent as a tool of another agent (see ``tooldeck.run.agent_tool.agent_tool``)."""

    async def run(self, prompt: str, **options: Unpack[RunArgs[DepsT]]) -> RunResult[OutputT]:
        """Run until the model answers or the run pauses; raise a RunStopped (with
        ``.result``) if it cannot go on. ``options``: see ``RunArgs``."""
        return await last_result(self.stream(prompt, **options))

    def run_sync(self, prompt: str, **options: Unpack[RunArgs[DepsT]]) -> RunResult[OutputT]:
        """``run()`` for synchronous code.

        Called inside a running event loop (Jupyter, an async web handler) it still works:
        the run goes on tooldeck's background loop in another thread while the caller's loop
        waits, so a tool bound to the caller's loop (a client made on it, work scheduled on
        it) cannot work there. In async code ``await agent.run(...)`` is the better way.
        """
        return run_sync(self.run(prompt, **options))

    def stream(self, prompt: str, **options: Unpack[RunArgs[DepsT]]) -> AsyncGenerator[Event, None]:
        """Run, yielding each event as it happens; the last event is FinalAnswer.

        Close the stream early (``aclose()``, or leave an ``aclosing`` block) to stop the
        run and its request. ``options``: see ``RunArgs``.
        """
        return self._stream(prompt, RunOptions.of(options))

    start = start_run
    """Start a run in a task and return its ``RunHandle`` (see ``tooldeck.run.handle``)."""

    def _stream(self, prompt: str, opts: RunOptions) -> AsyncGenerator[Event, None]:
        session = opts.session
        if session is None:
            return self._from_prompt(prompt, opts)
        from tooldeck.run._engine.in_session import stream_in_session

        in_session = replace(opts, session=None, records=records_of(session))
        runs = _SessionRuns(self, prompt, in_session)
        strategy = self.history_strategy
        return stream_in_session(session, strategy, prompt, opts.run_id, runs, opts.cancel)

    async def resume(
        self,
        checkpoint: Checkpoint | str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        **options: Unpack[RunArgs[DepsT]],
    ) -> RunResult[OutputT]:
        """Go on with a paused run; ``decisions`` maps pending call ids to Approve(),
        Reject(...) or, for an external call, its ToolResult. Calls without a decision stay
        pending: the run pauses again at once, without asking the model (but those of a tool
        approved with ``Approve(scope="run" | "session")``, which run under that approval).

        With ``session=``, the session's paused run is resumed (the checkpoint may be left
        out) and claimed: a second resume of the same pause is refused with CheckpointError.
        """
        return await last_result(self.resume_stream(checkpoint, decisions, **options))

    def resume_sync(
        self,
        checkpoint: Checkpoint | str | None = None,
        decisions: Decided = None,
        **options: Unpack[RunArgs[DepsT]],
    ) -> RunResult[OutputT]:
        """``resume()`` for synchronous code (inside a running loop, as ``run_sync``)."""
        return run_sync(self.resume(checkpoint, decisions, **options))

    def resume_stream(
        self,
        checkpoint: Checkpoint | str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        **options: Unpack[RunArgs[DepsT]],
    ) -> AsyncGenerator[Event, None]:
        """``resume()`` as the event stream; raises CheckpointError before anything runs for
        a changed or broken checkpoint or decisions that do not fit it (at once, or, with a
        session, on the first step)."""
        return self._resume(checkpoint, decisions, RunOptions.of(options, resuming=True))

    start_resume = start_resumed_run
    """Resume a paused run in a task and return its ``RunHandle`` (see ``tooldeck.run.handle``)."""

    def _resume(
        self, checkpoint: Checkpoint | str | None, decisions: Decided, opts: RunOptions
    ) -> AsyncGenerator[Event, None]:
        session = opts.session
        if session is not None:
            from tooldeck.run._engine.in_session import resume_in_session

            in_session = replace(opts, session=None, records=records_of(session))
            runs = _SessionRuns(self, "", in_session)
            strategy = self.history_strategy
            return resume_in_session(
                session, strategy, checkpoint, decisions or {}, runs, opts.cancel
            )
        if checkpoint is None:
            raise TypeError("resume() needs the paused run's checkpoint, or session= holding it")
        if isinstance(checkpoint, str):
            checkpoint = Checkpoint.from_json(checkpoint)
        return self._from_pause(checkpoint, decisions, opts)

    def check_resumable(self, checkpoint: Checkpoint) -> None:
        """Refuse (CheckpointError) a checkpoint this agent cannot go on from: changed since
        it was made, or a pending call's tool gone (in paused agent tools' runs too). The
        tools are checked here when known without loading them and no capability changes
        what is shown (``CodeMode`` adds ``run_code``), else as the run starts, before
        anything runs."""
        verify(checkpoint, self.checkpoint_key)
        setup = paused_in(self, checkpoint)._setup()
        view = setup.tools.unchanged()
        showing = setup.hooks is not None and setup.hooks.showing
        if view is not None and not showing:  # else as the run starts, with the tools they show
            check_tools(checkpoint, view)

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
        twin._wrappers = self._wrappers.then(model, tool, self)
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

    def _from_prompt(self, prompt: str, opts: RunOptions) -> AsyncGenerator[Event, None]:
        agent = starting_agent(self, self.handoff_resume, opts.history)
        state = RunState(messages=[*opts.history, Message.user(prompt)], agent=agent.name)
        if self._stores_outputs:
            state.outputs = OutputStore()
        if opts.history:  # untrusted content of an earlier run (a session) still counts
            state.tainted_by = untrusted_source(opts.history)
        if opts.run_id is not None:
            state.run_id = opts.run_id
        policy = RunPolicy(agent.limits, None, opts.budget)
        return self._started(agent, state, policy, opts)

    def _from_journal(
        self, run: Journaled, history: tuple[Message, ...], opts: RunOptions
    ) -> AsyncGenerator[Event, None]:
        """An unfinished run going on from its journal (``run.in_session``)."""
        if run.paused is not None and not run.steps:  # killed before a step: resume again
            return self._from_pause(run.paused, run.opening.decided(), opts)
        from tooldeck.run._engine.recovery import folded

        agent = agent_named(self, run.holder)
        state, policy = folded(run, history, agent.limits, opts.budget)
        if self._stores_outputs:
            state.outputs = OutputStore.of(state.trace)
        return self._started(agent, state, policy, opts, continued=True)

    def _from_pause(
        self, checkpoint: Checkpoint, decisions: Decided, opts: RunOptions
    ) -> AsyncGenerator[Event, None]:
        self.check_resumable(checkpoint)
        decided = check_decisions(checkpoint, decisions or {})
        agent = paused_in(self, checkpoint)
        state, policy = restore(checkpoint, agent.limits, opts.budget)
        state.agent = agent.name
        if self._stores_outputs:
            state.outputs = OutputStore.of(state.trace)
        return self._started(agent, state, policy, opts, decided, checkpoint)

    def _started(
        self,
        agent: HandoffAgent,
        state: RunState,
        policy: RunPolicy,
        opts: RunOptions,
        decisions: dict[str, Decision] | None = None,
        resumed: Checkpoint | None = None,
        *,
        continued: bool = False,
    ) -> AsyncGenerator[Event, None]:
        """The run's events from its state: from a prompt, from a pause with ``decisions``
        made on it (``resumed``), or ``continued`` from its journal; the options give the
        rest of its start (deps, deltas, cancel, call records, journal) the same each way."""
        start = RunStart(
            state,
            policy,
            opts.deps,
            opts.deltas,
            decisions,
            resumed,
            opts.cancel,
            opts.records,
            opts.journal,
            continued,
        )
        return run_events(self, agent, start, opts)

    def _setup(self) -> RunSetup:
        model, instructions = asked_with(self._output, self.model, self.instructions)
        asking = Asking(model, instructions, self._request_hooks, self.history_strategy)
        return RunSetup(
            asking,
            self._tools,
            self._call_options,
            self._requests,
            self._output,
            self.output_retries,
            self.on_limit,
            self.checkpoint_key,
            self._guards,
            None,  # handoffs and inherits: set by the handover for the runs that have them
            None,
            self._run_hooks,  # positional: keywords cost a dict on every run
            self.capabilities,
        )


def _searching(tools: ToolSource, given: Sequence[Capability]) -> tuple[Capability, ...]:
    """A ``ToolSearch`` for an agent given deferred tools and none: they must never be
    silently out of reach (its import waits for such an agent)."""
    registry = tools.registry
    defers = registry.defers if registry is not None else bool(tools.current.deferred)
    if not defers:
        return ()
    from tooldeck.search import ToolSearch, needs_search

    return (ToolSearch(),) if needs_search(given) else ()


class _SessionRuns:
    """The runs an agent may start in a session, for ``run.in_session``, with the prompt
    and the options of the call that asked."""

    def __init__(self, agent: Agent[Any, Any], prompt: str, opts: RunOptions) -> None:
        self._agent, self._prompt, self._opts = agent, prompt, opts

    def carrying(self, states: Mapping[str, Any] | None) -> None:
        self._opts = replace(self._opts, carried=states)

    def from_prompt(
        self, history: tuple[Message, ...], run_id: str, journal: JournalWriter | None
    ) -> AsyncGenerator[Event, None]:
        opts = replace(self._opts, history=history, run_id=run_id, journal=journal)
        return self._agent._from_prompt(self._prompt, opts)

    def from_pause(
        self, paused: Checkpoint, decisions: Mapping[str, Decision], journal: JournalWriter | None
    ) -> AsyncGenerator[Event, None]:
        return self._agent._from_pause(paused, decisions, replace(self._opts, journal=journal))

    def going_on(
        self, run: Journaled, history: tuple[Message, ...], journal: JournalWriter
    ) -> AsyncGenerator[Event, None]:
        return self._agent._from_journal(run, history, replace(self._opts, journal=journal))

    async def close(self, run: Journaled, history: tuple[Message, ...]) -> Closed:
        from tooldeck.run._engine.recovery import close

        agent = agent_named(self._agent, run.holder)
        view = await agent._setup().tools.view()
        return await close(run, history, view, self._opts.records, agent.limits)


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
