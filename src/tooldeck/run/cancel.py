"""The signal that cancels a run started with ``Agent.start`` (``RunHandle.cancel``)."""

from __future__ import annotations

import threading


class CancelSignal(threading.Event):
    """Set when a run is cancelled; ``reason`` says why. Tools read it as ``ctx.cancelled``."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = ""
        self.commit = True
        """Whether the cancelled run commits to its session (the first ``cancel`` decides)."""
        self.started = False
        """Whether the run's loop started: a cancel before leaves the task alone (it may be
        loading its session), and the run ends cancelled as it starts."""
        self.ended = False
        """Whether the run reached its FinalAnswer: a cancel then leaves it alone (its
        session may be committing it)."""

    def cancel(self, reason: str, *, commit: bool = True) -> None:
        """Set the signal, keeping the first reason and commit choice given."""
        if not self.is_set():
            self.reason = reason
            self.commit = commit
        self.set()
