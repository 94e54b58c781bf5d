"""The signal that cancels a run started with ``Agent.start`` (``RunHandle.cancel``)."""

from __future__ import annotations

import threading


class CancelSignal(threading.Event):
    """Set when a run is cancelled; ``reason`` says why. Tools read it as ``ctx.cancelled``."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = ""

    def cancel(self, reason: str) -> None:
        """Set the signal, keeping the first reason given."""
        if not self.is_set():
            self.reason = reason
        self.set()
