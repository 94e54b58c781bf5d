"""Following one remote task to where it settles, and cancelling it.

``follow`` reads the task's stream; if the stream ends while the task still works (a proxy
cut it, the server answered before the task was done), it subscribes again
(SubscribeToTask) and, if the remote will not, asks for the task (GetTask) with a growing
pause, until the task ends or asks for input. The caller's own ``timeout`` bounds it all.

``cancel_when_told`` cancels the task even when the caller gave up before the remote named
it: the stream is read on in a task of its own, and the CancelTask goes out as soon as the
task's id arrives (within ``CANCEL_WAIT`` seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from tooldeck.errors import ToolDeckError

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types import Message, StreamResponse

    from tooldeck.remote._wire import Progress

CANCEL_WAIT = 10.0
"""Seconds a cancelled caller waits for the remote to name its task, then to cancel it."""
POLL_FIRST = 0.25
POLL_MOST = 5.0
"""The pause between two looks at a task whose stream ended, doubling from the first."""
SETTLED = frozenset(
    {"completed", "failed", "canceled", "rejected", "input_required", "auth_required"}
)
"""The states where a task waits for nobody but its caller."""


async def follow(
    client: Client,
    message: Message,
    progress: Progress,
    on_text: Callable[[str], None] | None,
    remote: str,
) -> None:
    """Send ``message`` and read its task into ``progress`` until the task settles."""
    from tooldeck.remote import _wire

    await _read(_wire.send(client, message), progress, on_text)
    pause = POLL_FIRST
    while progress.state not in SETTLED:
        if not progress.task_id:
            raise ToolDeckError(
                f"the remote agent {remote!r} ended its answer before it named its task "
                f"(state {progress.state!r}), so its task cannot be followed"
            )
        try:
            await _read(_wire.subscribe(client, progress.task_id), progress, on_text)
        except _wire.WIRE_ERRORS:  # it will not stream it again: ask how it stands
            progress.take(await _wire.task_now(client, progress.task_id))
        if progress.state not in SETTLED:
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_MOST)


async def _read(
    events: AsyncIterator[StreamResponse],
    progress: Progress,
    on_text: Callable[[str], None] | None,
) -> None:
    async for response in events:
        added = progress.take(response)
        if added and on_text is not None:
            on_text(added)


async def stop(client: Client, reader: asyncio.Task[None], progress: Progress) -> str:
    """The caller gave up: cancel the remote task (as soon as it is named, within
    ``CANCEL_WAIT`` s), then stop reading. Says what came of it."""
    from tooldeck.remote import _wire

    try:
        cancelling = _cancel_when_told(client, reader, progress)
        return await asyncio.shield(asyncio.wait_for(cancelling, CANCEL_WAIT))
    except TimeoutError:
        return f"it named no task within {CANCEL_WAIT:g} s, so none could be cancelled"
    except _wire.WIRE_ERRORS as error:
        return f"cancelling its task failed: {type(error).__name__}: {error}"
    except asyncio.CancelledError:  # cancelled again: the caller's cancel goes on
        return "cancelling its task was itself cancelled"
    finally:
        reader.cancel()
        with contextlib.suppress(BaseException):
            await reader


async def _cancel_when_told(client: Client, reader: asyncio.Task[None], progress: Progress) -> str:
    from tooldeck.remote import _wire

    if not progress.task_id and not reader.done():
        told = asyncio.ensure_future(progress.told.wait())
        try:
            await asyncio.wait({told, reader}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            told.cancel()
    if not progress.task_id:
        return "it named no task, so none could be cancelled"
    if progress.state in _wire.ENDED:
        return f"its task had ended ({progress.state})"
    await _wire.cancel(client, progress.task_id)
    return "its task was cancelled"
