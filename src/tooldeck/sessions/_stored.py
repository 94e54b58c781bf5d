"""What ``SQLiteSession`` and ``PostgresSession`` share besides their SQL (``_log``,
``_journal``): the session id, the process's decoded stored runs of the
conversation (``stored_run_cache``), and reading a loaded history from the rows a store fetched."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Any, Self

from tooldeck.run.session import History, StoredRun
from tooldeck.sessions import _journal, _log, _states
from tooldeck.sessions._cache import stored_run_cache
from tooldeck.sessions._rows import STORED_RUN, Place, Row


def check_session_id(session_id: str) -> None:
    """Refuse a session id that is not a non-empty string."""
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")


class StoredSession(ABC):
    """A conversation kept in a database, its decoded stored runs shared in the process."""

    def __init__(self, session_id: str, where: str, cache_key: Hashable) -> None:
        """``session_id`` as ``check_session_id`` accepted it (before the store's own checks)."""
        self._session_id = session_id
        self._where = where
        """The database, as an error names it."""
        self._place = f"session {session_id!r} in {where}"
        self._cache_key = cache_key
        self._stored = stored_run_cache.get(cache_key)

    @property
    def session_id(self) -> str:
        return self._session_id

    async def load(self) -> History:
        """The committed messages, the head, and a paused run's checkpoint if any."""
        try:
            return await self._load()
        except _log.StaleCache:
            return await self._load()

    @abstractmethod
    async def aclose(self) -> None:
        """Let go of the database connections the session holds."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def open_run(
        self, run_id: str, opening: str, *, closing: StoredRun | None = None, after: int = 0
    ) -> None:
        """Keep run ``run_id``'s opening, first closing an unfinished run (see ``RunJournal``)."""
        opened = _journal.write_parameters(self._session_id, run_id, 0, opening)
        if closing is None:
            await self._keep_step(opened)
        else:
            await self._close_then_open(closing, after, opened)

    async def write_step(self, run_id: str, step: int, body: str) -> None:
        """Keep step ``step`` of run ``run_id`` (see ``RunJournal``)."""
        await self._keep_step(_journal.write_parameters(self._session_id, run_id, step, body))

    @abstractmethod
    async def _keep_step(self, parameters: tuple[Any, ...]) -> None:
        """Write one step of a run's journal (``_journal.WRITE``'s parameters)."""

    @abstractmethod
    async def _close_then_open(
        self, closing: StoredRun, after: int, opened: tuple[Any, ...]
    ) -> None:
        """Append ``closing`` as entry ``after + 1`` and write the next run's opening, in
        one transaction; SessionConflict if ``after`` is not the head."""

    @abstractmethod
    async def _load(self) -> History:
        """LOAD, the summary and the latest journal, read in one go (``_history``)."""

    def _history(
        self,
        rows: Sequence[Row],
        summary: _log.SummaryRow | None,
        journal: Sequence[_journal.Row],
        states: _states.Row | None = None,
    ) -> History:
        """The history the rows of LOAD, READ_SUMMARY, the journal's LATEST and the
        states' READ make up."""
        try:
            history = _log.read_history(
                rows, self._where, self._stored, summary, session_id=self._session_id
            )
        finally:
            stored_run_cache.used(self._cache_key, self._stored)
        if states is not None:
            last_run = max((row[0] for row in rows if row[2] == STORED_RUN), default=0)
            place = Place(self._where, self._session_id)
            kept = _states.read_states(states, last_run, place)
            history = replace(history, capability_states=kept)
        return _journal.with_unfinished(history, journal, self._place)

    def _wrote(self, entry: int, run: StoredRun | None) -> None:
        """Remember entry ``entry`` just written (a stored run, or None for a claim)."""
        self._stored.wrote(entry, run)
        stored_run_cache.used(self._cache_key, self._stored)

    def _cleared(self) -> None:
        self._stored.forget()
        stored_run_cache.used(self._cache_key, self._stored)
