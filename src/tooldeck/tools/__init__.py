"""Tools: what the model may call, and the one contract every kind of tool reduces to.

``function.py`` makes tools of plain functions (``@tool``), ``schema/`` their JSON Schemas,
``handler.py`` holds the contract (``ToolHandler``: validated arguments in, a result or a
``Pause`` out), ``registry.py`` the registry and its views, ``context.py`` what a tool may
ask about its call (``RunContext``), ``mcp/`` the MCP client toolset, ``builtin/`` the
file and shell tools.

May import: ``tooldeck.errors``, ``tooldeck.messages``, ``tooldeck.results``,
``tooldeck._untrusted``, ``tooldeck._budget`` (the shared budget's class, which a tool's
``RunContext.budget`` names). Never ``tooldeck.models`` or ``tooldeck.run`` (or anything
above).
"""

from tooldeck.tools.context import RunContext
from tooldeck.tools.function import FunctionTool, tool
from tooldeck.tools.handler import Pause, ToolHandler, ToolOutcome
from tooldeck.tools.registry import ToolEntry, ToolRegistry, ToolView

__all__ = [
    "FunctionTool",
    "Pause",
    "RunContext",
    "ToolEntry",
    "ToolHandler",
    "ToolOutcome",
    "ToolRegistry",
    "ToolView",
    "tool",
]
