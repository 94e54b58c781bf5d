"""Decoded stored runs shared by the session objects of one conversation in a process.

An application often opens a session object per request (``SQLiteSession(path, user)``
in each handler); without this, every request would decode the whole conversation again.
A stored run never changes (see ``StoredRunCache``), so the session objects of one
conversation and one database share one cache of decoded stored runs, and a new object
decodes only what was added since. The process keeps the most recently used conversations'
stored runs, up to
``max_messages`` messages in all; a session object keeps the cache it has even after the
process let it go.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable

from tooldeck.sessions._log import StoredRunCache

DEFAULT_MAX_MESSAGES = 20_000
"""About 12 MB of short messages: twenty conversations of 250 stored runs of four messages."""


class StoredRunCaches:
    """The process's decoded stored runs, per (database, session id), least recently used first."""

    def __init__(self, max_messages: int = DEFAULT_MAX_MESSAGES) -> None:
        self.max_messages = max_messages
        """How many decoded messages the process keeps for later session objects (0: none;
        each session object still keeps its own)."""
        self._caches: OrderedDict[Hashable, StoredRunCache] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> StoredRunCache:
        """The cache of the conversation ``key`` (made if the process has none)."""
        with self._lock:
            cache = self._caches.get(key)
            if cache is None:
                cache = self._caches[key] = StoredRunCache()
                self._sizes[key] = 0
            self._caches.move_to_end(key)
            return cache

    def used(self, key: Hashable, cache: StoredRunCache) -> None:
        """``cache`` was read or written: count its size, and let the least recently used
        conversations go while the process holds more than ``max_messages``."""
        with self._lock:
            if self._caches.get(key) is not cache:
                return  # let go earlier: the session object keeps it to itself
            self._total += cache.size - self._sizes[key]
            self._sizes[key] = cache.size
            self._caches.move_to_end(key)
            while self._caches and self._total > self.max_messages:
                oldest, _ = self._caches.popitem(last=False)
                self._total -= self._sizes.pop(oldest)

    @property
    def messages(self) -> int:
        """How many decoded messages the process keeps now."""
        return self._total

    def clear(self) -> None:
        """Let every conversation's stored runs go (the next load of each decodes them all)."""
        with self._lock:
            self._caches.clear()
            self._sizes.clear()
            self._total = 0


stored_run_cache = StoredRunCaches()
"""The process's shared decoded stored runs (``tooldeck.sessions.stored_run_cache``; its
earlier name, ``turn_cache``, still works)."""


def _after_fork_in_child() -> None:
    # The registry's lock may have been held by a thread that is not in the child.
    stored_run_cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
