"""An MCP server on the official SDK (protocol 2026-07-28) whose tool list grows:
``grow()`` adds a tool ``extra_N`` and announces the change to listening clients."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")
added: list[str] = []


def _extra() -> str:
    return "extra"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool."""
    name = f"extra_{len(added) + 1}"
    added.append(name)
    server.add_tool(_extra, name=name, description="Added by grow.")
    await ctx.notify_tools_changed()
    return f"added {name}"


if __name__ == "__main__":
    server.run()
