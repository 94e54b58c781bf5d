"""RunContext: what a tool may ask for about the call and the run it belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

DepsT = TypeVar("DepsT")


@dataclass(frozen=True, slots=True)
class RunContext(Generic[DepsT]):
    """Injected into a tool parameter annotated ``RunContext``; never shown to the model.

    Example:
        >>> from tooldeck import RunContext, tool
        >>> @tool
        ... def whoami(ctx: RunContext[str]) -> str:
        ...     '''Say which user the run is for.'''
        ...     return ctx.deps
    """

    call_id: str
    """The model's id for this call."""
    tool_name: str
    """The name of the tool being called."""
    deps: DepsT
    """The host objects given to the run (``agent.run(prompt, deps=...)``)."""
    round: int = 0
    """Which model turn asked for this call, counting from 1."""
