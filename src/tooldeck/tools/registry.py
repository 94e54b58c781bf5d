"""The registry: one place that says which tools exist, what the model sees and what runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from tooldeck.contracts import ToolSpec
from tooldeck.errors import DuplicateToolError
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import ErrorHandler, FunctionTool, tool


class ToolHandler(Protocol):
    """The one contract every kind of tool reduces to: validated arguments in, text out."""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Return the arguments to run with, or raise InvalidArguments."""
        ...

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> str:
        """Run the call; an exception becomes a ``tool_error`` observation."""
        ...


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """A registered tool: the spec the model sees and the handler that runs, side by side."""

    spec: ToolSpec
    handler: ToolHandler
    toolsets: frozenset[str] = frozenset()
    timeout: float | None = None
    """Seconds a call may run before it fails with ``tool_timeout``."""
    retries: int | None = None
    """Consecutive failures allowed before the run stops; None uses the agent's limit."""
    sequential: bool = False
    """Run alone, never beside the other calls of a turn."""
    on_error: ErrorHandler | None = None
    origin: str = ""
    """Where the tool was defined, for messages about it."""

    @property
    def name(self) -> str:
        return self.spec.name

    @classmethod
    def of(cls, item: ToolEntry | FunctionTool[..., Any] | Callable[..., Any]) -> ToolEntry:
        """An entry for a ToolEntry, a FunctionTool, or a plain function (made a tool)."""
        if isinstance(item, ToolEntry):
            return item
        function_tool = item if isinstance(item, FunctionTool) else tool(item)
        return cls(
            spec=function_tool.spec,
            handler=function_tool,
            toolsets=function_tool.toolsets,
            timeout=function_tool.timeout,
            retries=function_tool.retries,
            sequential=function_tool.sequential,
            on_error=function_tool.on_error,
            origin=function_tool.origin,
        )


@dataclass(frozen=True, slots=True)
class ToolView:
    """The tools one run may use: ``specs`` go to the model, ``dispatch`` runs them."""

    specs: tuple[ToolSpec, ...]
    dispatch: Mapping[str, ToolEntry] = field(repr=False)

    @classmethod
    def of(cls, entries: Iterable[ToolEntry]) -> ToolView:
        dispatch = {entry.name: entry for entry in entries}
        return cls(tuple(entry.spec for entry in dispatch.values()), MappingProxyType(dispatch))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.dispatch)


class ToolRegistry:
    """Holds every tool once, by name; ``view()`` picks the ones a task needs.

    Example:
        >>> from tooldeck import ToolRegistry, tool
        >>> @tool(toolsets=["math"])
        ... def add_numbers(left: int, right: int) -> int:
        ...     '''Add two integers.'''
        ...     return left + right
        >>> registry = ToolRegistry([add_numbers])
        >>> [spec.name for spec in registry.view(toolsets=["math"]).specs]
        ['add_numbers']
    """

    def __init__(
        self, tools: Iterable[ToolEntry | FunctionTool[..., Any] | Callable[..., Any]] = ()
    ) -> None:
        self._entries: dict[str, ToolEntry] = {}
        for item in tools:
            self.register(item)

    def register(self, item: ToolEntry | FunctionTool[..., Any] | Callable[..., Any]) -> ToolEntry:
        """Add a tool; a second tool with the same name is refused, naming both."""
        entry = ToolEntry.of(item)
        existing = self._entries.get(entry.name)
        if existing is not None:
            raise DuplicateToolError(
                f"duplicate tool name: {entry.name!r} from {entry.origin or 'unknown'} "
                f"(already registered from {existing.origin or 'unknown'}); "
                "give one of them another name with tool(name=...)"
            )
        self._entries[entry.name] = entry
        return entry

    def view(self, toolsets: Iterable[str] | None = None) -> ToolView:
        """The tools in any of ``toolsets``; all of them when None."""
        if toolsets is None:
            return ToolView.of(self._entries.values())
        wanted = frozenset(toolsets)
        unknown = wanted - self.toolsets
        if unknown:
            raise ValueError(
                f"unknown toolset(s): {', '.join(sorted(map(repr, unknown)))}; "
                f"known: {', '.join(sorted(self.toolsets)) or 'none'}"
            )
        return ToolView.of(e for e in self._entries.values() if e.toolsets & wanted)

    @property
    def toolsets(self) -> frozenset[str]:
        return frozenset(name for entry in self._entries.values() for name in entry.toolsets)

    def get(self, name: str) -> ToolEntry | None:
        return self._entries.get(name)

    def __iter__(self) -> Iterator[ToolEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


ToolLike = ToolEntry | FunctionTool[..., Any] | Callable[..., Any]
"""A tool in any form a registry takes; a plain function is made a tool with ``tool()``."""
ToolsLike = ToolView | ToolRegistry | Iterable[ToolLike]


def as_view(tools: ToolsLike | None) -> ToolView:
    """What ``Agent(tools=...)`` accepts -> a ToolView (a list is registered, so no duplicates)."""
    if tools is None:
        return ToolView.of(())
    if isinstance(tools, ToolView):
        return tools
    if isinstance(tools, ToolRegistry):
        return tools.view()
    return ToolRegistry(tools).view()
