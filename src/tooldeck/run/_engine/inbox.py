"""Messages sent to a running run (``RunHandle.send``), waiting to join its conversation.

The handle puts a message in from any task or thread; the loop takes what waits as it
prepares each request (one attribute test per request, ``state.inbox``, for a run that has
none) and the messages join the conversation after the round's results, before the request.
The inbox closes as the run ends, atomically with its last test: a message put in after
that is refused (``RunEnded``), and none put in before is lost — the loop asks again rather
than end with an answer while one waits; a pause keeps what waits in its checkpoint; any
other end keeps it at the end of the transcript, unanswered (``MessageJoined(sent=False)``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from tooldeck.messages import Message
from tooldeck.results import RunResult, StopReason
from tooldeck.run.events import MessageJoined


class Inbox:
    """What was sent to one run and has not joined its conversation yet."""

    __slots__ = ("_closed", "_lock", "run_id", "waiting")

    def __init__(self, waiting: Iterable[Message] = ()) -> None:
        self._lock = threading.Lock()
        self.waiting: list[Message] = list(waiting)
        """The messages sent and not taken yet, oldest first (read without the lock only
        to test whether any waits: the loop's one test per request)."""
        self._closed: str | None = None
        self.run_id = ""
        """The id of the run it belongs to, once the run started (errors name it)."""

    @property
    def closed(self) -> str | None:
        """Why the inbox takes no more messages (the run ended), or None while it does."""
        return self._closed

    def after(self, earlier: Inbox | None) -> Inbox:
        """This inbox, with what ``earlier`` still holds ahead of what it has (a resumed
        pause's queued messages, which were sent first)."""
        if earlier is not None and earlier is not self:
            taken = earlier.take()
            with self._lock:
                self.waiting[:0] = taken
        return self

    def put(self, message: Message) -> str | None:
        """Add ``message`` unless the inbox is closed; None, or why it was refused."""
        with self._lock:
            if self._closed is None:
                self.waiting.append(message)
            return self._closed

    def take(self) -> tuple[Message, ...]:
        """Everything waiting, now out of the inbox."""
        with self._lock:
            taken, self.waiting = tuple(self.waiting), []
            return taken

    def join(self, messages: list[Message], round_: int, agent: str) -> MessageJoined:
        """What waits, added to the run's ``messages`` before the request of ``round_``."""
        sent = self.take()
        messages.extend(sent)
        return MessageJoined(round_, sent, True, agent)

    def answers_again(self, ended: RunResult[Any]) -> bool:
        """Whether a run that answered goes on: a message waits (sent as it answered), so
        it asks again; else the inbox closes as the run ends, in the same step as the test."""
        if ended.stop_reason is not StopReason.ANSWER:
            return False
        with self._lock:
            if self.waiting:
                return True
            self._closed = "it has ended with its answer"
            return False

    def close(self, why: str) -> tuple[Message, ...]:
        """Close the inbox for ``why``; what was still waiting (a run can no longer send it)."""
        with self._lock:
            if self._closed is None:
                self._closed = why
            taken, self.waiting = tuple(self.waiting), []
            return taken
