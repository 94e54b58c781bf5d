"""A durable run's pauses: published as DBOS events, answered with a DBOS message.

At its n-th pause the workflow sets the event ``tooldeck.pause.<n>`` to the paused
RunResult (JSON, with its checkpoint) and ``tooldeck.waiting`` to ``n``, then waits in
``DBOS.recv`` — a wait that survives its process: a recovered run waits again at the same
place. Decisions arrive as a ``Decisions`` message naming the pause they answer; they are
checked against the stored checkpoint (its digests, its signature with a
``checkpoint_key``) by the sender before sending and by the run before using them, so a
decision applies to the call stored in the run, never to one the application sends back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dbos import DBOS, WorkflowHandleAsync

from tooldeck.errors import CheckpointError
from tooldeck.results import Checkpoint, Decision, RecordedError, RunResult
from tooldeck.run._engine.checkpoint import check_decisions, verify

DECISIONS_TOPIC = "tooldeck.decisions"
WAITING_EVENT = "tooldeck.waiting"
_FOREVER_S = 10.0 * 365 * 24 * 3600
"""How long a paused run waits for its decisions in one ``recv`` (then it waits again)."""
_WATCH_S = 60.0
_PUBLISH_S = 10.0
"""How long ``current_pause`` waits for a pause the run said it waits at to be published."""

logger = logging.getLogger("tooldeck.durable")


def pause_event(pause: int) -> str:
    return f"tooldeck.pause.{pause}"


@dataclass(frozen=True, slots=True)
class Decisions:
    """The message that answers a durable run's pause."""

    pause: int
    """Which pause of the run it answers (1 for the first)."""
    decisions: dict[str, Decision]


@dataclass(frozen=True, slots=True)
class Cancel:
    """The message that cancels a durable run waiting at a pause (``cancel_paused``)."""

    pause: int
    """Which pause of the run it answers."""
    reason: str


def portable(result: RunResult[Any]) -> RunResult[Any]:
    """The result as every process reads it: the trace's exceptions as RecordedError (their
    type's name and message), so the run's own process and any other see the same thing."""
    traces = result.tool_trace
    if all(t.error is None or isinstance(t.error, RecordedError) for t in traces):
        return result
    kept = tuple(
        t
        if t.error is None or isinstance(t.error, RecordedError)
        else t.model_copy(update={"error": RecordedError(type(t.error).__name__, str(t.error))})
        for t in traces
    )
    return result.model_copy(update={"tool_trace": kept})


async def publish(pause: int, paused: RunResult[Any]) -> None:
    """Make the pause visible to every process (inside the workflow). The run says it waits
    first: whoever sees the pause itself (``watch``) then finds it waiting (``send``)."""
    await DBOS.set_event_async(WAITING_EVENT, pause)
    await DBOS.set_event_async(pause_event(pause), paused.model_dump_json())


async def receive(pause: int, checkpoint: Checkpoint) -> dict[str, Decision] | Cancel:
    """Wait, durably, for decisions that fit this pause, or its cancel (inside the
    workflow); other messages are logged and dropped."""
    while True:
        message = await DBOS.recv_async(DECISIONS_TOPIC, timeout_seconds=_FOREVER_S)
        if isinstance(message, Cancel) and message.pause == pause:
            await DBOS.set_event_async(WAITING_EVENT, 0)
            return message
        decisions = _fitting(message, pause, checkpoint)
        if decisions is not None:
            await DBOS.set_event_async(WAITING_EVENT, 0)
            return decisions


def _fitting(message: object, pause: int, checkpoint: Checkpoint) -> dict[str, Decision] | None:
    if message is None:  # the wait timed out: wait again
        return None
    if not isinstance(message, Decisions):
        logger.warning("run %s: ignored a message: %r", checkpoint.run_id, message)
        return None
    if message.pause != pause:
        logger.warning(
            "run %s: ignored decisions for pause %d (the run waits at pause %d)",
            checkpoint.run_id,
            message.pause,
            pause,
        )
        return None
    try:
        check_decisions(checkpoint, message.decisions)
    except CheckpointError as error:
        logger.warning("run %s: ignored decisions that do not fit: %s", checkpoint.run_id, error)
        return None
    return dict(message.decisions)


