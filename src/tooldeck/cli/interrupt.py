"""Ctrl-C during a run of ``tooldeck run`` or ``chat``: the run is cancelled through its
handle (``RunHandle.cancel``), as an application cancels one.

The run then ends with stop reason ``cancelled`` and a valid transcript (each call it left
unfinished answered ``error[cancelled]``), which its conversation keeps, and the command
reports it and ends with status 130 (``Interrupted``). A second Ctrl-C, while the cancelled
run winds down, stops at once (``KeyboardInterrupt``: the conversation keeps nothing of
the run). Ctrl-C at an approval question is not this path: the run is paused there, and
the question stays unanswered (``cli/approve.py``).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tooldeck.cli.voice import Driven
from tooldeck.errors import ErrorCode
from tooldeck.results import RunResult, StopReason
from tooldeck.run.events import Event
from tooldeck.run.handle import RunHandle

CTRL_C = "interrupted by Ctrl-C"
"""The reason a Ctrl-C gives the run (the model reads it in each cancelled call's answer)."""


class Interrupted(KeyboardInterrupt):
    """A run cancelled by Ctrl-C: what it produced, reported before the command ends 130;
    its text says what the conversation kept."""

    def __init__(self, text: str, driven: Driven) -> None:
        super().__init__(text)
        self.driven = driven


def interrupted(
    session_id: str | None, result: RunResult[Any], resumed: RunResult[Any] | None = None
) -> None:
    """Raise ``Interrupted`` when ``result`` is a run cancelled by Ctrl-C (the command
    line cancels a run for nothing else); ``session_id``: the conversation that kept it."""
    if result.stop_reason != StopReason.CANCELLED:
        return
    text = "the run was cancelled"
    if session_id is not None:
        text += f"; conversation {session_id!r} keeps what it did"
    traces = result.tool_trace
    unfinished = [t.call.name for t in traces if t.result.error_code == ErrorCode.CANCELLED]
    if unfinished:
        text += f" ({', '.join(unfinished)} answered as cancelled)"
    raise Interrupted(text, Driven(result, resumed))


async def watched(
    start: Callable[[], RunHandle[Any]],
    show: Callable[[Event], None],
    close: Callable[[], None],
    noticed: Callable[[], None],
) -> RunResult[Any]:
    """Start the run, pass each of its events to ``show`` and give its result; a Ctrl-C
    meanwhile cancels it (``noticed`` is told at once), a second one stops at once."""
    handle = start()
    forced = threading.Event()

    def stopping() -> None:
        close()  # the spinner and the writing region go before the line ends
        noticed()

    try:
        with _cancelled_by_ctrl_c(handle, stopping, forced):
            try:
                async for event in handle:
                    show(event)
            finally:
                close()
            return await handle
    except asyncio.CancelledError:  # a second Ctrl-C stopped the wait
        if forced.is_set() or handle.cancelled:
            raise KeyboardInterrupt from None
        raise


@contextmanager
def _cancelled_by_ctrl_c(
    handle: RunHandle[Any], noticed: Callable[[], None], forced: threading.Event
) -> Iterator[None]:
    """While the block runs, Ctrl-C (SIGINT) cancels the run, and a second one the block's
    task. Signals reach the main thread only: elsewhere, and where SIGINT is ignored,
    nothing changes."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous in (
        signal.SIG_IGN,
        None,
    ):
        yield
        return
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_ctrl_c() -> None:
        if not handle.cancelled:
            noticed()
            handle.cancel(reason=CTRL_C)
        elif task is not None:
            forced.set()
            task.cancel()

    loop.add_signal_handler(signal.SIGINT, on_ctrl_c)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)
