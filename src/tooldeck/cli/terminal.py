"""Asking the person at the terminal: Ctrl-C always interrupts the wait, and the question
never goes into stdout.

**Ctrl-C.** Python's ``input()`` (GNU readline's loop, or a plain read) runs signal handlers
only when its wait for a key is interrupted (EINTR). A Ctrl-C that lands after the question
is written but before that wait starts interrupts nothing: the handler waits for the next
key, and the person is stuck. While a question waits, a timer therefore interrupts the wait
every ``TICK`` seconds (SIGALRM, whose handler does nothing): the interrupted wait runs the
pending handlers, and KeyboardInterrupt is raised within a tick. This keeps readline (line
editing, the prefilled arguments of an edit), which a wait of our own on the terminal and a
signal wakeup fd would lose.

**Where the question goes.** On a terminal stdout, ``input()`` (readline writes there).
Otherwise (``--json``/``--no-display`` into a file or a pipe) to stderr when it is a
terminal, else to ``/dev/tty``; stdout holds only the machine-readable output.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TextIO

TICK = 0.1
"""Seconds between the wakeups of a waiting question (the longest a Ctrl-C can wait)."""


class TerminalReader:
    """Reads a line from the person at the terminal (stdin is one), as ``input()`` does."""

    def __init__(self) -> None:
        self._tty: TextIO | None = None

    def __call__(self, prompt: str) -> str:
        """Show ``prompt`` on the terminal and read a line (EOFError at the end of input)."""
        with signals_noticed():
            if sys.stdout.isatty():
                return input(prompt)
            terminal = self.stream()
            terminal.write(prompt)
            terminal.flush()
            line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.removesuffix("\n")

    def stream(self) -> TextIO:
        """Where to write what the person reads: stderr if it is a terminal, else the
        terminal itself (``/dev/tty``), else stderr."""
        if sys.stderr.isatty():
            return sys.stderr
        if self._tty is None:
            try:
                self._tty = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115 (kept open)
            except OSError:  # no controlling terminal
                return sys.stderr
        return self._tty


@contextmanager
def signals_noticed() -> Iterator[None]:
    """While the block waits for a key, a signal that arrived is handled within ``TICK`` s."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are handled in the main thread only; nothing to wake here
        return
    # The handler stays after the block: an alarm of the last tick still on its way must
    # find it (the default action of SIGALRM ends the process).
    signal.signal(signal.SIGALRM, _wake)
    signal.setitimer(signal.ITIMER_REAL, TICK, TICK)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _wake(signum: int, frame: FrameType | None) -> None:
    """Nothing: the alarm only interrupts the wait, so that pending handlers run."""
