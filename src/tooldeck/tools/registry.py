"""The registry: one place that says which tools exist, what the model sees and what runs.

A registry holds tool entries and toolsets (groups of tools fetched from elsewhere, such as
an MCP server). It may change while an agent uses it; the agent reads it again before each
model turn (``ToolSource``), so a change applies from the next turn, never in the middle of
a turn's calls.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType, ModuleType
from typing import Any

from tooldeck.errors import DuplicateToolError
from tooldeck.messages import SEARCH_TOOL as SEARCH_TOOL  # re-exported: run/ and search/ read it
from tooldeck.messages import ToolSpec
from tooldeck.tools.function import FunctionTool, tool
from tooldeck.tools.handler import ToolHandler as ToolHandler  # re-exported: its old home
from tooldeck.tools.options import DEFAULT_OPTIONS, ToolOptions


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """A registered tool: the spec the model sees and the handler that runs, side by side."""

    spec: ToolSpec
    handler: ToolHandler
    options: ToolOptions = DEFAULT_OPTIONS
    """How the tool runs: timeout, retries, approval, ..."""
    external: bool = False
    """The application runs this tool's calls: a call pauses the run for its result."""
    origin: str = ""
    """Where the tool was defined, for messages about it."""
    emits_events: bool = False
    """Its calls pass events of a run of their own to the run's stream while they run (an
    agent tool does): the loop runs such a call beside the stream, never blocking it."""
    calls_tools: bool = False
    """Its handler calls other tools through the run's call path (``RunContext.caller``), as
    code mode's ``run_code`` does: those calls' events are the run's own, and the loop runs
    such a call beside the stream too."""
    reaches: tuple[str, ...] = ()
    """For a tool that calls tools: the tools it may call, named to a person asked to
    approve one of its calls (``PendingCall.reaches``)."""

    @property
    def streams(self) -> bool:
        """Its calls pass events to the run's stream while they run."""
        return self.emits_events or self.calls_tools

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
            options=function_tool.options,
            external=function_tool.external,
            origin=function_tool.origin,
        )


_NONE_DEFERRED: Mapping[str, ToolEntry] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ToolView:
    """The tools one model turn may use: ``specs`` go to the model, ``dispatch`` runs them."""

    specs: tuple[ToolSpec, ...]
    dispatch: Mapping[str, ToolEntry] = field(repr=False)
    may_pause: bool = False
    """Some tool's calls can pause the run (approval or external): checked once, here."""
    guarded: bool = False
    """Some tool has guardrails of its own (``@tool(guardrails=...)``): checked once, here."""
    untrusted: bool = False
    """Some tool's results may be untrusted content (``trust="untrusted"``, or an agent
    tool's, whose inner run may read some, or ``run_code``'s, whose calls may): checked
    once, here."""

    deferred: Mapping[str, ToolEntry] = field(default_factory=lambda: _NONE_DEFERRED, repr=False)
    """The tools held back until a search reveals them (``defer_loading``): neither shown
    nor callable through this view (``ToolSearch`` makes the view that shows them)."""

    @classmethod
    def of(cls, entries: Iterable[ToolEntry]) -> ToolView:
        """A view of ``entries`` (the deferred ones held back in ``deferred``); two with the
        same name are refused, naming both."""
        dispatch: dict[str, ToolEntry] = {}
        deferred: dict[str, ToolEntry] = {}
        for entry in entries:
            name = entry.name
            _refuse_duplicate(dispatch.get(name) or deferred.get(name), entry)
            if entry.options.defer_loading:
                deferred[name] = entry
            else:
                dispatch[name] = entry
        may_pause = any(e.external or e.options.requires_approval for e in dispatch.values())
        specs = tuple(entry.spec for entry in dispatch.values())
        guarded = any(entry.options.guardrails for entry in dispatch.values())
        untrusted = any(e.options.trust == "untrusted" or e.streams for e in dispatch.values())
        held = MappingProxyType(deferred) if deferred else _NONE_DEFERRED
        return cls(specs, MappingProxyType(dispatch), may_pause, guarded, untrusted, held)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.dispatch)

    @property
    def entries(self) -> tuple[ToolEntry, ...]:
        """Every tool of the view, the deferred ones last."""
        return (*self.dispatch.values(), *self.deferred.values())

    def map(self, wrap: EntryWrapper) -> ToolView:
        """The same tools, in the same order, each entry passed through ``wrap``."""
        return ToolView.of(wrap(entry) for entry in self.entries)


