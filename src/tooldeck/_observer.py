"""The seam between the loop and what watches a run (``tooldeck.observe``'s spans).

The loop knows only these protocols. ``Agent(instrument=...)``, or the process default that
``tooldeck.instrument()`` installs, starts one RunObserver per run; with neither the loop
holds None, and pays one ``is None`` check per tool call.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, Protocol

from tooldeck.contracts import Message, PendingCall, RunResult, ToolCall, ToolTrace
from tooldeck.events import Event, FinalAnswer
from tooldeck.models.base import Model


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


_default: Instrumenter | None = None


def default_instrumenter() -> Instrumenter | None:
    """What every agent without its own ``instrument=`` uses (None: nothing)."""
    return _default


def set_default_instrumenter(instrumenter: Instrumenter | None) -> None:
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
            yield event
    except BaseException as error:  # told, then re-raised unchanged
        observer.failed(error)
        raise
    finally:
        await events.aclose()
