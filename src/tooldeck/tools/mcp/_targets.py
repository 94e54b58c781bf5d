"""Where an MCP server is (a command or a URL), how to open the SDK client for it, and the
errors MCP tools raise. Nothing here imports the SDK until a connection is opened.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tooldeck.errors import ToolDeckError

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import MessageHandlerFnT


class MCPConnectionError(ToolDeckError, ConnectionError):
    """An MCP server could not be started or reached; the message names the command or URL."""

    docs = "mcp.md"


class MCPCallFailed(ToolDeckError):
    """A call to an MCP tool ended without a result; the message is what the model reads."""


class SessionLost(MCPCallFailed):
    """The session ended during a call: the server exited or the connection was closed."""


class Target(Protocol):
    """Where an MCP server is and how to open a client session with it."""

    def describe(self) -> str:
        """The command line or URL, for messages."""
        ...

    async def enter(self, stack: AsyncExitStack, on_message: MessageHandlerFnT) -> Client:
        """Open the SDK client on ``stack`` (in the session's own task)."""
        ...


@dataclass(frozen=True, slots=True)
class StdioTarget:
    """A server started as a subprocess, spoken to over its stdin and stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None

    def describe(self) -> str:
        return shlex.join((self.command, *self.args))

    async def enter(self, stack: AsyncExitStack, on_message: MessageHandlerFnT) -> Client:
        from mcp import Client, StdioServerParameters

        env = dict(self.env) if self.env is not None else None
        server = StdioServerParameters(
            command=self.command, args=[*self.args], env=env, cwd=self.cwd
        )
        return await stack.enter_async_context(
            Client(server, message_handler=on_message, cache=None)
        )


@dataclass(frozen=True, slots=True)
class HttpTarget:
    """A server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return self.url

    async def enter(self, stack: AsyncExitStack, on_message: MessageHandlerFnT) -> Client:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        # The SDK's recommended timeouts: a response stream may stay open for minutes.
        timeout = httpx2.Timeout(30.0, read=300.0)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(self.headers), timeout=timeout)
        )
        transport = streamable_http_client(self.url, http_client=http)
        return await stack.enter_async_context(
            Client(transport, message_handler=on_message, cache=None)
        )


def start_error(target: Target, error: BaseException) -> MCPConnectionError:
    """The clear exception for a server that could not be started or reached."""
    cause = _innermost(error)
    where = target.describe()
    if isinstance(target, StdioTarget) and isinstance(cause, OSError):
        reason = cause.strerror or str(cause)
        text = f"cannot start the MCP server {where!r}: {reason} (command {target.command!r})"
    elif isinstance(target, StdioTarget):
        text = (
            f"the MCP server {where!r} stopped before it was ready ({describe_error(cause)}); "
            "its error output above may say why"
        )
    else:
        text = f"cannot connect to the MCP server at {where!r}: {describe_error(cause)}"
    failure = MCPConnectionError(text)
    failure.__cause__ = error
    return failure


def _innermost(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def describe_error(error: BaseException) -> str:
    from mcp import MCPError

    if isinstance(error, MCPError):
        return f"{error.message} (MCP error {error.code})"
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def lost_text(reason: BaseException | None) -> str:
    why = f" ({describe_error(reason)})" if reason is not None else ""
    return (
        f"the MCP server's connection closed{why}; the server may have crashed, and the "
        "call may or may not have run"
    )
