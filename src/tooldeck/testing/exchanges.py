"""What the simulator saw: each request with the step that answered it (an ``Exchange``),
in order of arrival, kept in a ``Ledger`` that any thread may read and wait on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from tooldeck.testing.request import SimRequest
from tooldeck.testing.steps import Calls, CutStream, Hang, Reply, Status, Step


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and what answered it."""

    request: SimRequest
    step: Step | None
    """None when no rule and no step was left (the request got HTTP 500)."""
    call_ids: tuple[str, ...] = ()
    """The tool-call ids the answer carries (fresh for every response)."""

    def describe(self) -> str:
        """``request 2 (POST /v1/responses, ...) -> call refund_order [call_9f...]``."""
        answered = "nothing left (HTTP 500)" if self.step is None else step_label(self.step)
        ids = f" [{', '.join(self.call_ids)}]" if self.call_ids else ""
        return f"{self.request.describe()} -> {answered}{ids}"


def step_label(step: Step) -> str:
    """A step in a few words: ``reply 'Refunded.'``, ``call lookup, lookup``, ``429``."""
    if isinstance(step, Reply):
        text = step.text if len(step.text) <= 40 else step.text[:37] + "..."
        return f"reply {text!r}"
    if isinstance(step, Calls):
        return "call " + ", ".join(call.name for call in step.calls)
    if isinstance(step, Status):
        return f"HTTP {step.status}" + (
            f" (retry-after {step.retry_after:g})" if step.retry_after is not None else ""
        )
    if isinstance(step, Hang):
        return "hang"
    if isinstance(step, CutStream):
        return f"{step_label(step.answer)}, cut after {step.after_chunks} chunk(s)"
    return f"{step_label(step.answer)}, after {step.seconds:g} s"


class Ledger:
    """Every exchange, in order of arrival; read from any thread, waited on without sleeping."""

    def __init__(self, on_exchange: Callable[[Exchange], object] | None = None) -> None:
        self._changed = threading.Condition()
        self._on_exchange = on_exchange
        self.exchanges: list[Exchange] = []
        self.unscripted: list[str] = []
        """What went wrong with a request nothing was left for (or whose step failed)."""

    def add(self, exchange: Exchange, problem: str | None = None) -> None:
        """Record ``exchange`` (and what went wrong, for a request nothing answered)."""
        with self._changed:
            self.exchanges.append(exchange)
            if problem is not None:
                self.unscripted.append(problem)
            self._changed.notify_all()
        if self._on_exchange is not None:
            self._on_exchange(exchange)

    def next_number(self) -> int:
        """The number the next request gets (1 for the first)."""
        return len(self.exchanges) + 1

    def wait_for(self, count: int, timeout: float) -> bool:
        """Whether ``count`` exchanges were recorded within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self.exchanges) >= count, timeout)
