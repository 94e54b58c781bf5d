"""MCPToolset: the tools of an MCP server, as tools an agent can call.

``MCPToolset.stdio(command, args)`` starts a server as a subprocess; ``MCPToolset.http(url)``
reaches one over streamable HTTP. The toolset connects on first use (or on ``async with``),
lists the server's tools once and keeps the list until the server says it changed
(``notifications/tools/list_changed``): the agent then reads the new list before its next
model turn. Each call is validated against the tool's ``inputSchema`` before it is sent,
and goes through the same options as a function tool (approval, timeout). Needs the
``mcp`` extra: ``pip install 'tooldeck[mcp]'``.

Part of ``tooldeck.tools``: may import what it may, and the ``mcp`` SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from typing_extensions import Unpack

from tooldeck.errors import ErrorCode, ToolDefinitionError
from tooldeck.messages import ToolResult, ToolSpec
from tooldeck.tools.context import RunContext
from tooldeck.tools.handler import ToolOutcome
from tooldeck.tools.mcp._targets import (
    HttpTarget,
    MCPCallFailed,
    MCPConnectionError,
    StdioTarget,
    Target,
)
from tooldeck.tools.options import RequiresApproval, ToolOptions, Trust, refuse_unknown_options
from tooldeck.tools.registry import ToolEntry, Toolset
from tooldeck.tools.schema._arguments import JsonSchemaArguments

if TYPE_CHECKING:
    from tooldeck.tools.mcp._session import Session

__all__ = ["MCPCallFailed", "MCPConnectionError", "MCPToolset", "MCPToolsetOptions"]

ToolFilter = Iterable[str] | Callable[[ToolSpec], bool]
"""Which server tools to offer: their names, or a predicate on their spec (server's name)."""

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_REFRESHES = 3
"""Listings tried in a row while the server keeps announcing changes during them."""


class MCPToolsetOptions(TypedDict, total=False):
    """The keyword options of ``MCPToolset.stdio`` and ``MCPToolset.http``."""

    prefix: str
    tools: ToolFilter
    requires_approval: RequiresApproval
    timeout: float | None
    toolsets: Iterable[str]
    connect_timeout: float
    trust: Trust
    sensitive: bool
    side_effects: bool
    defer_loading: bool


class MCPToolset(Toolset):
    """An MCP server's tools; build one with ``MCPToolset.stdio(...)`` or ``.http(...)``.

    Options:
        prefix: Put ``<prefix>_`` before every tool name (to tell servers apart).
        tools: Offer only these tools: a list of the server's names, or a predicate on
            their ToolSpec (with the server's name).
        requires_approval: True, or a predicate ``(ctx, arguments) -> bool``: calls wait
            for a person's decision, as with function tools (the run pauses).
        timeout: Seconds a call may take before it fails with ``tool_timeout``.
        toolsets: Named groups the tools belong to, for ``registry.view(toolsets=...)``.
        connect_timeout: Seconds to wait for the server to start and answer (default 30).
        trust: ``"untrusted"`` for a server you do not control: its results taint the
            conversation (see ``Agent(after_untrusted=...)``).
        sensitive, side_effects: Mark every tool of the server (``after_untrusted`` then
            asks before, or refuses, their calls in a conversation holding untrusted content).
        defer_loading: Show none of its tools until a search reveals them (``ToolSearch``,
            which an agent given such a toolset gets if it has none).

    Examples:
        >>> import sys
        >>> from tooldeck.tools.mcp import MCPToolset
        >>> toolset = MCPToolset.stdio(sys.executable, ["examples/mcp_server.py"], prefix="demo")
        >>> toolset
        MCPToolset(...mcp_server.py', not connected)
    """

    def __init__(self, target: Target, **options: Unpack[MCPToolsetOptions]) -> None:
        where = f"MCP server {target.describe()}"
        refuse_unknown_options(where, options, MCPToolsetOptions.__annotations__)
        self.target = target
        self._prefix = options.get("prefix", "")
        self._wanted = _tool_filter(options.get("tools"))
        self._connect_timeout = options.get("connect_timeout", 30.0)
        self._options = ToolOptions(
            toolsets=frozenset(options.get("toolsets", ())),
            timeout=options.get("timeout"),
            requires_approval=options.get("requires_approval", False),
            on_error=_failure_text,
            trust=options.get("trust", "trusted"),
            sensitive=options.get("sensitive", False),
            side_effects=options.get("side_effects", False),
            defer_loading=options.get("defer_loading", False),
        )
        self._options.check(where)
        self.defer_loading = self._options.defer_loading
        """Whether its tools are held back until a search reveals them."""
        self._entries: tuple[ToolEntry, ...] | None = None
        self._skipped: dict[str, str] = {}
        self._announced = 0
        """``tools/list_changed`` notifications received."""
        self._listed_at = -1
        """The notification count when the cached list was fetched."""
        self._list_changes = 0
        self._session: Session | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        **options: Unpack[MCPToolsetOptions],
    ) -> MCPToolset:
        """A server run as a subprocess (``command args...``), spoken to over stdio.

        ``env`` is added to a minimal environment (PATH, HOME, ...), as the SDK does.
        """
        if isinstance(args, str):
            raise TypeError(f"args must be a list of strings, got the string {args!r}")
        directory = str(cwd) if cwd is not None else None
        return cls(StdioTarget(command, tuple(args), env, directory), **options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        **options: Unpack[MCPToolsetOptions],
    ) -> MCPToolset:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``)."""
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"an MCP server URL starts with http:// or https://, got {url!r}")
        return cls(HttpTarget(url, dict(headers or {})), **options)

    def __repr__(self) -> str:
        connected = self._session is not None and self._session.usable
        state = "connected" if connected else "not connected"
        return f"MCPToolset({self.target.describe()!r}, {state})"

    @property
    def version(self) -> int:
        """Changes when the server announced a new tool list, or a listing found one."""
        return self._announced + self._list_changes

    @property
    def changes_announced(self) -> int:
        """How many times the server said its tool list changed (``tools/list_changed``)."""
        return self._announced

    @property
    def skipped(self) -> Mapping[str, str]:
        """Server tools left out of the latest list, with the reason (a bad name or schema)."""
        return dict(self._skipped)

    async def entries(self) -> Sequence[ToolEntry]:
        """The server's tools; connects on first use, lists again after a change notice.

        Raises:
            MCPConnectionError: The server could not be started or reached.
        """
        self._bind_loop()
        async with self._lock:
            session = self._session
            if self._entries is None or session is None:
                session = await self._connect()
            elif session.usable and self._listed_at != self._announced:
                # A server that went away keeps its list; the next call reconnects.
                with contextlib.suppress(MCPCallFailed):
                    await self._refresh(session)
            assert self._entries is not None  # a connection always lists
            return self._entries

    async def aclose(self) -> None:
        """Close the connection (the server process ends); the next use connects again."""
        session, self._session = self._session, None
        self._entries = None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()

    async def __aenter__(self) -> MCPToolset:
        await self.entries()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Send ``tools/call`` for the server's tool ``name``; the observation text.

        Raises:
            MCPCallFailed: The tool reported an error, or no answer came (the message says
                which); an agent shows the message to the model as ``tool_error``.
        """
        self._bind_loop()
        session = self._session
        if session is None or not session.usable:
            session = await self._reconnect(session)
        return await session.call_tool(name, arguments)

    async def _connect(self) -> Session:
        try:
            from tooldeck.tools.mcp._session import Session  # the SDK loads here, once
        except ImportError as error:
            raise ImportError(
                f"MCPToolset needs the MCP SDK ({error}): pip install 'tooldeck[mcp]'"
            ) from error

        session = Session(self.target, self._tools_changed)
        await session.start(self._connect_timeout)
        self._session = session
        try:
            await self._refresh(session)
        except MCPCallFailed as error:
            await session.close()
            raise MCPConnectionError(
                f"the MCP server {self.target.describe()!r} did not list its tools: {error}"
            ) from error
        return session

    async def _reconnect(self, lost: Session | None) -> Session:
        """A usable session for a call: the current one, or a new one if it was lost."""
        async with self._lock:
            session = self._session
            if session is not None and session is not lost and session.usable:
                return session
            if lost is not None:
                await lost.close()
            try:
                return await self._connect()
            except MCPConnectionError as error:
                raise MCPCallFailed(
                    f"the MCP server is not running and could not be restarted: {error}"
                ) from error

    async def _refresh(self, session: Session) -> None:
        """List the tools; again if the server announced a change while it answered."""
        for _ in range(_REFRESHES):
            mark = self._announced
            self._store(await session.list_tools())
            self._listed_at = mark
            if self._announced == mark:
                return

    def _store(self, specs: list[ToolSpec]) -> None:
        entries: list[ToolEntry] = []
        skipped: dict[str, str] = {}
        names: set[str] = set()
        for spec in specs:
            if not self._wanted(spec):
                continue
            try:
                entry = self._entry(spec, names)
            except ToolDefinitionError as error:
                skipped[spec.name] = str(error)
                continue
            names.add(entry.name)
            entries.append(entry)
        if self._entries is None or [e.spec for e in entries] != [e.spec for e in self._entries]:
            self._list_changes += 1
        self._entries = tuple(entries)
        self._skipped = skipped

    def _entry(self, spec: ToolSpec, taken: set[str]) -> ToolEntry:
        name = re.sub(
            r"[^a-zA-Z0-9_-]", "_", f"{self._prefix}_{spec.name}" if self._prefix else spec.name
        )
        if not _TOOL_NAME.match(name) or name in taken:
            problem = (
                "is taken by another tool" if name in taken else "is longer than 64 characters"
            )
            raise ToolDefinitionError(f"the tool name {name!r} {problem}")
        try:
            handler = MCPToolHandler(self, spec.name, spec.parameters)
        except Exception as error:  # jsonschema.SchemaError, without importing it eagerly
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ToolDefinitionError(
                f"its inputSchema is not a valid JSON Schema: {first_line}"
            ) from error
        exposed = spec.model_copy(update={"name": name})
        return ToolEntry(
            exposed, handler, self._options, origin=f"MCP server {self.target.describe()}"
        )

    def _tools_changed(self) -> None:
        self._announced += 1

    def _bind_loop(self) -> None:
        """Tie the toolset to the running event loop; a new loop (a second asyncio.run) gets a
        new connection, since the old one ended with its loop."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None and self._loop.is_running():
            raise RuntimeError(
                f"{self!r} is in use by another event loop (thread); make one toolset per loop"
            )
        self._loop = loop
        self._session = None
        self._entries = None
        self._lock = asyncio.Lock()


class MCPToolHandler:
    """Runs one MCP tool: validates against its inputSchema, then sends ``tools/call``."""

    __slots__ = ("_arguments", "_toolset", "name")

    def __init__(self, toolset: MCPToolset, name: str, schema: dict[str, Any]) -> None:
        self._toolset = toolset
        self.name = name
        """The tool's name on the server (without the prefix)."""
        self._arguments = JsonSchemaArguments(schema)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the arguments against the server's schema; InvalidArguments if they fail."""
        return self._arguments.validate(arguments, closed=False)

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> str | ToolOutcome:
        """Call the tool on the server; its result as the observation text. A failure the
        server words as tooldeck does (``error[code]: ...``, a tooldeck server) keeps its
        code, so the model reads one prefix, not ``error[tool_error]: error[...]``."""
        try:
            return await self._toolset.call(self.name, arguments)
        except MCPCallFailed as error:
            coded = _coded_failure(str(error))
            if coded is None:
                raise
            return ToolOutcome(coded, error)


def _tool_filter(wanted: ToolFilter | None) -> Callable[[ToolSpec], bool]:
    if wanted is None:
        return lambda spec: True
    if callable(wanted):
        return wanted
    if isinstance(wanted, str):
        raise TypeError(
            f"tools= takes a list of tool names or a predicate, got the string {wanted!r}"
        )
    names = frozenset(wanted)
    return lambda spec: spec.name in names


_CODED = re.compile(r"error\[([a-z_]+)\]: (.*)", re.DOTALL)
_CODES = frozenset(code.value for code in ErrorCode)


def _coded_failure(text: str) -> ToolResult | None:
    """``error[code]: message`` with a code tooldeck knows, as that failure; else None."""
    found = _CODED.fullmatch(text)
    if found is None or found[1] not in _CODES:
        return None
    return ToolResult.failure(found[1], found[2])


def _failure_text(error: Exception) -> str:
    """What the model reads for a failed MCP call (the tool's ``on_error``)."""
    if isinstance(error, MCPCallFailed):
        return str(error)
    return f"the MCP call failed ({type(error).__name__})"
