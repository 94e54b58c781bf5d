"""A run's event stream as the agent it was started on hands it out: driven (by one loop,
or by each agent's in turn with handoffs), cancellable, observed (traces) and logged.

The observer and the run log are attached here and nowhere else.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Literal, Protocol

from tooldeck.models.base import Model
from tooldeck.run._engine.assembly import given_to_run
from tooldeck.run._engine.handing_over import handing_over, ruled, run_level
from tooldeck.run._engine.inherited import Inherited
from tooldeck.run._engine.loop import RunSetup, RunStart, driven
from tooldeck.run.events import Event
from tooldeck.run.handle import cancellable, listening
from tooldeck.run.handoff import Handoff, HandoffAgent
from tooldeck.run.history import current_exchange
from tooldeck.run.observer import (
    Instrumenter,
    Observing,
    RunInfo,
    Tracing,
    default_instrumenter,
    observed,
)
from tooldeck.run.options import RunOptions


class StartingAgent(HandoffAgent, Protocol):
    """What starting a run needs of the agent it is started on (``tooldeck.Agent``)."""

    @property
    def model(self) -> Model: ...

    @property
    def instructions(self) -> str: ...

    @property
    def instrument(self) -> Instrumenter | Literal[False] | None: ...

    observers: tuple[Observing, ...]

    @property
    def handoffs(self) -> Sequence[HandoffAgent | Handoff]: ...

    def _setup(self) -> RunSetup: ...


def run_events(
    first: StartingAgent, agent: HandoffAgent, start: RunStart, opts: RunOptions
) -> AsyncGenerator[Event, None]:
    """The run's event stream, from ``agent`` (``first`` unless a handoff gave it the
    conversation), observed when ``first`` or every agent is instrumented, and logged when
    ``first`` has a run log (the StreamObserver sees what tracing sees)."""
    state = start.state
    if opts.carried is not None:  # a run in a session: what its last committed run ended with
        state.carried = opts.carried
    given = opts.capabilities
    instrument = first.instrument
    if given:  # the run's own capabilities: run-level rules, hooks, observers
        opts = replace(opts, inherited=given_to_run(opts.inherited, given))
        instrument = next((item for item in given if isinstance(item, Tracing)), instrument)
    instrumenter = instrument if instrument is not None else default_instrumenter()
    observer = None
    if instrumenter:
        observer = instrumenter.start_run(
            first.model, state.messages, first.instructions, state.run_id
        )
    inherited = opts.inherited
    if inherited is not None:  # an agent tool's inner run: its outer run's rules, taint, cancel
        start = _inheriting(start, inherited)
    if first.handoffs:
        events = handing_over(first, agent, start, observer, inherited)
    elif inherited is None:
        events = driven(first._setup(), start, observer)
    else:
        setup = first._setup()
        events = driven(ruled(setup, run_level(setup, inherited), prompt=True), start, observer)
    if opts.cancel is not None:
        events = cancellable(events, state, opts.cancel)
    if opts.inbox is not None:  # a run started with a handle: messages may be sent to it
        state.inbox = opts.inbox.after(state.inbox)  # a resumed pause's queued first
        events = listening(events, state, opts.inbox)
    if observer is not None:
        events = observed(observer, events)
    watching = first.observers
    if given:
        watching = (*watching, *(item for item in given if isinstance(item, Observing)))
    if not watching:
        return events
    info = run_info(start, opts, first.model.name, first.instructions)
    for item in watching:
        events = item.observe(events, info)
    return events


def _inheriting(start: RunStart, inherited: Inherited) -> RunStart:
    """The start of a run made inside a call: tainted as its outer run was when the call
    was made (unless it holds untrusted content of its own already), told of the outer
    run's cancel through its tools' ``ctx.cancelled`` (the outer run's handle cancels it),
    its ``side_effects`` calls recorded where the outer run's are."""
    state = start.state
    if state.tainted_by is None:
        state.tainted_by = inherited.tainted_by
    if start.records is None and inherited.records is not None:
        start = replace(start, records=inherited.records)
    if start.cancel is None and inherited.cancel is not None:
        return replace(start, cancel=inherited.cancel)
    return start


def run_info(start: RunStart, opts: RunOptions, model: str, instructions: str) -> RunInfo:
    """What the run log is told as a run starts or resumes (``decisions`` given)."""
    messages = start.state.messages
    prompt = messages[current_exchange(messages)].content
    return RunInfo(
        start.state.run_id,
        prompt,
        model,
        instructions,
        opts.session_id,
        start.decisions,
        opts.parent,
    )
