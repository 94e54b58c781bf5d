"""The built-in ``read_output`` tool: reads further into an output a call stored
(``large_output="store"``). An agent whose tools may store outputs adds it by itself."""

from __future__ import annotations

from typing import Any

from tooldeck.errors import ModelRetry
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import tool
from tooldeck.tools.outputs import READ_OUTPUT

_MOST = 100_000
"""Characters one read returns at most."""


# Its own max_output_chars (above what one read returns) keeps the agent's limit off it: the
# model reads what it asked for.
@tool(name=READ_OUTPUT, inline=True, max_output_chars=_MOST + 100)
def read_output(ctx: RunContext[Any], handle: str, offset: int = 0, length: int = 4000) -> str:
    """Read part of a tool output that was too long to show whole.

    Args:
        handle: The handle the stored output's note gave.
        offset: The first character to read.
        length: How many characters to read (at most 100000).
    """
    if offset < 0 or length < 1:
        raise ModelRetry(f"offset must be >= 0 and length >= 1, got {offset} and {length}")
    if ctx.outputs is None:
        raise ModelRetry("this run stored no outputs")
    try:
        return ctx.outputs.read(handle, offset, min(length, _MOST))
    except LookupError as error:
        raise ModelRetry(str(error)) from None
