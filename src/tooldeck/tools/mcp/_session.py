"""One session with an MCP server, held by a task of its own (loaded with the SDK, when a
toolset first connects).

anyio's rule is that a cancel scope (the SDK's task groups, the server process, the HTTP
client) must be left by the task that entered it. A ``Session`` therefore opens, holds and
closes the SDK client in one task it starts itself, and callers only send requests through
it: any task may start it, call through it or close it, and a caller cancelled mid-call
leaves the session usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from anyio import BrokenResourceError, ClosedResourceError
from mcp import Client, MCPError
from mcp.client.session import IncomingMessage
from mcp_types import CONNECTION_CLOSED, CallToolResult, Tool, ToolListChangedNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from tooldeck.messages import ToolSpec
from tooldeck.tools.mcp._content import error_text, result_text, tool_spec
from tooldeck.tools.mcp._targets import (
    MCPCallFailed,
    MCPConnectionError,
    SessionLost,
    Target,
    lost_text,
    start_error,
)

T = TypeVar("T")

_MAX_PAGES = 100
"""tools/list pages read at most (a server whose cursor never ends cannot hang a listing)."""


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

    async def list_tools(self) -> list[ToolSpec]:
        """Every tool the server lists, across pages, as specs with the server's names.

        Raises:
            MCPCallFailed: The listing failed (SessionLost if the session ended).
        """
        client = self._require()
        tools: list[Tool] = []
        cursor: str | None = None
        try:
            for _ in range(_MAX_PAGES):
                page = await self._send(client.list_tools(cursor=cursor))
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except MCPCallFailed:
            raise
        except Exception as error:
            raise MCPCallFailed(call_error_text(error)) from error
        return [tool_spec(tool) for tool in tools]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Send tools/call; the result as the model's text.

        Raises:
            MCPCallFailed: An ``isError`` result (with the server's text), an error answer,
                a reply that is not a result, or the session ended (SessionLost).
        """
        client = self._require()
        try:
            result: CallToolResult = await self._send(client.call_tool(name, arguments))
        except MCPCallFailed:
            raise
        except Exception as error:
            raise MCPCallFailed(call_error_text(error)) from error
        if result.is_error:
            raise MCPCallFailed(error_text(result))
        return result_text(result)

    def _require(self) -> Client:
        client = self._client
        if client is None or self._stop.is_set():
            raise SessionLost(lost_text(self.ended))
        return client

    async def _send(self, request: Awaitable[T]) -> T:
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
        raise SessionLost(lost_text(self.ended)) from lost

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
        if isinstance(message, ToolListChangedNotification):
            self._on_tools_changed()
        elif isinstance(message, ValidationError):
            answered = unreadable_answer(message)
            if answered is not None:  # its request would wait for ever: end the session
                self.ended = self.ended or MCPCallFailed(
                    f"the server answered request {answered!r} with a message that is not valid "
                    f"JSON-RPC ({message.errors()[0]['msg']})"
                )
                self._stop.set()


async def _follow_tool_changes(stack: AsyncExitStack, client: Client) -> None:
    """Ask a 2026-07-28 server for tools/list_changed (older servers send it unasked).

    The notifications reach the message handler; the subscription itself is never read
    (it keeps at most one pending event of each kind).
    """
    tools = client.server_capabilities.tools
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (
        tools and tools.list_changed
    ):
        return
    with contextlib.suppress(MCPError, RuntimeError, TimeoutError):
        await stack.enter_async_context(client.listen(tools_list_changed=True))


def unreadable_answer(error: ValidationError) -> object:
    """The id of the request a message the transport could not read answers, if it is an
    answer (a line of other output, which some servers print, is not)."""
    problem = error.errors()[0]
    value = problem.get("input")
    if isinstance(value, str | bytes) and problem["type"] == "json_invalid":
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    if isinstance(value, dict) and "id" in value and ("result" in value or "error" in value):
        return value["id"]
    return None


def call_error_text(error: Exception) -> str:
    """A request with no result: an MCP error answer, or a reply that is not one."""
    if isinstance(error, MCPError):
        return f"the MCP server refused the call: {error.message} (MCP error {error.code})"
    if isinstance(error, ValidationError):
        return "the MCP server's reply is not a valid MCP result; the call may or may not have run"
    return f"the MCP call failed ({type(error).__name__})"
