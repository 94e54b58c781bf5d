"""A tool registry served over MCP, on the official SDK's ``MCPServer``.

Each tool is listed with exactly the schema tooldeck shows a model, and each ``tools/call``
goes through tooldeck's own call runner: the same validation, timeout and error texts as in
an agent run, with ``RunContext.call_id`` set to the MCP request's id. A client that cancels
a call (``notifications/cancelled``) cancels it as a run's cancel does: an async tool is
cancelled, and a sync tool is told through ``ctx.cancelled``. A failure answers
with ``isError`` and the observation text a model would read. Tools that need a person's
approval are served only when allowed (an MCP client cannot be trusted to ask one);
external tools never. A tool's exception is logged (logger ``tooldeck.serve.mcp``, level
WARNING) with its traceback; ``tooldeck mcp serve`` shows it as one line (``-v``: whole).
Needs the ``mcp`` extra: ``pip install 'tooldeck[mcp]'``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

import anyio
from pydantic import PrivateAttr

from tooldeck.errors import InvalidArguments
from tooldeck.messages import ToolCall, ToolResult, ToolSpec
from tooldeck.run._engine.calls.round import answer_call
from tooldeck.run._engine.calls.shared import CallOptions, CallRound
from tooldeck.run.cancel import CancelSignal
from tooldeck.run.policy import Limits, RunPolicy
from tooldeck.serve._stdio import serve_stdio
from tooldeck.tools.guardrails import ArgumentsCheck, ToolGuardrail
from tooldeck.tools.registry import ToolEntry, ToolRegistry, ToolView, deferred

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.tools.base import Tool
    from mcp.server.mcpserver.utilities.func_metadata import func_metadata
    from mcp_types import CallToolResult, TextContent
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        f"serving tools over MCP needs the MCP SDK ({error}): pip install 'tooldeck[mcp]'"
    ) from error

__all__ = ["ServedTools", "mcp_server", "parse_address", "run_server", "serve_tools"]

logger = logging.getLogger(__name__)
"""Where a served tool's exception goes (the client reads only the observation)."""

_ONE_CALL = Limits(repeat_limit=None)
"""Each MCP request is a run of one call: no repeat or budget rules across requests."""

RunCall = Callable[[str, dict[str, Any], str], Awaitable[ToolResult]]
"""(tool name, arguments, MCP request id) -> what a model would read."""


@dataclass(frozen=True, slots=True)
class ServedTools:
    """Which tools a server offers, and why the others are left out."""

    view: ToolView
    not_served: dict[str, str]
    """Tool name -> the reason it is not served."""

    @classmethod
    def of(cls, tools: ToolRegistry | ToolView, *, allow_approval_tools: bool) -> ServedTools:
        """External tools are never served; approval tools only when allowed, and then
        they run without asking (the MCP client takes the person's place). Deferred tools
        (``defer_loading``) are served as any other: an MCP client defers its own."""
        view = tools.view() if isinstance(tools, ToolRegistry) else tools
        served: list[ToolEntry] = []
        not_served: dict[str, str] = {}
        for entry in map(_shown, view.entries):
            if entry.external:
                not_served[entry.name] = "an external tool: the application runs its calls"
            elif entry.options.requires_approval and not allow_approval_tools:
                not_served[entry.name] = (
                    "requires approval; serve it with --allow-approval-tools "
                    "(allow_approval_tools=True) if the MCP client asks a person"
                )
            elif entry.options.requires_approval:
                options = replace(entry.options, requires_approval=False)
                served.append(replace(entry, options=options))
            else:
                served.append(entry)
        return cls(ToolView.of(served), not_served)


def _shown(entry: ToolEntry) -> ToolEntry:
    return deferred(entry, False)


def mcp_server(
    tools: ToolRegistry | ToolView,
    *,
    name: str,
    allow_approval_tools: bool = False,
    include_error_details: bool = False,
    deps: Any = None,
    tool_guardrails: Sequence[ToolGuardrail | ArgumentsCheck] = (),
) -> MCPServer[Any]:
    """An ``MCPServer`` offering ``tools``: serve it with ``run_server`` (stdio or HTTP), or
    mount ``.streamable_http_app()`` in an ASGI application.

    Args:
        tools: A registry (all its own tools; tools of registered Toolsets are not served)
            or a view of some of them.
        name: The server's name, as clients see it.
        allow_approval_tools: Serve tools with ``requires_approval`` too; they then run
            without a person's decision.
        include_error_details: Tell the client a failing tool's exception text (by default
            it reads tooldeck's generic line, as a model would).
        deps: What tools receive as ``RunContext.deps``.
        tool_guardrails: Guardrails on every served tool's calls, after each tool's own
            (as ``Agent(tool_guardrails=...)``; see ``tooldeck.run.guardrails``).
    """
    served = ServedTools.of(tools, allow_approval_tools=allow_approval_tools)
    guards = tuple(ToolGuardrail.of(item, "tool_guardrails") for item in tool_guardrails)
    options = CallOptions(include_error_details, tool_guardrails=guards)
    runner = _CallRunner(served.view, options, deps)
    listed: list[Tool] = [
        _ServedTool.of(entry.spec, runner.call) for entry in served.view.dispatch.values()
    ]
    return MCPServer(name, tools=listed, log_level="WARNING")


