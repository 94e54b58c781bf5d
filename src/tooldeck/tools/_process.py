"""Running a sync tool in a worker process that can really be stopped (``isolation="process"``).

A thread cannot be killed: a sync tool past its timeout keeps running, and its side effects
land later. Here each call forks a child process that runs the function and sends its
return value (or exception) back through a pipe; if the call is cancelled (its timeout, the
run's ``max_duration_s``), the child is killed with SIGKILL, so nothing more of it happens.

The child is a copy of this process (``fork``): the function, its arguments and the run's
``deps`` need not be picklable, only the return value and exceptions are sent back. What the
function changes in Python objects stays in the child; files, databases and the network
are what it is for. Forking costs a few milliseconds per call (more for a large process).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import ForkContext
from multiprocessing.process import BaseProcess
from typing import Any

_EXIT_WAIT_S = 1.0
"""How long a child that sent its result may take to exit before it is killed."""


class ToolProcessError(RuntimeError):
    """The tool's worker process ended without a result, or its result could not be sent."""


def fork_context() -> ForkContext | None:
    """The ``fork`` start method, or None where there is none (Windows)."""
    try:
        return multiprocessing.get_context("fork")
    except ValueError:
        return None


async def run_in_process(function: Callable[[], Any]) -> Any:
    """Run ``function`` in a forked child and return its value; kill the child if cancelled."""
    context = fork_context()
    if context is None:
        raise ToolProcessError("isolation='process' needs os.fork, which this platform lacks")
    loop = asyncio.get_running_loop()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(function, sender), daemon=True)
    process.start()
    sender.close()
    readable: asyncio.Future[None] = loop.create_future()
    loop.add_reader(receiver.fileno(), _set_once, readable)
    try:
        await readable
        ok, value = _receive(receiver, process)
    except BaseException:  # cancelled (timeout) or failed: nothing of the call may go on
        process.kill()
        raise
    finally:
        loop.remove_reader(receiver.fileno())
        receiver.close()
        _reap(process)
    if ok:
        return value
    raise value


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _receive(receiver: Connection, process: BaseProcess) -> tuple[bool, Any]:
    try:
        ok, value = receiver.recv()
    except EOFError:
        process.join(_EXIT_WAIT_S)
        raise ToolProcessError(
            f"the tool's process ended without a result (exit code {process.exitcode})"
        ) from None
    return bool(ok), value


def _reap(process: BaseProcess) -> None:
    process.join(_EXIT_WAIT_S)
    if process.is_alive():
        process.kill()
        process.join()
    process.close()


def _child(function: Callable[[], Any], sender: Connection) -> None:
    """In the child: run the function, send (ok, value) back."""
    try:
        outcome: tuple[bool, Any] = (True, function())
    except BaseException as error:  # sent back to the parent, which raises it
        outcome = (False, error)
    try:
        sender.send(outcome)
    except Exception as error:  # the value or the exception does not pickle
        what = "return value" if outcome[0] else f"exception ({outcome[1]!r})"
        sender.send((False, ToolProcessError(f"the tool's {what} cannot be sent back: {error}")))
    finally:
        sender.close()
