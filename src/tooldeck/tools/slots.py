"""``@tool(max_concurrency=N)``: at most N calls of one tool at once, across every run in the
process, whatever event loop or thread each run is on.

One ``ConcurrencySlots`` per tool definition (its origin and name), made on first use; a
call takes a slot before it runs and gives it back when it ends. Waiting calls get their slot
in the order they asked, each woken on its own event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import deque
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class ConcurrencySlots:
    """A semaphore that works across event loops and threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._free = size
        self._waiters: deque[_Waiter] = deque()

    @property
    def in_use(self) -> int:
        """Slots taken right now."""
        return self.size - self._free

    async def run(self, work: Awaitable[T]) -> T:
        """Await ``work`` holding a slot (waiting for one first; ``work`` is closed unrun
        when the wait is cancelled)."""
        try:
            await self._acquire()
        except BaseException:
            if inspect.iscoroutine(work):
                work.close()
            raise
        try:
            return await work
        finally:
            self._release()

    async def _acquire(self) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            loop = asyncio.get_running_loop()
            waiter: _Waiter = (loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter[1]
        except asyncio.CancelledError:
            with self._lock:
                if waiter in self._waiters:  # never got a slot
                    self._waiters.remove(waiter)
                    raise
            future = waiter[1]
            if future.done() and not future.cancelled():  # got one, then was cancelled
                self._release()
            raise

    def _release(self) -> None:
        with self._lock:
            if not self._waiters:
                self._free += 1
                return
            loop, future = self._waiters.popleft()
        try:
            loop.call_soon_threadsafe(self._grant, future)
        except RuntimeError:  # that loop is closed: give the slot to the next
            self._release()

    def _grant(self, future: asyncio.Future[None]) -> None:
        if future.done():  # its waiter was cancelled meanwhile: pass the slot on
            self._release()
        else:
            future.set_result(None)


_SLOTS: dict[tuple[str, str], ConcurrencySlots] = {}
_SLOTS_LOCK = threading.Lock()


def slots_for(origin: str, name: str, size: int) -> ConcurrencySlots:
    """The slots of the tool ``name`` defined at ``origin`` (made on first use; a tool
    redefined with another size gets new ones)."""
    key = (origin, name)
    slots = _SLOTS.get(key)
    if slots is not None and slots.size == size:
        return slots
    with _SLOTS_LOCK:
        slots = _SLOTS.get(key)
        if slots is None or slots.size != size:
            slots = _SLOTS[key] = ConcurrencySlots(size)
        return slots