def run_server(server: MCPServer[Any], http: str | None = None) -> None:
    """Serve over stdio, or over streamable HTTP at ``http`` (``HOST:PORT``, path ``/mcp``).

    On stdio every request is answered, a malformed one with a JSON-RPC error (the SDK's own
    ``server.run()`` leaves those unanswered).
    """
    if http is None:
        anyio.run(serve_stdio, server)
        return
    host, port = parse_address(http)
    server.run("streamable-http", host=host, port=port)


def parse_address(text: str) -> tuple[str, int]:
    """``127.0.0.1:8000`` -> ``("127.0.0.1", 8000)``; a ValueError saying what to write."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--http takes HOST:PORT, e.g. 127.0.0.1:8000; got {text!r}")
    return host.strip("[]"), int(port)


def serve_tools(
    tools: ToolRegistry | ToolView,
    *,
    name: str,
    http: str | None = None,
    allow_approval_tools: bool = False,
    include_error_details: bool = False,
    log: TextIO = sys.stderr,
    tool_guardrails: Sequence[ToolGuardrail | ArgumentsCheck] = (),
) -> None:
    """``tooldeck mcp serve``: say on ``log`` what is served, then serve until stopped."""
    if http is not None:
        parse_address(http)
    served = ServedTools.of(tools, allow_approval_tools=allow_approval_tools)
    where = f"http://{http}/mcp" if http else "stdio"
    print(
        f"tooldeck mcp serve: {name!r} on {where}; tools: {', '.join(served.view.names) or 'none'}",
        file=log,
    )
    for tool_name, reason in served.not_served.items():
        print(f"  not served: {tool_name}: {reason}", file=log)
    server = mcp_server(
        tools,
        name=name,
        allow_approval_tools=allow_approval_tools,
        include_error_details=include_error_details,
        tool_guardrails=tool_guardrails,
    )
    run_server(server, http)


class _CallRunner:
    """Runs the call of one MCP request as tooldeck runs a model's call."""

    def __init__(self, view: ToolView, options: CallOptions, deps: Any) -> None:
        self._view = view
        self._options = options
        self._deps = deps

    async def call(self, name: str, arguments: dict[str, Any], request_id: str) -> ToolResult:
        call = ToolCall(id=request_id, name=name, arguments=arguments)
        cancelled = CancelSignal()
        policy = RunPolicy(_ONE_CALL)
        round_ = CallRound(
            self._view, policy, self._options, self._deps, 0, "", cancelled=cancelled
        )
        try:
            trace = await answer_call(call, round_)
        except anyio.get_cancelled_exc_class():  # the client cancelled the request
            cancelled.cancel(f"the MCP client cancelled request {request_id}")
            raise
        if trace.error is not None and not isinstance(trace.error, InvalidArguments):
            # the tool's failure, answered to the client: the server itself goes on
            logger.warning(
                "tool %r failed (MCP request %s)", name, request_id, exc_info=trace.error
            )
        return trace.result


def _not_called() -> None:
    """The SDK's Tool record wants a function; a served tool runs through ``run`` instead."""


_NO_ARGUMENTS = func_metadata(_not_called, structured_output=False)


class _ServedTool(Tool):
    """The SDK's tool record for a tooldeck tool: tooldeck's schema, tooldeck's call runner."""

    _run_call: RunCall = PrivateAttr()

    @classmethod
    def of(cls, spec: ToolSpec, run_call: RunCall) -> _ServedTool:
        tool = cls(
            fn=_not_called,
            name=spec.name,
            title=None,
            description=spec.description,
            parameters=spec.parameters,
            fn_metadata=_NO_ARGUMENTS,
            is_async=True,
            context_kwarg=None,
            annotations=None,
        )
        tool._run_call = run_call
        return tool

    async def run(
        self,
        arguments: dict[str, Any],
        context: Context[Any, Any],
        convert_result: bool = False,
    ) -> CallToolResult:
        result = await self._run_call(self.name, arguments, context.request_id)
        return CallToolResult(content=[TextContent(text=result.output)], is_error=not result.ok)
