"""Messages for a working task that another server process runs, carried by the store.

The process a message arrives at writes it as a row of ``a2a_task_messages`` (the task's id
and the A2A message itself) and waits for its answer. The process running the task reads
the rows of its tasks at each heartbeat, claims each (``taking``), sends it to the run
(``RunHandle.send``) and answers ``joined``, or why it could not (the run ended). A message
no process claims within the runner's lease is taken back, unanswered, so it is never
added after its sender was told it was not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection

from a2a.types import Message
from sqlalchemy import (
    Column,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine

MESSAGES_TABLE = "a2a_task_messages"
JOINED = "joined"
"""The answer of a message that joined the task's run."""
_TAKING = "taking"

_META = MetaData()
_MESSAGES = Table(
    MESSAGES_TABLE,
    _META,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("task_id", String(255), nullable=False, index=True),
    Column("message", LargeBinary, nullable=False),
    Column("answer", Text, nullable=True),
)


class Inbox:
    """The rows of ``a2a_task_messages`` on the task store's engine; a sender looks for
    its answer every ``poll_s`` seconds."""

    def __init__(self, engine: AsyncEngine, poll_s: float) -> None:
        self.engine = engine
        self.poll_s = poll_s
        self._created = False

    async def _ready(self) -> None:
        if not self._created:
            async with self.engine.begin() as connection:
                await connection.run_sync(_META.create_all)
            self._created = True

    async def ask(self, task_id: str, message: Message, wait_s: float) -> str | None:
        """Leave ``message`` for task ``task_id``'s runner; its answer (``JOINED`` or why
        not), or None when no process took it within ``wait_s`` seconds (it is taken back)."""
        await self._ready()
        async with self.engine.begin() as connection:
            added = await connection.execute(
                insert(_MESSAGES).values(task_id=task_id, message=message.SerializeToString())
            )
            key = added.inserted_primary_key
            assert key is not None  # an autoincrement key, just given
            row_id = int(key[0])
        deadline = time.monotonic() + wait_s
        while True:
            await asyncio.sleep(self.poll_s)
            answer = await self._answer(row_id)
            if answer not in (None, _TAKING):
                return answer
            if time.monotonic() > deadline and answer is None and await self._take_back(row_id):
                return None
            if time.monotonic() > deadline + wait_s:  # taken, never answered: it died
                return None

    async def _answer(self, row_id: int) -> str | None:
        async with self.engine.begin() as connection:
            answer = (
                await connection.execute(select(_MESSAGES.c.answer).where(_MESSAGES.c.id == row_id))
            ).scalar_one_or_none()
            if answer not in (None, _TAKING):
                await connection.execute(delete(_MESSAGES).where(_MESSAGES.c.id == row_id))
        return answer

    async def _take_back(self, row_id: int) -> bool:
        async with self.engine.begin() as connection:
            gone = await connection.execute(
                delete(_MESSAGES).where(_MESSAGES.c.id == row_id, _MESSAGES.c.answer.is_(None))
            )
        return bool(gone.rowcount)

    async def waiting(self, task_ids: Collection[str]) -> list[tuple[int, str, Message]]:
        """The messages left for these tasks, claimed for this process: (row, task,
        message) each, oldest first."""
        await self._ready()
        query = select(_MESSAGES.c.id, _MESSAGES.c.task_id, _MESSAGES.c.message).where(
            _MESSAGES.c.task_id.in_(list(task_ids)), _MESSAGES.c.answer.is_(None)
        )
        claimed = []
        async with self.engine.begin() as connection:
            for row in (await connection.execute(query.order_by(_MESSAGES.c.id))).all():
                took = await connection.execute(
                    update(_MESSAGES)
                    .where(_MESSAGES.c.id == row.id, _MESSAGES.c.answer.is_(None))
                    .values(answer=_TAKING)
                )
                if took.rowcount:
                    message = Message()
                    message.ParseFromString(row.message)
                    claimed.append((row.id, row.task_id, message))
        return claimed

    async def answer(self, row_id: int, answer: str) -> None:
        """Tell the sender of message ``row_id`` what became of it."""
        async with self.engine.begin() as connection:
            await connection.execute(
                update(_MESSAGES).where(_MESSAGES.c.id == row_id).values(answer=answer)
            )
