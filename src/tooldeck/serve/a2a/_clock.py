"""One clock for every server process on a store, for what they judge by time.

A lease's end is written by the server holding it and read by another, which compares it
with the time now; a finished task's events are kept for a while from when a server first
saw it finished. Both need the time of one clock. On PostgreSQL, which servers on many
machines share, that is the database's (``clock_timestamp()``): a server whose own clock is
off still writes and judges leases as the others do. On SQLite the servers share a file,
so they run on one machine, whose clock is the one clock (``time.time``, given as ``clock``:
the seam through which tests skew it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Float, literal, literal_column
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

_DATABASE_NOW = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"
"""PostgreSQL's time now, in seconds since the epoch (the time of the statement's
evaluation, not of its transaction's start)."""


class StoreClock:
    """The time on the store's one clock: the database's on PostgreSQL, else ``clock()``'s."""

    def __init__(self, engine: AsyncEngine, clock: Callable[[], float] = time.time) -> None:
        self.on_database = engine.dialect.name == "postgresql"
        """Whether the database tells the time (PostgreSQL)."""
        self.clock = clock
        """This machine's clock (seconds since the epoch), used on SQLite."""

    def now(self) -> ColumnElement[Any]:
        """The time now, in seconds since the epoch, as SQL to write or compare."""
        if self.on_database:
            return literal_column(_DATABASE_NOW, Float)
        return literal(self.clock(), Float)
