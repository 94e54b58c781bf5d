"""The seam between the loop and what watches a run (``tooldeck.observe``'s spans, the run log).

The loop knows only these protocols, and attaches what watches a run in one place
(``starting.run_events``). ``Agent(instrument=...)``, or the process default that
``tooldeck.instrument()`` installs, starts one RunObserver per run; with neither the loop
holds None, and pays one ``is None`` check per tool call. A StreamObserver
(``Agent(run_log=...)``) only reads the run's event stream, which carries all it records:
it needs no hook inside the loop, and costs nothing when there is none.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tooldeck.messages import Message, ToolCall
from tooldeck.models.base import Model
from tooldeck.results import Decision, PendingCall, RunResult, ToolTrace
from tooldeck.run.capabilities import Capability
from tooldeck.run.events import Event, FinalAnswer, GuardrailChecked, HandedOff
from tooldeck.run.options import ParentCall
from tooldeck.safety import GuardrailDecision


class RunObserver(Protocol):
    """Told about one run as it happens."""

    def model(self, model: Model) -> Model:
        """``model`` as this run calls it (e.g. wrapped so each request is observed)."""
        ...

    async def tool_call(
        self, call: ToolCall, execute: Callable[[], Awaitable[ToolTrace | PendingCall]]
    ) -> ToolTrace | PendingCall:
        """Run a call (``execute``) under observation and return its trace (or, for an agent
        tool whose inner run paused, its PendingCall)."""
        ...

    def answered(self, trace: ToolTrace) -> None:
        """A call was answered without running: refused (unknown tool, bad arguments, a
        limit), rejected by a person, or given its result by the application."""

    def guardrail(self, decision: GuardrailDecision) -> None:
        """A guardrail decided (on the prompt, the answer, or a call's arguments or result)."""

    def handed_off(self, handed: HandedOff) -> None:
        """An agent handed the run to another (``Agent(handoffs=...)``)."""

    def finished(self, result: RunResult[Any]) -> None:
        """The run ended with a result: an answer, a limit's last answer, or a pause."""

    def failed(self, error: BaseException) -> None:
        """The run ended with ``error``, or was closed or cancelled before it ended."""


class Instrumenter(Protocol):
    """What ``Agent(instrument=...)`` takes: it starts an observer for each run."""

    def start_run(
        self, model: Model, messages: Sequence[Message], instructions: str, run_id: str
    ) -> RunObserver | None:
        """A run of ``model`` on ``messages`` begins, or a paused run (``run_id``) goes on.

        None: this run is not observed after all (no tracing SDK, or not sampled).
        """
        ...


class Tracing(Capability):
    """A capability that traces runs: it starts an observer for each (an Instrumenter;
    ``tooldeck.observe.Instrumentation`` is one). ``Agent(instrument=...)`` builds one."""

    def __init__(self, instrumenter: Instrumenter | None = None) -> None:
        self._instrumenter = instrumenter

    def start_run(
        self, model: Model, messages: Sequence[Message], instructions: str, run_id: str
    ) -> RunObserver | None:
        """See ``Instrumenter.start_run``; by default, the instrumenter it was given."""
        if self._instrumenter is None:
            raise NotImplementedError(f"{type(self).__name__} must define start_run")
        return self._instrumenter.start_run(model, messages, instructions, run_id)


class Observing(Capability):
    """A capability that reads each run's event stream (a StreamObserver; the run log,
    ``tooldeck.runlog.RunLog``, is one). ``Agent(run_log=...)`` builds one."""

    def __init__(self, observer: StreamObserver | None = None) -> None:
        self._observer = observer

    def observe(
        self, events: AsyncGenerator[Event, None], run: RunInfo
    ) -> AsyncGenerator[Event, None]:
        """See ``StreamObserver.observe``; by default, the observer it was given."""
        if self._observer is None:
            raise NotImplementedError(f"{type(self).__name__} must define observe")
        return self._observer.observe(events, run)


def tracing(instrument: Instrumenter) -> Tracing:
    """``instrument`` as a capability (itself when it is one)."""
    return instrument if isinstance(instrument, Tracing) else Tracing(instrument)


def observing(observer: StreamObserver) -> Observing:
    """``observer`` as a capability (itself when it is one)."""
    return observer if isinstance(observer, Observing) else Observing(observer)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a StreamObserver is told about a run as it starts (or resumes)."""

    run_id: str
    prompt: str
    """The run's prompt (for a resumed run: the latest user message of its conversation)."""
    model: str
    """The model's name."""
    instructions: str
    session_id: str | None = None
    decisions: Mapping[str, Decision] | None = None
    """For a resumed run: the decisions it goes on with, by call id (``Approve``,
    ``Reject`` or an external call's ``ToolResult``)."""
    parent: ParentCall | None = None
    """For the run of an agent tool (``agent.as_tool``): the call of the run that made it."""


class StreamObserver(Protocol):
    """Watches a run's event stream without changing it (the run log is one)."""

    def observe(
        self, events: AsyncGenerator[Event, None], run: RunInfo
    ) -> AsyncGenerator[Event, None]:
        """Yield ``events`` as they come, noting what happens; close ``events`` if left early."""
        ...


_default: Instrumenter | None = None


def default_instrumenter() -> Instrumenter | None:
    """What every agent without its own ``instrument=`` uses (None: nothing)."""
    return _default


def set_default_instrumenter(instrumenter: Instrumenter | None) -> None:
    """Make ``instrumenter`` what every agent without ``instrument=`` uses (None: nothing)."""
    global _default
    _default = instrumenter


async def observed(
    observer: RunObserver, events: AsyncGenerator[Event, None]
) -> AsyncGenerator[Event, None]:
    """A run's events as they come, telling ``observer`` how the run ended."""
    try:
        async for event in events:
            if isinstance(event, FinalAnswer):
                observer.finished(event.result)
            elif isinstance(event, GuardrailChecked):
                observer.guardrail(event.decision)
            elif isinstance(event, HandedOff):
                observer.handed_off(event)
            yield event
    except BaseException as error:  # told, then re-raised unchanged
        observer.failed(error)
        raise
    finally:
        await events.aclose()
