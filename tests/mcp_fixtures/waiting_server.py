"""An MCP server on the official SDK whose ``wait`` tool waits until it is cancelled, for the
test that a cancelled run cancels its MCP call at the server (``notifications/cancelled``).

Each call appends to the file named by ``WAITING_LOG``: ``started <seconds>`` as it starts,
then ``cancelled`` when the client's cancellation interrupts the handler, or ``waited``.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("waiting")
LOG = Path(os.environ["WAITING_LOG"])


def _note(text: str) -> None:
    with LOG.open("a", encoding="utf-8") as log:
        log.write(text + "\n")


@server.tool()
async def wait(seconds: float) -> str:
    """Wait ``seconds``."""
    _note(f"started {seconds:g}")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _note("cancelled")
        raise
    _note("waited")
    return "waited"


if __name__ == "__main__":
    server.run()
