"""THE loop: ask the model, run the tools it chose, feed the results back, repeat.

Every run — from a prompt or from a pause, streamed or not, in a session or durable — is
``drive``: it asks the model (``request.ask``), decides whether the turn ends the run
(``answers``), runs the turn's calls (``calls.round``), records (``state``), and asks the
policy whether it must stop. It yields the run's events; the last is FinalAnswer.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, replace
from functools import partial
from types import MappingProxyType
from typing import Any, Literal

from tooldeck.errors import (
    GuardrailTripped,
    LimitExceeded,
    MiddlewareError,
    RunStopped,
    ToolExecutionError,
)
from tooldeck.messages import AssistantOutput, ToolSpec
from tooldeck.models.base import ModelSettings
from tooldeck.results import Checkpoint, Decision, RunResult, StopReason, ToolTrace
from tooldeck.run._engine.answers import shown_specs, take_answer
from tooldeck.run._engine.calls.round import RoundOutcome, run_round
from tooldeck.run._engine.calls.shared import CallOptions, CallRound
from tooldeck.run._engine.checkpoint import check_tools, make_checkpoint
from tooldeck.run._engine.hooks import Hooks
from tooldeck.run._engine.inherited import Inherited
from tooldeck.run._engine.joins import joined_as_it_answers, joins_before_request
from tooldeck.run._engine.journal import JournalWriter, journaled
from tooldeck.run._engine.remembered import carry_from_session, check_kept, remember_decisions
from tooldeck.run._engine.request import Asking, Delta, ask, with_deltas
from tooldeck.run._engine.spending import SPENDING_STOPS, left_for_calls, not_run
from tooldeck.run._engine.state import OpenTurn, RunState, attach
from tooldeck.run.capabilities import Capability, RunView
from tooldeck.run.events import (
    Event,
    FinalAnswer,
    GuardrailChecked,
    HandedOff,
    MessageJoined,
    ModelRequest,
    ModelResponse,
    NestedEvent,
)
from tooldeck.run.guardrails import Guards, InputCheck, judge_answer
from tooldeck.run.observer import RunObserver
from tooldeck.run.output import OutputPlan
from tooldeck.run.policy import RunPolicy
from tooldeck.run.session import CallRecords
from tooldeck.run.untrusted import safe_output
from tooldeck.tools.registry import ToolSource, ToolView

OnLimit = Literal["raise", "final_answer"]
_NO_DECISIONS: Mapping[str, Decision] = MappingProxyType({})
"""A new round's decisions: none (one empty mapping for every run, not a dict each round)."""
_KEPT = frozenset((NestedEvent, GuardrailChecked))
"""Events of a round whose content the run's state keeps (tested by exact type, as the
round makes them: a third of what ``isinstance`` with a tuple costs, on every event)."""
_ENDS = (FinalAnswer, HandedOff)
"""What ends this loop after a round: the run's end or pause, or a handoff (the next
agent's loop goes on with the run: ``run.handoff``)."""


@dataclass(slots=True)  # treat as read-only (made for every run; frozen costs 3x)
class RunSetup:
    """What the loop needs of the agent, read as a run starts."""

    asking: Asking
    tools: ToolSource
    calls: CallOptions
    requests: tuple[ModelSettings, ModelSettings, ModelSettings]
    """The settings of the first request, of the later ones, and of a last one without tools."""
    output: OutputPlan | None
    output_retries: int
    on_limit: OnLimit
    checkpoint_key: bytes | None
    guards: Guards | None = None
    """The input and output guardrails (None: none)."""
    handoffs: Mapping[str, str] | None = None
    """Transfer tool name -> the agent it hands the run to (None: no handoffs)."""
    inherits: Inherited | None = None
    """The run-level rules the runs made inside its calls inherit, when the run has some
    beside this agent's own (None: this agent's own, ``run._engine.inherited``)."""
    hooks: Hooks | None = None
    """The run's capabilities that add instructions, keep state, or see the answer or the
    events (None: none does; request and call hooks go with ``asking`` and ``calls``)."""
    capabilities: tuple[Capability, ...] = ()
    """The agent's capabilities (the run-level ones among them go with the run)."""


