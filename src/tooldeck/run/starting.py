"""A run's event stream as the agent it was started on hands it out: driven (by one loop,
or by each agent's in turn with handoffs), cancellable, observed (traces) and logged.

The observer and the run log are attached here and nowhere else.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Literal, Protocol

from tooldeck.models.base import Model
from tooldeck.run.events import Event
from tooldeck.run.handle import cancellable
from tooldeck.run.handoff import Handoff, HandoffAgent
from tooldeck.run.handover import handing_over
from tooldeck.run.loop import RunSetup, RunStart, driven, run_info
from tooldeck.run.observer import (
    Instrumenter,
    StreamObserver,
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

    @property
    def run_log(self) -> StreamObserver | None: ...

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
    instrument = first.instrument
    instrumenter = instrument if instrument is not None else default_instrumenter()
    observer = None
    if instrumenter:
        observer = instrumenter.start_run(
            first.model, state.messages, first.instructions, state.run_id
        )
    if first.handoffs:
        events = handing_over(first, agent, start, observer)
    else:
        events = driven(first._setup(), start, observer)
    if opts.cancel is not None:
        events = cancellable(events, state, opts.cancel)
    if observer is not None:
        events = observed(observer, events)
    if first.run_log is None:
        return events
    return first.run_log.observe(
        events, run_info(start, opts, first.model.name, first.instructions)
    )
