"""Serving tooldeck tools to other programs: a registry as an MCP server (``serve.mcp``)."""
