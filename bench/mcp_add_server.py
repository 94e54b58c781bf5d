"""The MCP server bench/mcp_latency.py calls: one ``add`` tool.

    python bench/mcp_add_server.py [--tooldeck] [--http PORT]

By default the SDK's own ``MCPServer`` with a decorated function; ``--tooldeck`` serves the
same tool from a tooldeck registry (``mcp_server(registry, ...)``). stdio unless ``--http``.
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer

from tooldeck import ToolRegistry, tool
from tooldeck.serve.mcp import mcp_server


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def build(tooldeck: bool) -> MCPServer[object]:
    if tooldeck:
        return mcp_server(ToolRegistry([tool(inline=True)(add)]), name="add")
    server: MCPServer[object] = MCPServer("add", log_level="WARNING")
    server.add_tool(add)
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tooldeck", action="store_true")
    parser.add_argument("--http", type=int, metavar="PORT")
    args = parser.parse_args()
    server = build(args.tooldeck)
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