@dataclass(slots=True)  # treat as read-only (made for every run; frozen costs 3x)
class RunStart:
    """Where a run starts: from a prompt, or from a pause with the decisions made on it."""

    state: RunState
    policy: RunPolicy
    deps: Any
    deltas: bool
    decisions: dict[str, Decision] | None = None
    resumed: Checkpoint | None = None
    cancel: threading.Event | None = None
    """Set when the run is cancelled (``RunHandle.cancel``); tools see it as ``ctx.cancelled``."""
    records: CallRecords | None = None
    """Where ``side_effects`` calls are recorded (the run's session, when it can)."""
    journal: JournalWriter | None = None
    """Where the run's journal is written ahead (the run's session, when it keeps one)."""
    continued: bool = False
    """The run goes on from its journal: its prompt was checked when it began."""


async def drive(
    setup: RunSetup, start: RunStart, observer: RunObserver | None
) -> AsyncGenerator[Event, None]:
    """The loop. It starts from a prompt or from a paused run (``start.decisions``)."""
    state, policy, deps, name = start.state, start.policy, start.deps, start.state.agent
    view, asking, first, calls_of, decisions = await _begin(setup, start, observer)
    while True:
        stop: RunStopped | FinalAnswer | HandedOff | None = None
        if (turn := state.turn) is not None:
            outcome: RoundOutcome | None = None
            calls = run_round(turn, decisions, _moved(calls_of, view, turn, state, setup.hooks))
            try:
                async for item in calls:
                    if isinstance(item, RoundOutcome):
                        outcome = item
                        continue
                    if type(item) in _KEPT:  # a run inside a call (its usage), a decision
                        state.keep(item)
                    item.agent = name
                    yield item
            except (MiddlewareError, GuardrailTripped) as error:
                raise attach(error, state, _stop_reason(error)) from error.__cause__
            finally:  # closed or cancelled mid-round: the calls stop now
                await calls.aclose()
            stop, decisions = _close_round(setup, state, policy, view, turn, outcome), _NO_DECISIONS
        stop = _before_request(setup, state, policy, stop)
        if isinstance(stop, _ENDS):  # made with the agent's name, as every event is
            yield stop
            return
        view = view if stop is not None else (setup.tools.unchanged() or await setup.tools.view())
        view, specs, settings, reason = _next_request(setup, state, policy, view, stop, deps)
        if state.inbox is not None or setup.hooks is not None:  # messages sent meanwhile
            for joined in await joins_before_request(setup.hooks, state, policy, deps):
                yield joined
        yield ModelRequest(policy.rounds, len(state.messages), settings, specs, name)
        direct = not start.deltas and first is None
        output = await ask(asking, state, policy, specs, settings, deps) if direct else None
        if output is None:  # deltas as the model writes them, or the input guardrails beside
            async with aclosing(_asked(start, asking, specs, settings, first)) as asked:
                async for written in asked:
                    if isinstance(written, AssistantOutput):
                        output = written
                    else:
                        written.agent = name
                        yield written
            first = None
            assert output is not None  # the request ends with its turn or raises
        output = safe_output(output)  # what a model sends is untrusted: run.untrusted
        state.record_output(output, policy.rounds)
        yield ModelResponse(policy.rounds, output, name)
        if policy.metered:  # token or cost limits, a shared budget
            stop, reason = _metered(setup, state, policy, output, stop, reason)
        if stop is None and setup.output is None and output.tool_calls:
            continue  # the usual round: run the calls (no coroutine for _answer)
        ended = await _answer(setup, state, policy, output, deps, stop, reason)
        ended, checked = await _judged(setup, state, policy, ended, deps)
        for event in checked:  # the output guardrails' decisions, with the agent's name
            yield event
        if ended is not None:
            yield FinalAnswer(ended, name)
            return


