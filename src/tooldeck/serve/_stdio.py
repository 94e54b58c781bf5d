"""``tooldeck mcp serve`` over stdio: the SDK's server, on a transport that answers every
request (each line is screened by ``_screen`` before the server sees it).

As the SDK's own stdio transport does, the wire is moved to private copies of file
descriptors 0 and 1 while serving: the process's stdin then reads nothing and its stdout
writes to stderr, so a tool that reads input or prints cannot break a message.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from tooldeck.serve._screen import screen


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until the client closes stdin."""
    with _claimed_stdio() as wire:
        incoming, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, to_write = anyio.create_memory_object_stream[SessionMessage](0)
        lines_in, lines = anyio.create_memory_object_stream[str](0)
        token = anyio.lowlevel.current_token()
        wire.pump = threading.Thread(target=_pump, args=(wire.reader, lines_in, token), daemon=True)
        wire.pump.start()
        # The SDK offers no public way to run an MCPServer on streams of one's own.
        lowlevel = server._lowlevel_server
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_read, lines, incoming, outgoing.clone())
            tasks.start_soon(_write, wire.writer, to_write)
            async with outgoing:
                await lowlevel.run(received, outgoing, lowlevel.create_initialization_options())


async def _read(
    lines: MemoryObjectReceiveStream[str],
    incoming: ObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Pass on each message that is sound; answer each request that is not, at once."""
    async with incoming, answers, lines:
        async for line in lines:
            screened = screen(line)
            if screened.message is not None:
                await incoming.send(SessionMessage(screened.message))
            elif screened.answer is not None:
                await answers.send(SessionMessage(screened.answer))


def _pump(
    wire: io.TextIOWrapper, lines: MemoryObjectSendStream[str], token: anyio.lowlevel.EventLoopToken
) -> None:
    """Read the client's lines in a daemon thread: stopped (Ctrl-C) while the client keeps
    stdin open, the server exits instead of waiting for a line that never comes."""
    with contextlib.suppress(RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        try:
            for line in iter(wire.readline, ""):
                anyio.from_thread.run(lines.send, line, token=token)
        finally:  # the end of stdin ends the server
            anyio.from_thread.run_sync(lines.close, token=token)


async def _write(
    wire: io.TextIOWrapper, to_write: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    """Write each message the server sends (and each answer of the screen) as one line."""
    out = anyio.wrap_file(wire)
    async with to_write:
        async for sent in to_write:
            text = sent.message.model_dump_json(by_alias=True, exclude_unset=True)
            await out.write(text + "\n")
            await out.flush()


class Wire:
    """The client's lines in (read by ``pump``, a daemon thread), the server's lines out."""

    def __init__(self, wire_in: int, wire_out: int) -> None:
        binary_in = os.fdopen(wire_in, "rb", closefd=False)
        self.reader = io.TextIOWrapper(binary_in, encoding="utf-8", errors="replace")
        self.writer = io.TextIOWrapper(os.fdopen(wire_out, "wb", closefd=False), encoding="utf-8")
        self.pump: threading.Thread | None = None


@contextmanager
def _claimed_stdio() -> Iterator[Wire]:
    """The wire on private copies of fds 0 and 1; fd 0 reads the null device and fd 1
    writes to stderr meanwhile (restored after)."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    wire = Wire(wire_in, wire_out)
    try:
        yield wire
    finally:
        wire.writer.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_out)
        if wire.pump is None or not wire.pump.is_alive():
            os.close(wire_in)  # else a thread still reads it: a closed number could be reused