class Toolset(ABC):
    """Tools that come from elsewhere (an MCP server, plugins), loaded when first needed.

    Register a toolset with a ``ToolRegistry`` or pass it in ``Agent(tools=[...])``. Before
    each model turn the agent asks for ``entries()``; ``version`` must change whenever the
    entries would differ from the last ones returned, so an unchanged toolset costs nothing.
    """

    @property
    @abstractmethod
    def version(self) -> int:
        """A number that changes whenever the entries change."""

    @abstractmethod
    async def entries(self) -> Sequence[ToolEntry]:
        """The current tools; the first call may connect or load them."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to close by default
        """Release what the toolset holds (a connection, a process)."""


class ToolRegistry:
    """Holds every tool once, by name; ``view()`` picks the ones a task needs.

    Examples:
        >>> from tooldeck import ToolRegistry, tool
        >>> @tool(toolsets=["math"])
        ... def add_numbers(left: int, right: int) -> int:
        ...     '''Add two integers.'''
        ...     return left + right
        >>> registry = ToolRegistry([add_numbers])
        >>> [spec.name for spec in registry.view(toolsets=["math"]).specs]
        ['add_numbers']
    """

    def __init__(self, tools: Iterable[ToolLike] = (), *, defer_loading: bool = False) -> None:
        self._entries: dict[str, ToolEntry] = {}
        self._toolsets: list[Toolset] = []
        self._deferred_toolsets: set[int] = set()
        self._changes = 0
        self.defer_loading = defer_loading
        """Whether the tools registered here are deferred unless ``register`` says otherwise
        (shown only once ``ToolSearch`` reveals them)."""
        for item in tools:
            self.register(item)

    def register(self, item: ToolLike, *, defer_loading: bool | None = None) -> ToolEntry | Toolset:
        """Add a tool or a toolset; a second tool with the same name is refused, naming both.
        ``defer_loading`` (default: the registry's) holds it back until a search reveals it."""
        defer = self.defer_loading if defer_loading is None else defer_loading
        if isinstance(item, Toolset):
            if item not in self._toolsets:
                self._toolsets.append(item)
                if defer:
                    self._deferred_toolsets.add(id(item))
                self._changes += 1
            return item
        if isinstance(item, ModuleType):
            raise TypeError(_NOT_TOOLS.format(kind="a module", value=item.__name__))
        entry = deferred(ToolEntry.of(item)) if defer else ToolEntry.of(item)
        _refuse_duplicate(self._entries.get(entry.name), entry)
        self._entries[entry.name] = entry
        self._changes += 1
        return entry

    def remove(self, name_or_toolset: str | Toolset) -> None:
        """Take a tool (by name) or a toolset out; agents see the change from their next turn."""
        if isinstance(name_or_toolset, Toolset):
            self._toolsets.remove(name_or_toolset)
            self._deferred_toolsets.discard(id(name_or_toolset))
        elif self._entries.pop(name_or_toolset, None) is None:
            raise KeyError(
                f"no tool named {name_or_toolset!r} to remove; registered: "
                f"{', '.join(self._entries) or 'none'}"
            )
        self._changes += 1

    def _stamp_is(self, seen: tuple[int, ...]) -> bool:
        if not self._toolsets:  # the usual case, without building a tuple
            return len(seen) == 1 and seen[0] == self._changes
        return self.stamp == seen

    @property
    def stamp(self) -> tuple[int, ...]:
        """Differs whenever a tool or toolset was added or removed, or a toolset changed."""
        if not self._toolsets:
            return (self._changes,)
        return (self._changes, *(toolset.version for toolset in self._toolsets))

    @property
    def toolsets_registered(self) -> tuple[Toolset, ...]:
        return tuple(self._toolsets)

    def view(self, toolsets: Iterable[str] | None = None) -> ToolView:
        """The registered tools in any of ``toolsets`` (all of them when None).

        Tools of registered Toolsets are not included: they load asynchronously, so use
        ``await registry.load_view()`` (an agent does that before each turn).
        """
        return _filtered(self._entries.values(), toolsets, self.toolsets)

    async def load_view(self, toolsets: Iterable[str] | None = None) -> ToolView:
        """``view()`` with the current tools of every registered Toolset (loaded if needed)."""
        entries = list(self._entries.values())
        for toolset in self._toolsets:
            loaded = await toolset.entries()
            if id(toolset) in self._deferred_toolsets:
                loaded = [deferred(entry) for entry in loaded]
            entries.extend(loaded)
        known = frozenset(name for entry in entries for name in entry.options.toolsets)
        return _filtered(entries, toolsets, known)

    @property
    def defers(self) -> bool:
        """Whether some tool here is (or some toolset's tools will be) deferred."""
        return bool(
            self._deferred_toolsets
            or any(entry.options.defer_loading for entry in self._entries.values())
            or any(getattr(toolset, "defer_loading", False) for toolset in self._toolsets)
        )

    @property
    def toolsets(self) -> frozenset[str]:
        """The toolset names the registered tools belong to."""
        entries = self._entries.values()
        return frozenset(name for entry in entries for name in entry.options.toolsets)

    def get(self, name: str) -> ToolEntry | None:
        """The entry registered as ``name``, or None."""
        return self._entries.get(name)

    def __iter__(self) -> Iterator[ToolEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __getattr__(self, name: str) -> Any:
        if name == "to_mcp_server":  # moved in 0.2: the tools room does not know its servers
            raise AttributeError(
                "ToolRegistry.to_mcp_server moved: use "
                "tooldeck.serve.mcp.mcp_server(registry, name=...)"
            )
        raise AttributeError(f"'ToolRegistry' object has no attribute {name!r}")

    async def aclose(self) -> None:
        """Close every registered toolset."""
        for toolset in self._toolsets:
            await toolset.aclose()


def deferred(entry: ToolEntry, defer: bool = True) -> ToolEntry:
    """``entry`` held back until a search reveals it (``defer=False``: shown as usual)."""
    if entry.options.defer_loading is defer:
        return entry
    return replace(entry, options=replace(entry.options, defer_loading=defer))


EntryWrapper = Callable[[ToolEntry], ToolEntry]
"""Makes an entry that runs the same tool another way (e.g. each call as a durable step); it
keeps the entry's name and spec."""
ToolLike = ToolEntry | FunctionTool[..., Any] | Toolset | Callable[..., Any]
"""A tool in any form a registry takes; a plain function is made a tool with ``tool()``."""
ToolsLike = ToolView | ToolRegistry | Iterable[ToolLike]

_NOT_TOOLS = (
    "tools= takes a ToolView, a ToolRegistry, or a list of tools (functions, @tool "
    "functions, ToolEntry, Toolset); got {kind} {value!r}"
)


def _refuse_duplicate(existing: ToolEntry | None, entry: ToolEntry) -> None:
    if existing is not None and existing is not entry:
        raise DuplicateToolError(
            f"duplicate tool name: {entry.name!r} from {entry.origin or 'unknown'} "
            f"(already registered from {existing.origin or 'unknown'}); "
            "give one of them another name with tool(name=...)"
        )


def _filtered(
    entries: Iterable[ToolEntry], toolsets: Iterable[str] | None, known: frozenset[str]
) -> ToolView:
    if toolsets is None:
        return ToolView.of(entries)
    wanted = frozenset(toolsets)
    unknown = wanted - known
    if unknown:
        raise ValueError(
            f"unknown toolset(s): {', '.join(sorted(map(repr, unknown)))}; "
            f"known: {', '.join(sorted(known)) or 'none'}"
        )
    return ToolView.of(e for e in entries if e.options.toolsets & wanted)


class ToolSource:
    """Where an agent reads its tools from, before each model turn.

    A ToolView is fixed: read once. A ToolRegistry, or a list of tools (which becomes the
    agent's own registry), is read again whenever its ``stamp`` changed, so tools added or
    removed during a run (``ctx.tools``) apply from the next turn.
    """

    def __init__(self, tools: ToolsLike | None) -> None:
        self.registry: ToolRegistry | None = None
        """The registry tools may change during a run; None for a fixed ToolView."""
        self.current: ToolView = ToolView.of(())
        """The view the latest turn used."""
        self._seen: tuple[int, ...] = ()
        self._wrap: EntryWrapper | None = None
        self._builtin: tuple[ToolEntry, ...] = ()
        if tools is None:
            pass
        elif isinstance(tools, ToolView):
            self.current = tools
        elif isinstance(tools, ToolRegistry):
            self.registry = tools
        elif isinstance(tools, ModuleType | str | bytes) or not isinstance(tools, Iterable):
            kind = "a module" if isinstance(tools, ModuleType) else type(tools).__name__
            shown = tools.__name__ if isinstance(tools, ModuleType) else tools
            raise TypeError(_NOT_TOOLS.format(kind=kind, value=shown))
        else:
            self.registry = ToolRegistry(tools)
        if self.registry is not None and not self.registry.toolsets_registered:
            self.current = self.registry.view()
            self._seen = self.registry.stamp

    @property
    def fixed(self) -> ToolView | None:
        """The view when it can never change (a ToolView was given), else None."""
        return self.current if self.registry is None else None

    def unchanged(self) -> ToolView | None:
        """The latest view if nothing changed since it was read (no await needed), else None."""
        registry = self.registry
        if registry is None or registry._stamp_is(self._seen):
            return self.current
        return None

    async def view(self) -> ToolView:
        """The tools for the next model turn."""
        registry = self.registry
        if registry is None:
            return self.current
        stamp = registry.stamp
        if stamp != self._seen:
            view = await registry.load_view()
            view = view if self._wrap is None else view.map(self._wrap)
            self.current = self._with_builtin(view) if self._builtin else view
            self._seen = stamp  # read before loading: a change made meanwhile shows next turn
        return self.current

    def add_builtin(self, entry: ToolEntry) -> None:
        """Show a tool of tooldeck's own (``read_output``) in every view, unless a tool of
        that name is there already."""
        self._builtin = (*self._builtin, entry)
        self.current = self._with_builtin(self.current)

    def _with_builtin(self, view: ToolView) -> ToolView:
        held = view.deferred
        missing = [e for e in self._builtin if e.name not in view.dispatch and e.name not in held]
        return ToolView.of((*view.entries, *missing)) if missing else view

    def extended(self, entries: tuple[ToolEntry, ...]) -> ToolSource:
        """This source with ``entries`` in every view too, passed through its wrapper as its
        own tools are (a run's transfer tools). A tool of the same name in the current view
        is refused (DuplicateToolError naming both)."""
        twin = copy.copy(self)
        added = entries if self._wrap is None else tuple(map(self._wrap, entries))
        twin._builtin = (*added, *self._builtin)
        twin.current = ToolView.of((*self.current.entries, *added))
        return twin

    def wrapped(self, wrap: EntryWrapper) -> ToolSource:
        """This source with every entry passed through ``wrap``, now and whenever the tools
        change (the registry itself stays shared)."""
        twin = copy.copy(self)
        inner = self._wrap
        twin._wrap = wrap if inner is None else lambda entry: wrap(inner(entry))
        twin.current = self.current.map(wrap)
        return twin

    async def aclose(self) -> None:
        """Close the registry's toolsets (a fixed ToolView has none of its own)."""
        if self.registry is not None:
            await self.registry.aclose()


def as_view(tools: ToolsLike | None) -> ToolView:
    """What ``Agent(tools=...)`` accepts -> a ToolView, now (Toolsets' tools not loaded)."""
    return ToolSource(tools).current
