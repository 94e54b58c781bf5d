"""A small MCP server made of tooldeck tools, for the MCP examples (docs/mcp.md).

Over stdio (what an MCP client starts):  python examples/mcp_server.py
Over streamable HTTP:                    python examples/mcp_server.py --http 127.0.0.1:8765
The same with the command line:          tooldeck mcp serve examples.mcp_server:registry
"""

from __future__ import annotations

import sys
from typing import Literal

from tooldeck import RunContext, ToolRegistry, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def convert_temperature(celsius: float, to: Literal["fahrenheit", "kelvin"]) -> float:
    """Convert a temperature from degrees Celsius.

    Args:
        celsius: The temperature in degrees Celsius.
        to: The unit to convert to.
    """
    return celsius * 9 / 5 + 32 if to == "fahrenheit" else celsius + 273.15


@tool
def whoami(ctx: RunContext[None]) -> str:
    """Say which request this call came in (the MCP request id)."""
    return f"request {ctx.call_id}"


@tool(requires_approval=True)
def delete_everything() -> str:
    """Delete every file (not served: a person must approve its calls)."""
    raise RuntimeError("never runs here")


registry = ToolRegistry([add, convert_temperature, whoami, delete_everything])


if __name__ == "__main__":
    from tooldeck.serve.mcp import serve_tools

    http = sys.argv[2] if sys.argv[1:2] == ["--http"] else None
    serve_tools(registry, name="tooldeck-example", http=http)