async def _begin(
    setup: RunSetup, start: RunStart, observer: RunObserver | None
) -> tuple[ToolView, Asking, InputCheck | None, CallRound, Mapping[str, Decision]]:
    """The tools of the run's first round (a resumed run's pending calls checked against
    them, before anything runs), how the run asks its model (observed, when traced), the
    input guardrails of a run from a prompt, what its rounds of calls share, and the
    decisions its first round runs with (a resumed run's)."""
    view = setup.tools.unchanged() or await setup.tools.view()
    asking, hooks, state = setup.asking, setup.hooks, start.state
    if state.carried is not None:  # a run in a session: the approvals it remembers
        carry_from_session(state)
    if hooks is not None:
        asking = _capable(hooks, start, asking)
        if hooks.showing:  # a resumed run's calls may be of tools a search revealed
            view = _shown(hooks, view, state, start.policy, start.deps)
    if state.states is not None:
        check_kept(state, start.resumed)
    if start.resumed is not None:
        check_tools(start.resumed, view)
        if start.decisions:
            remember_decisions(state, start.resumed, start.decisions)
    if observer is not None:
        asking = replace(asking, model=observer.model(asking.model))
    first = None
    guards, fresh = setup.guards, start.resumed is None and not start.continued
    if guards is not None and guards.input and fresh:
        first = InputCheck(guards.input, start.state, start.deps)
    decisions = start.decisions or _NO_DECISIONS
    return view, asking, first, _call_round(setup, start, view, observer), decisions


def _capable(hooks: Hooks, start: RunStart, asking: Asking) -> Asking:
    """As a run starts: its capabilities' states (a resumed run's kept) and the instructions
    they add."""
    state = start.state
    view = RunView(state.run_id, state.agent, start.policy.rounds, start.deps)
    added, states = hooks.start(view, state.states, state.carried)
    state.states = states or None
    if not added:
        return asking
    joined = f"{asking.instructions}\n\n{added}" if asking.instructions else added
    return replace(asking, instructions=joined)


def _shown(hooks: Hooks, view: ToolView, state: RunState, policy: RunPolicy, deps: Any) -> ToolView:
    """The tools the next request shows, as the capabilities that choose them say."""
    seen = RunView(state.run_id, state.agent, policy.rounds, deps, (), state.states)
    try:
        return hooks.shown(view, seen)
    except MiddlewareError as error:
        raise attach(error, state, StopReason.MIDDLEWARE_ERROR) from error.__cause__


def run_view(state: RunState, policy: RunPolicy, deps: Any) -> RunView:
    """What a capability's run hooks read of the run now."""
    messages = tuple(state.messages)
    return RunView(state.run_id, state.agent, policy.rounds, deps, messages, state.states)


def _stop_reason(error: RunStopped) -> StopReason:
    if isinstance(error, GuardrailTripped):
        return StopReason.GUARDRAIL
    return StopReason.MIDDLEWARE_ERROR


def _close_round(
    setup: RunSetup,
    state: RunState,
    policy: RunPolicy,
    view: ToolView,
    turn: OpenTurn,
    outcome: RoundOutcome | None,
) -> FinalAnswer | HandedOff | RunStopped | None:
    """Keep the round's answered calls: the run pauses (its FinalAnswer) when some wait;
    else the reason it must stop after this round, if any, or the handoff it made."""
    assert outcome is not None  # a round always ends with its outcome
    if outcome.untrusted:
        state.took_in(turn, outcome.untrusted)
    if state.close_round(turn, outcome.traces, outcome.pending):
        checkpoint = make_checkpoint(state, policy, setup.checkpoint_key)
        return FinalAnswer(state.result("", StopReason.PAUSED, checkpoint), state.agent)
    stop = policy.stop_after_round(view.dispatch, outcome.raised, outcome.over_call_limit)
    if stop is None and setup.handoffs is not None:
        return _handed_off(setup.handoffs, turn, state.agent)
    return stop


def _handed_off(handoffs: Mapping[str, str], turn: OpenTurn, source: str) -> HandedOff | None:
    """The turn's first transfer call that ran (not refused), if any: the run goes on in
    its agent (a turn's later transfers are not followed)."""
    for call in turn.calls:
        target = handoffs.get(call.name)
        if target is not None and turn.answered[call.id].ok:
            return HandedOff(turn.round, call, source, target, source)
    return None


def _next_request(
    setup: RunSetup,
    state: RunState,
    policy: RunPolicy,
    view: ToolView,
    stop: RunStopped | None,
    deps: Any,
) -> tuple[ToolView, tuple[ToolSpec, ...], ModelSettings, StopReason]:
    """The tools (as the capabilities that choose them say) and settings of the next
    request, and the reason the run ends with if it answers: the current tools, or (at a
    limit, ``on_limit="final_answer"``) none. The request is counted (``policy.rounds``)."""
    if stop is None:
        if (hooks := setup.hooks) is not None and hooks.showing:
            view = _shown(hooks, view, state, policy, deps)
        specs = view.specs if setup.output is None else shown_specs(setup.output, view)
        settings = setup.requests[0] if policy.rounds == 0 else setup.requests[1]
        policy.rounds += 1
        return view, specs, settings, StopReason.ANSWER
    reason = _last_request(setup, state, stop)  # raises unless asked for a last answer
    policy.rounds += 1
    return view, shown_specs(setup.output, ToolView.of(())), setup.requests[2], reason


