"""RunContext: what a tool may ask for about the call and the run it belongs to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from tooldeck.errors import ToolDeckError

if TYPE_CHECKING:
    from tooldeck.tools.registry import ToolRegistry

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
    run_id: str = ""
    """The run's id (``RunResult.run_id``; a durable run's workflow id): with ``call_id``, a
    key that names this call across retries and recoveries (an idempotency key)."""
    registry: ToolRegistry | None = field(default=None, repr=False)
    """The agent's registry, when its tools may change (use ``tools``)."""

    @property
    def tools(self) -> ToolRegistry:
        """The agent's tools, to add or remove some during the run: ``ctx.tools.register(t)``.

        The model sees a change from its next turn, never in the middle of a turn's calls.
        The change is the agent's, so it outlasts the run (and shows in the agent's other runs).
        """
        if self.registry is None:
            raise ToolDeckError(
                f"tool {self.tool_name!r} asked for ctx.tools, but this run's tools cannot "
                "change: the agent was given a fixed ToolView (give it a ToolRegistry or a list "
                "of tools instead), or this RunContext was not made by an agent run"
            )
        return self.registry
