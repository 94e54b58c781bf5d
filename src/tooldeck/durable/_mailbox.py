"""Messages sent to a durable run while it works (``DurableAgent.send``).

The sender checks that the run exists, is this agent's and has not ended, then sends the
user message with DBOS's own messaging: ``DBOS.send`` to the workflow, on the topic
``tooldeck.messages``, as portable JSON. The run takes what waits before each model request
and as it would end with its answer (``SentMessages``, a capability the run is given): in
one transaction it marks the waiting messages consumed, with the step id its next step will
have as the mark, and they join the conversation.

That mark is what a replay reads, so a message joins once and in the same place, whatever
process runs the run and however often it is recovered:

- at a join point whose next step is already recorded, the run joins exactly the messages
  marked with it, in the order they were sent, and takes no other (one sent later waits for
  the first join point the replay has not passed);
- at one whose next step is not recorded (the run was killed after the take and before the
  step), it joins the messages marked with it and takes what waits besides.

A run sent nothing records nothing new: its steps and their outputs are what they were
before this module existed. Each join point costs it one read of the system database.

DBOS has no public call that looks at a workflow's messages without receiving one (``recv``
is a step of its own, two step ids, at every call, and cannot look ahead): this module reads
and marks DBOS's ``notifications`` rows, reads ``operation_outputs``, and reads the
workflow's step counter, as DBOS 3 lays them out (pyproject pins ``dbos>=3.4,<4``; the
tests of ``tests/test_durable_send.py`` fail if that changes). It is the one place tooldeck
reads DBOS's internals.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence

import sqlalchemy as sa
from dbos import DBOS, WorkflowSerializationFormat
from dbos._context import get_local_dbos_context
from dbos._dbos import _get_dbos_instance
from dbos._schemas.system_database import SystemSchema

from tooldeck.errors import RunEnded
from tooldeck.messages import Message
from tooldeck.run.capabilities import Capability, RunView

MESSAGES_TOPIC = "tooldeck.messages"
_PORTABLE = "portable_json"
"""How DBOS names portable JSON in a row's ``serialization``."""
_ENDED = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
"""The statuses of a workflow that will run no more."""

logger = logging.getLogger("tooldeck.durable")


async def deliver(run_id: str, message: Message, workflow: str) -> None:
    """Send ``message`` to the durable run ``run_id`` (whose workflow is named ``workflow``).

    Raises:
        LookupError: no workflow has that id.
        ValueError: the workflow is not a run of this agent.
        RunEnded: the run has ended (its status says how); nothing was sent.
    """
    status = await DBOS.get_workflow_status_async(run_id)
    where = f"cannot send a message to durable run {run_id!r}"
    if status is None:
        raise LookupError(f"{where}: no run has that id (in this DBOS system database)")
    if status.name != workflow:
        raise ValueError(
            f"{where}: it is not a run of this agent (its workflow is {status.name!r}, this "
            f"agent's is {workflow!r}); send it with the DurableAgent that runs it"
        )
    if status.status in _ENDED:
        raise RunEnded(f"{where}: it has ended (status {status.status}); it was not added")
    data = message.model_dump(mode="json")
    portable = WorkflowSerializationFormat.PORTABLE
    await DBOS.send_async(run_id, data, MESSAGES_TOPIC, serialization_type=portable)


class SentMessages(Capability):
    """The messages sent to one durable run join it before its model requests (and, sent
    as it answers, make it ask again): given to each execution of the run, for the whole of
    it (after handoffs); an agent tool's inner run, whose id differs, takes none."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._joined: set[str] = set()
        """The ids of the messages joined in this execution (a join point may be met twice
        at one mark: as the run answers, then before the request it asks again)."""

    async def join_messages(self, ctx: RunView) -> Sequence[Message]:
        """What was sent and waits, marked as joined at this point of the workflow."""
        if ctx.run_id != self.run_id:
            return ()
        context = get_local_dbos_context()
        if context is None or not context.is_workflow():
            raise RuntimeError(
                f"durable run {self.run_id!r} takes its messages only inside its workflow"
            )
        mark = context.function_id + 1  # the id of the step that follows this point
        taken = await asyncio.to_thread(_take, self.run_id, mark)
        joined = []
        for message_id, text, serialization in taken:
            if message_id in self._joined:
                continue
            self._joined.add(message_id)
            message = _read(self.run_id, message_id, text, serialization)
            if message is not None:
                joined.append(message)
        return joined


def _take(run_id: str, mark: int) -> list[tuple[str, str, str | None]]:
    """The messages to join at ``mark``, oldest first: those marked with it, and, unless the
    step at ``mark`` is recorded, those waiting, now marked with it (id, text, serialization)."""
    notes, steps = SystemSchema.notifications, SystemSchema.operation_outputs
    mine = (notes.c.destination_uuid == run_id, notes.c.topic == MESSAGES_TOPIC)
    chosen = sa.or_(notes.c.consumed == sa.false(), notes.c.consumed_by_function_id == mark)
    order = (notes.c.created_at_epoch_ms, notes.c.message_uuid)
    columns = (notes.c.message_uuid, notes.c.message, notes.c.serialization, notes.c.consumed)
    with _get_dbos_instance()._sys_db.engine.begin() as db:
        rows = db.execute(sa.select(*columns).where(*mine, chosen).order_by(*order)).all()
        waiting = [row.message_uuid for row in rows if not row.consumed]
        if not waiting:
            return [(row[0], row[1], row[2]) for row in rows]
        step = sa.select(steps.c.function_id).where(
            steps.c.workflow_uuid == run_id, steps.c.function_id == mark
        )
        taken: set[str] = set()
        if db.execute(step).first() is None:  # the step after this point has not run yet
            claim = (
                sa.update(notes)
                .where(*mine, notes.c.message_uuid.in_(waiting), notes.c.consumed == sa.false())
                .values(consumed=True, consumed_by_function_id=mark)
                .returning(notes.c.message_uuid)
            )
            taken = {row[0] for row in db.execute(claim)}
    return [(row[0], row[1], row[2]) for row in rows if row.consumed or row[0] in taken]


def _read(run_id: str, message_id: str, text: str, serialization: str | None) -> Message | None:
    """A stored message as the user message it was sent as; one that is not (sent on the
    topic by other code) is logged and skipped: it is marked, so it is met only once."""
    try:
        if serialization != _PORTABLE:
            raise ValueError(f"stored as {serialization!r}, not portable JSON")
        message = Message.model_validate(json.loads(text))
        if message.role != "user":
            raise ValueError(f"a {message.role!r} message")
    except (ValueError, RecursionError) as error:  # a ValidationError is a ValueError
        logger.warning(
            "durable run %s: skipped message %s on topic %r, which is not a user message "
            "sent with DurableAgent.send (%s)",
            run_id,
            message_id,
            MESSAGES_TOPIC,
            error,
        )
        return None
    return message