def _asked(
    start: RunStart,
    asking: Asking,
    specs: tuple[ToolSpec, ...],
    settings: ModelSettings,
    first: InputCheck | None,
) -> AsyncGenerator[Delta | GuardrailChecked | AssistantOutput, None]:
    """The request as a task: its deltas as the model writes (when asked for), the input
    guardrails' decisions beside the first request, then its turn."""
    state, policy, deps = start.state, start.policy, start.deps
    if first is not None:
        request = partial(ask, asking, state, policy, specs, settings, deps)
        return first.beside(request, start.deltas)
    return with_deltas(lambda emit: ask(asking, state, policy, specs, settings, deps, emit))


async def _judged(
    setup: RunSetup, state: RunState, policy: RunPolicy, ended: RunResult[Any] | None, deps: Any
) -> tuple[RunResult[Any] | None, Iterable[GuardrailChecked | MessageJoined]]:
    """The run's result (``_answer``'s) after the output guardrails and the answer hooks, when
    it is an answer, and the guardrails' decisions on it; None to go on, as when a message
    sent to the run as it answered waits (it asks again, to answer it: joined by a
    capability, before this answer is judged, which it replaces)."""
    if ended is None or ended.stop_reason != StopReason.ANSWER:
        return ended, ()
    if (joined := await joined_as_it_answers(setup.hooks, state, policy, deps)) is not None:
        return None, (joined,)
    checked: Iterable[GuardrailChecked] = ()
    guards = setup.guards
    if guards is not None and guards.output:
        ended, decided = await judge_answer(
            guards, setup.output_retries, state, policy, ended, deps
        )
        checked = _stamped(decided, state.agent)
    hooks = setup.hooks
    if ended is not None and hooks is not None and hooks.answering:
        kept: list[GuardrailChecked] = []
        try:  # a trip is raised once its decision reached the stream, as without hooks
            kept.extend(checked)
        except GuardrailTripped as trip:
            return ended, _then_raise(kept, trip)
        checked = kept
        try:
            ended = await hooks.answered(ended, run_view(state, policy, deps))
        except (MiddlewareError, GuardrailTripped) as error:
            raise attach(error, state, _stop_reason(error)) from error.__cause__
    if ended is not None and state.inbox is not None and state.inbox.answers_again(ended):
        return None, checked
    return ended, checked


def _then_raise(events: list[GuardrailChecked], error: BaseException) -> Iterator[GuardrailChecked]:
    yield from events
    raise error


def _stamped(events: Iterable[GuardrailChecked], agent: str) -> Iterator[GuardrailChecked]:
    """The decisions with the agent's name, one at a time: a trip's stop is raised after its
    decision reached the stream (and the run log)."""
    for event in events:
        event.agent = agent
        yield event


