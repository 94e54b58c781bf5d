"""Serving tooldeck to other programs: a registry's tools as an MCP server (``serve.mcp``), an
agent over AG-UI (``serve.agui``) and over A2A (``serve.a2a``).

Layer 4: may import the layers below (the run's call runner, the tools); nothing below
imports it.
"""
