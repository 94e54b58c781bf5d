"""Serving tooldeck to other programs: a registry's tools as an MCP server (``serve.mcp``).

Layer 4: may import the layers below (the run's call runner, the tools); nothing below
imports it.
"""
