"""A provider SDK client per event loop, for the adapters that build their own.

An SDK's async client (``AsyncOpenAI``, ``AsyncAnthropic``) keeps an HTTP connection pool
whose connections and locks belong to the event loop that first used them; a request from
another loop fails (``RuntimeError: <asyncio.locks.Event ...> is bound to a different event
loop``). One model is used from many loops all the time: ``run_sync`` runs each thread on
that thread's own loop (a worker pool, a ThreadPoolExecutor), and every ``asyncio.run``
is a new loop. So a client the adapter built is kept per loop: the first loop uses the one
built with the model, another loop gets a new one made the same way (never a copy that
shares the first one's HTTP client).

A client passed in by the user is used as it is, on every loop: making it safe to share
across loops is its owner's part (the adapters' ``client=`` docs say so), and a request
that fails because it is not (``foreign_loop_errors``) says so and what to do.

Kept by loop in a weak mapping: a loop nobody holds any more goes with its client. A
client's pooled connections hold their loop, though, so that alone would keep a finished
loop alive: the client of a loop that is closed (``asyncio.run`` closes its own) is closed
as far as it can be and let go whenever another loop arrives, and by ``aclose()``. The
request path costs one dict lookup.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar
from weakref import WeakKeyDictionary

from tooldeck.errors import ModelError

C = TypeVar("C")


class LoopClients(Generic[C]):
    """The client of the running loop: the one built with the model, or one made for it.

    Args:
        first: The client built with the model (or passed in): the first loop uses it, and
            its settings (base URL, retries) are the ones error messages name.
        make: Makes another client with the same settings, for another loop; None for a
            client passed in, which every loop uses as it is.
        close: Closes a client (awaited on the client's own loop).
    """

    __slots__ = ("_by_loop", "_close", "_lock", "_make", "_unclaimed", "first")

    def __init__(
        self,
        first: C,
        make: Callable[[], C] | None,
        close: Callable[[C], Coroutine[Any, Any, None]],
    ) -> None:
        self.first = first
        self._make = make
        self._close = close
        self._by_loop: WeakKeyDictionary[asyncio.AbstractEventLoop, C] = WeakKeyDictionary()
        self._unclaimed: C | None = first if make is not None else None
        """The client built with the model, until a loop uses it."""
        self._lock = threading.Lock()

    @property
    def owned(self) -> bool:
        """Whether the adapter made its clients (so it closes them); False for one passed in."""
        return self._make is not None

    def current(self) -> C:
        """The running loop's client (outside any loop, the first one)."""
        if self._make is None:
            return self.first
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self.first
        client = self._by_loop.get(loop)
        return client if client is not None else self._claim(loop)

    def _claim(self, loop: asyncio.AbstractEventLoop) -> C:
        """A client for a loop met the first time: the unused first one, else a new one.

        The clients of loops that have closed meanwhile are let go here.
        """
        assert self._make is not None
        with self._lock:
            finished = [known for known in self._by_loop if known.is_closed()]
            stale = [self._by_loop.pop(known) for known in finished]
            client = self._unclaimed
            if client is None:
                client = self._make()
            self._unclaimed = None
            self._by_loop[loop] = client
        if stale:
            _in_background(loop, _let_go(self._close, stale))
        return client

    async def aclose(self) -> None:
        """Close the clients made here; a later request makes a new one.

        The running loop's client is closed here; another loop's is closed on that loop if
        it is running (not waited for), as far as it can be here if that loop has closed,
        and else (an idle loop, which belongs to its thread) dropped. A client passed in is
        left to its owner.
        """
        if self._make is None:
            return
        with self._lock:
            clients = list(self._by_loop.items())
            self._by_loop.clear()
            unclaimed, self._unclaimed = self._unclaimed, None
        current = asyncio.get_running_loop()
        if unclaimed is not None:  # never used: no loop holds its connections
            await self._close(unclaimed)
        await _let_go(self._close, [client for loop, client in clients if loop.is_closed()])
        for loop, client in clients:
            if loop is current:
                await self._close(client)
            elif loop.is_running():
                closing = self._close(client)
                try:
                    asyncio.run_coroutine_threadsafe(closing, loop)
                except RuntimeError:  # the loop closed meanwhile: nothing can close it
                    closing.close()  # a coroutine never to run, not one "never awaited"


async def _let_go(close: Callable[[C], Coroutine[Any, Any, None]], clients: list[C]) -> None:
    """Close clients whose loop has closed, as far as they can be.

    Their connections belong to a loop that will never run again, so closing them fails
    (``Event loop is closed``, or the socket's own error): that is let go, and the sockets
    are freed with the objects. Closing marks the client closed all the same, so the SDK's
    finalizer does not try again on whichever loop runs then and log the same failure as a
    task nobody awaited.
    """
    for client in clients:
        with contextlib.suppress(RuntimeError, OSError):
            await close(client)


_background: set[asyncio.Task[None]] = set()
"""Tasks started here and not yet done (the loop keeps only weak references to tasks)."""


def _in_background(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, None]) -> None:
    task = loop.create_task(work)
    _background.add(task)
    task.add_done_callback(_background.discard)


_OTHER_LOOP = ("is bound to a different event loop", "attached to a different loop")
"""What asyncio says when an object of one loop is used on another (``Event loop is
closed`` when the other loop has ended)."""


@contextmanager
def foreign_loop_errors(model: str, given: bool) -> Iterator[None]:
    """A request through a client passed in (``given``) that fails because the client
    belongs to another event loop: a ModelError that says so and what to do.

    Other failures pass unchanged (the SDK may have wrapped asyncio's error in its own, so
    the chain of causes is read).
    """
    try:
        yield
    except Exception as error:
        said = _other_loop(error) if given else ""
        if said:
            raise ModelError(
                f"{model}: the client passed in (client=) holds connections of another event "
                f"loop, so this loop cannot use it ({said}; the request may have reached the "
                "provider, its answer is lost): a model shared by threads (run_sync) or "
                "asyncio.run calls needs a client for every loop. Pass no client (tooldeck "
                "makes one per loop), or build the model in each thread"
            ) from error
        raise


def _other_loop(error: BaseException | None) -> str:
    """asyncio's complaint in the error or its causes, else ``""``."""
    for _ in range(4):
        if error is None:
            return ""
        text = str(error)
        if isinstance(error, RuntimeError) and (
            text == "Event loop is closed" or any(words in text for words in _OTHER_LOOP)
        ):
            return f"{type(error).__name__}: {text}"
        error = error.__cause__ or error.__context__
    return ""
