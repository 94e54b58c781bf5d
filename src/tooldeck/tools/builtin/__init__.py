"""Real tools: files under a root directory, and a shell that asks before it runs.

``file_tools(root, writable=False)`` and ``shell_tool(root, ...)`` make the tools; the module
attributes ``files`` (read-only file tools) and ``shell`` (the shell tool, approval
required) are rooted in the current directory, for the command line:
``tooldeck run "..." --tools tooldeck.tools.builtin:files``.

Part of ``tooldeck.tools``: built with ``@tool`` like any user's tools; may import what
the tools room may.
"""

from __future__ import annotations

import os
from typing import Any

from tooldeck.tools.builtin._files import file_tools
from tooldeck.tools.builtin._shell import shell_tool


def __getattr__(name: str) -> Any:
    """``files`` and ``shell``: made on first use, rooted in the current directory."""
    if name == "files":
        value: Any = file_tools(os.getcwd())
    elif name == "shell":
        value = [shell_tool(os.getcwd())]
    else:
        raise AttributeError(f"module 'tooldeck.tools.builtin' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = ["file_tools", "shell_tool"]