async def _answer(
    setup: RunSetup,
    state: RunState,
    policy: RunPolicy,
    output: AssistantOutput,
    deps: Any,
    stop: RunStopped | None,
    reason: StopReason,
) -> RunResult[Any] | None:
    """The run's result if this turn ends it: an answer (typed when asked for), or the last
    answer at a limit; None to go on."""
    if setup.output is not None:
        answered = await take_answer(
            setup.output, setup.output_retries, state, policy, output, deps
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
    if isinstance(stop, LimitExceeded) and stop.limit in SPENDING_STOPS:
        return state.result(output.content, reason)  # not asked again: the text is no answer
    return state.result(output.content, reason, None, output.content)


def _before_request(
    setup: RunSetup,
    state: RunState,
    policy: RunPolicy,
    closed: RunStopped | FinalAnswer | HandedOff | None,
) -> RunStopped | FinalAnswer | HandedOff | None:
    """What comes before the next request: the end its round made (a pause, a handoff), the
    stop that forbids asking as usual, or — when the last answer ``on_limit="final_answer"``
    asks for finds the budget spent — the run's end without a request and without an answer
    (``output`` None; the spending limit is its stop reason): a spent budget lets no
    request out."""
    if isinstance(closed, _ENDS):
        return closed
    stop = closed or policy.stop_before_request(state)
    if setup.on_limit == "raise" or not isinstance(stop, LimitExceeded):
        return stop  # raised before the request (``_last_request``), or none
    spent = policy.last_request_refused(state, stop)
    if spent is None:
        return stop
    return FinalAnswer(state.result("", StopReason(spent.limit)), state.agent)


def _metered(
    setup: RunSetup,
    state: RunState,
    policy: RunPolicy,
    output: AssistantOutput,
    stop: RunStopped | None,
    reason: StopReason,
) -> tuple[RunStopped | None, StopReason]:
    """After a response of a metered run: its usage counted; at a token or cost limit the
    turn's calls are answered as not run, and the run stops (raised unless
    ``on_limit="final_answer"``: then the turn's text ends it)."""
    spent = policy.after_response(state, output)
    turn = state.turn
    if spent is None or stop is not None or turn is None:
        return stop, reason
    refusal = not_run(spent)
    traces = [ToolTrace(call=call, result=refusal, duration_s=0.0) for call in turn.calls]
    state.close_round(turn, traces, ())
    return spent, _last_request(setup, state, spent)


def _call_round(
    setup: RunSetup, start: RunStart, view: ToolView, observer: RunObserver | None
) -> CallRound:
    """What the run's rounds of calls share: one per run, moved to each round (``_moved``)."""
    state = start.state
    return CallRound(
        view,
        start.policy,
        setup.calls,
        start.deps,
        0,
        state.run_id,
        observer,
        state.messages,
        state.outputs,
        start.cancel,
        start.records,
        state.tainted_by,
        setup.inherits or _own_rules(setup),
        None,  # the budget: set as each round starts (``_moved``)
        state.states,  # positional: keywords cost a dict on every run
    )


def _own_rules(setup: RunSetup) -> Inherited | None:
    """The agent's own run-level rules, which the runs made inside its calls inherit (None
    for an agent without guardrails or untrusted-content policy: the usual run)."""
    calls = setup.calls
    lasting = (
        tuple(item for item in setup.capabilities if item.run_level) if setup.capabilities else ()
    )
    if (
        setup.guards is None
        and not calls.tool_guardrails
        and calls.after_untrusted == "allow"
        and not lasting
    ):
        return None
    return Inherited(
        setup.guards, calls.tool_guardrails, calls.after_untrusted, capabilities=lasting
    )


def _moved(
    calls: CallRound, view: ToolView, turn: OpenTurn, state: RunState, hooks: Hooks | None
) -> CallRound:
    """The run's CallRound for this round (one per run: a 12-field record and a helper frame
    each round were ~2% of a W1a round's bytecodes). Its tools are shown again when a
    capability chooses them: a provider's own tool search reveals tools in the turn whose
    calls this round runs."""
    if hooks is not None and hooks.showing:
        view = _shown(hooks, view, state, calls.policy, calls.deps)
    calls.view, calls.round, calls.tainted_by = view, turn.round, state.tainted_by
    spending = calls.policy.spending  # the runs inside its calls spend what the run has left
    calls.budget = (
        calls.policy.budget
        if spending is None
        else left_for_calls(spending, state, calls.policy.budget)
    )
    return calls


def _last_request(setup: RunSetup, state: RunState, stop: RunStopped) -> StopReason:
    """At a limit: raise it, or (``on_limit="final_answer"``) the reason the run ends with
    after one last request without tools."""
    if isinstance(stop, ToolExecutionError):
        raise attach(stop, state, StopReason.TOOL_RAISED) from stop.__cause__
    assert isinstance(stop, LimitExceeded)
    reason = StopReason(stop.limit)
    if setup.on_limit == "raise":
        raise attach(stop, state, reason)
    return reason


def driven(
    setup: RunSetup, start: RunStart, observer: RunObserver | None
) -> AsyncGenerator[Event, None]:
    """``drive``, its journal written ahead when the run keeps one (``run._engine.journal``)."""
    events = drive(setup, start, observer)
    hooks = setup.hooks
    if hooks is not None and hooks.watching:
        state, policy, deps = start.state, start.policy, start.deps
        events = hooks.told(events, lambda: run_view(state, policy, deps))
    if start.journal is None:
        return events
    return journaled(events, start.state, start.policy, start.journal)
