"""One session with an MCP server, held by a task of its own.

anyio's rule is that a cancel scope (the SDK's task groups, the server process, the HTTP
client) must be left by the task that entered it. A ``Session`` therefore opens, holds and
closes the SDK client in one task it starts itself, and callers only send requests through
it: any task may start it, call through it or close it, and a caller cancelled mid-call
leaves the session usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tooldeck.errors import ToolDeckError

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import IncomingMessage, MessageHandlerFnT
    from mcp_types import CallToolResult, Tool

_MAX_PAGES = 100
"""tools/list pages read at most (a server whose cursor never ends cannot hang a listing)."""


class MCPConnectionError(ToolDeckError, ConnectionError):
    """An MCP server could not be started or reached; the message names the command or URL."""


class MCPCallFailed(ToolDeckError):
    """A call to an MCP tool ended without a result; the message is what the model reads."""


class SessionLost(MCPCallFailed):
    """The session ended during a call: the server exited or the connection was closed."""


T = TypeVar("T")


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


class Session:
    """A client session with one server, opened, held and closed by its own task."""

    def __init__(self, target: Target, on_tools_changed: Callable[[], None]) -> None:
        self.target = target
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.ended: BaseException | None = None
        """Why the session ended before it was closed, if it did."""

    @property
    def usable(self) -> bool:
        return self._client is not None and not self._stop.is_set()

    async def start(self, timeout: float) -> None:
        """Connect; raise MCPConnectionError, naming the server, if that cannot be done."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._holder = loop.create_task(self._hold(ready), name=f"MCP {self.target.describe()}")
        try:
            done, _ = await asyncio.wait({ready}, timeout=timeout)
        except BaseException:  # the caller was cancelled: take the half-open session down
            await self._abandon(ready)
            raise
        if not done:
            await self._abandon(ready)
            raise MCPConnectionError(
                f"the MCP server {self.target.describe()!r} did not finish connecting within "
                f"{timeout:g} s; check that it speaks MCP (connect_timeout= sets the limit)"
            )
        ready.result()

    async def close(self) -> None:
        """End the session and wait until its task has closed the client (any task may ask)."""
        self._stop.set()
        holder = self._holder
        if holder is not None and holder is not asyncio.current_task():
            await asyncio.shield(holder)

    async def list_tools(self) -> list[Tool]:
        """Every tool the server lists, across pages."""
        client = self._require()
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await self._send(client.list_tools(cursor=cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Send tools/call; SessionLost if the session ends first."""
        client = self._require()
        return await self._send(client.call_tool(name, arguments))

    def _require(self) -> Client:
        client = self._client
        if client is None or self._stop.is_set():
            raise SessionLost(_lost_text(self.ended))
        return client

    async def _send(self, request: Awaitable[T]) -> T:
        from anyio import BrokenResourceError, ClosedResourceError
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            return await request
        except MCPError as error:
            if error.code != CONNECTION_CLOSED:
                raise
            lost: Exception = error
        except (BrokenResourceError, ClosedResourceError) as error:
            lost = error
        self.ended = self.ended or lost
        self._stop.set()  # the holder task reaps the dead session
        raise SessionLost(_lost_text(self.ended)) from lost

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await self.target.enter(stack, self._on_message)
                await _follow_tool_changes(stack, client)
                self._client = client
                ready.set_result(None)
                await self._stop.wait()
        except Exception as error:
            if ready.done():
                self.ended = self.ended or error
            else:
                ready.set_exception(start_error(self.target, error))
        finally:
            self._client = None
            self._stop.set()

    async def _abandon(self, ready: asyncio.Future[None]) -> None:
        holder = self._holder
        if holder is not None:
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(holder)
        if ready.done() and not ready.cancelled():
            ready.exception()  # retrieved: no "exception was never retrieved" at shutdown

    async def _on_message(self, message: IncomingMessage) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._on_tools_changed()


async def _follow_tool_changes(stack: AsyncExitStack, client: Client) -> None:
    """Ask a 2026-07-28 server for tools/list_changed (older servers send it unasked).

    The notifications reach the message handler; the subscription itself is never read
    (it keeps at most one pending event of each kind).
    """
    from mcp import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    tools = client.server_capabilities.tools
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (
        tools and tools.list_changed
    ):
        return
    with contextlib.suppress(MCPError, RuntimeError, TimeoutError):
        await stack.enter_async_context(client.listen(tools_list_changed=True))


def start_error(target: Target, error: BaseException) -> MCPConnectionError:
    """The clear exception for a server that could not be started or reached."""
    cause = _innermost(error)
    where = target.describe()
    if isinstance(target, StdioTarget) and isinstance(cause, OSError):
        reason = cause.strerror or str(cause)
        text = f"cannot start the MCP server {where!r}: {reason} (command {target.command!r})"
    elif isinstance(target, StdioTarget):
        text = (
            f"the MCP server {where!r} stopped before it was ready ({_describe(cause)}); "
            "its error output above may say why"
        )
    else:
        text = f"cannot connect to the MCP server at {where!r}: {_describe(cause)}"
    failure = MCPConnectionError(text)
    failure.__cause__ = error
    return failure


def _innermost(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _describe(error: BaseException) -> str:
    from mcp import MCPError

    if isinstance(error, MCPError):
        return f"{error.message} (MCP error {error.code})"
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _lost_text(reason: BaseException | None) -> str:
    why = f" ({_describe(reason)})" if reason is not None else ""
    return (
        f"the MCP server's connection closed{why}; the server may have crashed, and the "
        "call may or may not have run"
    )
