"""Function tools, their schemas, and the registry."""

from tooldeck.tools.context import RunContext
from tooldeck.tools.function import FunctionTool, tool
from tooldeck.tools.registry import ToolEntry, ToolHandler, ToolRegistry, ToolView

__all__ = [
    "FunctionTool",
    "RunContext",
    "ToolEntry",
    "ToolHandler",
    "ToolRegistry",
    "ToolView",
    "tool",
]
