"""Tool outputs too large for the context: ``@tool(max_output_chars=N, large_output=...)``.

``"truncate"`` shows the model the head and says how much was cut; ``"error"`` answers
``error[output_too_large]``; ``"store"`` keeps the whole output in the run's
``OutputStore`` and shows the head, the size and a handle the model reads further with the
built-in ``read_output`` tool. The whole output is kept in the call's trace either way
(``ToolTrace.full_output``), and so in the run log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from tooldeck.errors import ErrorCode
from tooldeck.messages import ToolResult
from tooldeck.results import ToolTrace

LargeOutput = Literal["truncate", "store", "error"]
"""What happens to an output longer than ``max_output_chars``."""

LARGE_OUTPUTS: tuple[LargeOutput, ...] = ("truncate", "store", "error")

READ_OUTPUT = "read_output"
"""The name of the built-in tool that reads a stored output."""


@dataclass(slots=True)
class OutputStore:
    """The whole outputs of one run's calls whose output was stored, by handle (the call's
    id)."""

    outputs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, trace: Iterable[ToolTrace]) -> OutputStore:
        """A resumed run's store: the whole outputs its trace kept, by call id."""
        return cls({t.call.id: t.full_output for t in trace if t.full_output is not None})

    def read(self, handle: str, offset: int, length: int) -> str:
        """``length`` characters of the output ``handle`` from ``offset``, with where the
        next part starts; a clear message for a handle it does not hold."""
        text = self.outputs.get(handle)
        if text is None:
            known = ", ".join(map(repr, self.outputs)) or "none"
            raise LookupError(
                f"no stored output {handle!r} in this run (stored: {known}); outputs are kept "
                "for the run that made them"
            )
        end = min(len(text), offset + length)
        part = text[offset:end]
        if end < len(text):
            return f"{part}\n[characters {offset}-{end} of {len(text)}; next: offset={end}]"
        return f"{part}\n[characters {offset}-{end} of {len(text)}: the end]"


def limited(
    text: str,
    tool_name: str,
    call_id: str,
    max_chars: int,
    mode: LargeOutput,
    store: OutputStore | None,
) -> ToolResult:
    """What the model reads of an output longer than ``max_chars``."""
    size = len(text)
    if mode == "error":
        return ToolResult.failure(
            ErrorCode.OUTPUT_TOO_LARGE,
            f"the output of {tool_name!r} was {size} characters, over its limit of {max_chars} "
            "(max_output_chars); ask for less",
        )
    head = text[:max_chars]
    if mode == "store" and store is not None:
        store.outputs[call_id] = text
        return ToolResult.success(
            f"{head}\n[output stored: {size} characters, the first {max_chars} shown; read "
            f"more with read_output(handle={call_id!r}, offset={max_chars}, length=...)]"
        )
    return ToolResult.success(f"{head}\n[output truncated: {max_chars} of {size} characters shown]")
