"""``tooldeck mcp serve`` over stdio: the SDK's server, on a transport that answers every
request (each line is screened by ``_screen`` before the server sees it).

As the SDK's own stdio transport does, the wire is moved to private copies of file
descriptors 0 and 1 while serving: the process's stdin then reads nothing and its stdout
writes to stderr, so a tool that reads input or prints cannot break a message.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from tooldeck.serve._screen import screen

Wire = tuple[io.TextIOWrapper, io.TextIOWrapper]
"""The client's lines in, the server's lines out."""


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until the client closes stdin."""
    with _claimed_stdio() as (wire_in, wire_out):
        incoming, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, to_write = anyio.create_memory_object_stream[SessionMessage](0)
        # The SDK offers no public way to run an MCPServer on streams of one's own.
        lowlevel = server._lowlevel_server
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_read, wire_in, incoming, outgoing.clone())
            tasks.start_soon(_write, wire_out, to_write)
            async with outgoing:
                await lowlevel.run(received, outgoing, lowlevel.create_initialization_options())


async def _read(
    wire: io.TextIOWrapper,
    incoming: ObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Pass on each message that is sound; answer each request that is not, at once."""
    lines = anyio.wrap_file(wire)
    async with incoming, answers:
        async for line in lines:
            screened = screen(line)
            if screened.message is not None:
                await incoming.send(SessionMessage(screened.message))
            elif screened.answer is not None:
                await answers.send(SessionMessage(screened.answer))


async def _write(wire: io.TextIOWrapper, to_write: Any) -> None:
    out = anyio.wrap_file(wire)
    async with to_write:
        async for sent in to_write:
            text = sent.message.model_dump_json(by_alias=True, exclude_unset=True)
            await out.write(text + "\n")
            await out.flush()


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
    reader = io.TextIOWrapper(
        os.fdopen(wire_in, "rb", closefd=False), encoding="utf-8", errors="replace"
    )
    writer = io.TextIOWrapper(os.fdopen(wire_out, "wb", closefd=False), encoding="utf-8")
    try:
        yield reader, writer
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)