def stored_pause(run_id: str, pause: int, text: object) -> RunResult[Any]:
    """The paused result a run published (``pause_event``), read back from the database: a
    CheckpointError naming the run and the pause when it is not one."""
    where = f"pause {pause} of durable run {run_id!r} (stored in the DBOS system database)"
    try:
        data = json.loads(text)  # type: ignore[arg-type]  # anything stored; checked here
    except (TypeError, ValueError, RecursionError) as error:
        raise CheckpointError(f"{where} is not JSON text: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("checkpoint"), dict):
        raise CheckpointError(f"{where} is broken: it holds no checkpoint")
    try:
        checkpoint = Checkpoint.from_json(json.dumps(data["checkpoint"]))
        result = RunResult[Any].model_validate({**data, "checkpoint": checkpoint})
        result.model_dump_json()  # what is read must be writable again (sent, stored)
    except CheckpointError as error:
        raise CheckpointError(f"{where}: {error}") from None
    except (ValueError, RecursionError) as error:  # ValidationError, serialization errors
        raise CheckpointError(f"{where} is broken: {error}") from None
    return result


async def current_pause(run_id: str) -> tuple[int, RunResult[Any]] | None:
    """The pause the run waits at now (its number and paused result), or None."""
    pause = await DBOS.get_event_async(run_id, WAITING_EVENT, timeout_seconds=0)
    if not pause:
        return None
    # Set right after the run said it waits: a moment's wait covers the step between.
    text = await DBOS.get_event_async(run_id, pause_event(pause), timeout_seconds=_PUBLISH_S)
    if text is None:
        return None
    return pause, stored_pause(run_id, pause, text)


async def send(run_id: str, decisions: Mapping[str, Decision], checkpoint_key: bytes | None) -> int:
    """Check the decisions against the run's stored pause and send them; the pause number."""
    found = await current_pause(run_id)
    if found is None:
        raise CheckpointError(
            f"run {run_id!r} is not waiting for decisions: it has not paused, was already "
            "resumed, has finished, or does not exist"
        )
    pause, paused = found
    checkpoint = paused.checkpoint
    assert checkpoint is not None  # a published pause always carries its checkpoint
    verify(checkpoint, checkpoint_key)
    check_decisions(checkpoint, decisions)
    await DBOS.send_async(run_id, Decisions(pause, dict(decisions)), DECISIONS_TOPIC)
    return pause


async def send_cancel(run_id: str, reason: str) -> bool:
    """Cancel the pause the run waits at, if it waits; whether it did."""
    found = await current_pause(run_id)
    if found is None:
        return False
    await DBOS.send_async(run_id, Cancel(found[0], reason), DECISIONS_TOPIC)
    return True


class LocalPauses:
    """Pauses of runs executing in this process, told to the callers waiting here at once
    (without reading the database); ``watch`` covers runs executing elsewhere.

    Each caller waits on a future of its own: two callers of one run (the same run id
    started from two threads at once) must not share one, or the first to stop waiting
    would cancel it under the other."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], list[concurrent.futures.Future[RunResult[Any]]]] = {}
        self._lock = threading.Lock()

    def expect(self, run_id: str, pause: int) -> concurrent.futures.Future[RunResult[Any]]:
        told: concurrent.futures.Future[RunResult[Any]] = concurrent.futures.Future()
        with self._lock:
            self._waiting.setdefault((run_id, pause), []).append(told)
        return told

    def paused(self, run_id: str, pause: int, result: RunResult[Any]) -> None:
        with self._lock:
            waiting = self._waiting.pop((run_id, pause), [])
        for told in waiting:
            if not told.done():
                told.set_result(result)

    def forget(
        self, run_id: str, pause: int, told: concurrent.futures.Future[RunResult[Any]]
    ) -> None:
        with self._lock:
            waiting = self._waiting.get((run_id, pause), [])
            if told in waiting:
                waiting.remove(told)
            if not waiting:
                self._waiting.pop((run_id, pause), None)


async def watch(run_id: str, pause: int) -> RunResult[Any]:
    """The run's ``pause``-th pause once it is published (by any process)."""
    while True:
        text = await DBOS.get_event_async(run_id, pause_event(pause), timeout_seconds=_WATCH_S)
        if text is not None:
            return stored_pause(run_id, pause, text)


_POLL_S = 0.25
"""How often a caller reads the database for the end of a run executing in another process."""


async def next_stop(
    handle: WorkflowHandleAsync[RunResult[Any]],
    told: concurrent.futures.Future[RunResult[Any]],
    run_id: str,
    pause: int,
    watch_after_s: float,
) -> RunResult[Any]:
    """The run's end (its result, or its error raised) or its ``pause``-th pause: told at
    once by a run executing in this process, else read from the database (after
    ``watch_after_s``: a run started here almost always executes here)."""
    finished = asyncio.ensure_future(handle.get_result(polling_interval_sec=_POLL_S))
    local = asyncio.wrap_future(told)
    waits: set[asyncio.Future[Any]] = {finished, local}
    done: set[asyncio.Future[Any]] = set()
    try:
        if watch_after_s:
            done, _ = await asyncio.wait(
                waits, timeout=watch_after_s, return_when=asyncio.FIRST_COMPLETED
            )
        if not done:
            waits.add(asyncio.ensure_future(watch(run_id, pause)))
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    if finished in done:
        return finished.result()
    paused: RunResult[Any] = next(iter(done)).result()
    return paused
