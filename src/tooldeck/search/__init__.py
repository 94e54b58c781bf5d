"""Tool search: deferred tools, shown to the model only once a search reveals them.

A tool marked ``defer_loading`` (``@tool(defer_loading=True)``,
``ToolRegistry(..., defer_loading=True)``, ``MCPToolset(..., defer_loading=True)``) is not
sent with any request. ``ToolSearch`` gives the model a ``search_tools(query, limit)`` tool
that ranks the deferred tools (BM25 by default, a regular expression, or a function of
yours), answers the best ones a line each, and reveals them: from the next request on they
are shown after the usual tools (appended, so a provider's prompt-cache prefix stays) and
may be called. The reveals are the run's state, so a checkpoint, the run's journal and a
session's next run carry them. An agent given deferred tools and no ``ToolSearch`` gets one.

Examples:
    >>> from tooldeck import Agent, ScriptedModel, tool
    >>> from tooldeck.search import ToolSearch
    >>> @tool(defer_loading=True)
    ... def convert_currency(amount: float, to: str) -> str:
    ...     '''Convert an amount of euros to another currency.'''
    ...     return f"{amount * 1.1:.2f} {to}"
    >>> agent = Agent(ScriptedModel([]), tools=[convert_currency],
    ...               capabilities=[ToolSearch(strategy="regex")])
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from tooldeck.messages import AssistantOutput, ToolSpec
from tooldeck.models.base import SEARCH_TOOL as LOCAL_SEARCH_TOOL
from tooldeck.models.tool_search import NativeToolSearch, revealed_tools
from tooldeck.run.capabilities import Capability, HasStates, ModelCall, RequestContext, RunView
from tooldeck.search._rank import Ranker, Ranking, Strategy, check_strategy, ranker
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import tool
from tooldeck.tools.registry import ToolEntry, ToolView, deferred

__all__ = [
    "FOUND",
    "NO_MATCH",
    "SEARCH_TOOL",
    "Searched",
    "ToolSearch",
    "search_watcher",
    "searched",
]

SEARCH_TOOL = LOCAL_SEARCH_TOOL
"""The name of the tool ``ToolSearch`` gives the model."""
NO_MATCH = "no tool matches; do not search again with the same words"
"""What the model reads when a search finds nothing."""
FOUND = "tools found (callable from your next turn):"
"""The first line of a search's answer that found tools."""
search_watcher: ContextVar[Callable[[str, Searched], None] | None] = ContextVar(
    "tooldeck_search_watcher", default=None
)
"""Called as ``watcher(strategy, search)`` by each local search ranked in this context
(``tooldeck.observe`` sets it around a ``search_tools`` call to record the search's span)."""
_KEPT_VIEWS = 4
"""Tool sets whose index a ToolSearch keeps (an agent's usual view, a handoff's...)."""
_KEPT_SHOWN = 256
"""Views with reveals kept per tool set (one per distinct set of reveals)."""


class ToolSearch(Capability):
    """Gives the model ``search_tools`` to find and reveal the agent's deferred tools.

    Args:
        strategy: ``"bm25"`` (default: BM25 over each tool's name, description, and its
            parameters' names and descriptions, with the ``bm25s`` library), ``"regex"``
            (the query is a case-insensitive regular expression; tools whose name matches
            first), or a function ``(query, tools) -> names`` ranking the deferred tools
            (ToolEntry objects) best first, sync or async.
        max_limit: The most tools one search may reveal (the model's ``limit`` is held to it).
        native: Let a provider that searches tools itself do it (Anthropic's
            ``tool_search_tool_bm25``/``_regex`` tools, OpenAI Responses' ``tool_search``):
            its adapter sends its own search tool and the deferred tools with
            ``defer_loading`` in place of ``search_tools``, and the tools it finds are
            revealed as a local search's are. Other models (Chat Completions servers,
            Gemini, the local model) get ``search_tools`` either way. ``False``: the local
            search everywhere. A ranking function is always local.

    Examples:
        >>> from tooldeck.search import ToolSearch
        >>> ToolSearch()
        ToolSearch(strategy='bm25')
    """

    def __init__(
        self, strategy: Strategy | Ranking = "bm25", *, max_limit: int = 20, native: bool = True
    ) -> None:
        check_strategy(strategy)
        if not isinstance(max_limit, int) or max_limit < 1:
            raise ValueError(f"max_limit must be a whole number of at least 1, got {max_limit!r}")
        if not isinstance(native, bool):
            raise ValueError(f"native must be True or False, got {native!r}")
        self.strategy, self.max_limit = strategy, max_limit
        self.native = native and isinstance(strategy, str)
        self._indexes: list[tuple[ToolView, _Index]] = []

    def initial_state(self) -> dict[str, Any]:
        """The tools revealed so far, in the order they were revealed."""
        return {"revealed": []}

    def show_tools(self, view: ToolView, ctx: RunView) -> ToolView:
        """``view`` with ``search_tools`` after the usual tools, then the tools revealed."""
        if not view.deferred:
            return view
        return self._index(view).shown(_revealed(self, ctx))

    async def before_request(
        self, request: ModelCall, ctx: RequestContext
    ) -> ModelCall | AssistantOutput:
        """Offer the deferred tools not revealed yet to a provider's own search
        (``ModelSettings.tool_search``): an adapter without one sends ``search_tools``."""
        if not self.native or not isinstance(self.strategy, str):
            return request
        index = self._shown_by(ctx.tools)
        if index is None:  # no search tool in this request (none shown, or a last answer)
            return request
        native = index.native(_revealed(self, ctx), self.strategy)
        if not native.deferred:  # all revealed: nothing for the provider to search
            return request
        return replace(request, settings=replace(request.settings, tool_search=native))

    async def after_response(
        self, request: ModelCall, output: AssistantOutput, ctx: RequestContext
    ) -> AssistantOutput:
        """Reveal the tools a provider's own search found, as a local search does."""
        if request.settings.tool_search is not None and output.provider_items:
            index = self._shown_by(ctx.tools)
            if index is not None:
                revealed: list[str] = self.state(ctx)["revealed"]
                held = index.view.deferred
                for name in revealed_tools(output):
                    if name in held and name not in revealed:
                        revealed.append(name)
        return output

    def _shown_by(self, specs: Sequence[ToolSpec]) -> _Index | None:
        """The tool set whose ``search_tools`` is among ``specs`` (each set has its own)."""
        for spec in specs:
            if spec.name == SEARCH_TOOL:
                for _, index in self._indexes:
                    if index.entry.spec is spec:
                        return index
        return None

    def _index(self, view: ToolView) -> _Index:
        search = view.dispatch.get(SEARCH_TOOL)
        for seen, index in self._indexes:
            if seen is view or index.entry is search:  # a view it showed, shown again
                return index
        index = _Index(self, view)
        self._indexes = [*self._indexes[-(_KEPT_VIEWS - 1) :], (view, index)]
        return index

    def __repr__(self) -> str:
        shown = self.strategy if isinstance(self.strategy, str) else self.strategy.__name__
        native = "" if self.native or not isinstance(self.strategy, str) else ", native=False"
        return f"ToolSearch(strategy={shown!r}{native})"


class _Index:
    """One tool set's deferred tools: the search tool bound to them, their ranker (built at
    the first search), and the views with each set of reveals."""

    def __init__(self, owner: ToolSearch, view: ToolView) -> None:
        self.owner, self.view = owner, view
        self.tools = tuple(view.deferred.values())
        self._ranker: Ranker | None = None
        self._shown: dict[tuple[str, ...], ToolView] = {}
        self._native: dict[tuple[str, ...], NativeToolSearch] = {}
        self.entry = ToolEntry.of(
            tool(name=SEARCH_TOOL, inline=True, on_error=_failed, sequential=True)(self.search)
        )

    def shown(self, revealed: tuple[str, ...]) -> ToolView:
        view = self._shown.get(revealed)
        if view is None:
            if len(self._shown) >= _KEPT_SHOWN:
                self._shown.clear()
            view = self._shown[revealed] = self._made(revealed)
        return view

    def native(self, revealed: tuple[str, ...], strategy: Strategy) -> NativeToolSearch:
        """The deferred tools not revealed yet, for a provider's own search (kept per set of
        reveals: a request with 10,000 deferred tools does not list them again)."""
        native = self._native.get(revealed)
        if native is None:
            if len(self._native) >= _KEPT_SHOWN:
                self._native.clear()
            held = self.shown(revealed).deferred
            deferred = tuple(entry.spec for entry in held.values())
            native = self._native[revealed] = NativeToolSearch(strategy, deferred, SEARCH_TOOL)
        return native

    def _made(self, revealed: tuple[str, ...]) -> ToolView:
        held = self.view.deferred
        shown = [deferred(held[name], False) for name in revealed if name in held]
        usual = [entry for entry in self.view.dispatch.values() if entry.name != SEARCH_TOOL]
        made = ToolView.of((*usual, self.entry, *shown))
        gone = frozenset(revealed)
        left = {name: entry for name, entry in held.items() if name not in gone}
        return replace(made, deferred=MappingProxyType(left))

    async def search(self, ctx: RunContext[Any], query: str, limit: int = 5) -> str:
        """Find tools for a task among those not shown yet. The tools found can be called
        from your next turn.

        Args:
            query: Words for what you need to do (a regular expression if the search is
                by pattern).
            limit: The most tools to find.
        """
        query = query.strip()
        if not query:
            return "the query is empty: give words for what you need to do"
        limit = max(1, min(limit, self.owner.max_limit))
        if self._ranker is None:  # built once per tool set, off the event loop (~1 s for 10k)
            built = await asyncio.to_thread(ranker, self.owner.strategy, self.tools)
            self._ranker = self._ranker or built
        try:
            found = await self._ranker.rank(query, limit)
        except re.error as error:
            return (
                f"the query is not a valid regular expression ({error}); search again with "
                "a simpler pattern, such as a word of the tool's name"
            )
        watcher = search_watcher.get()
        if watcher is not None:
            names = tuple(self.tools[place].name for place in found)
            watcher(_strategy_name(self.owner.strategy), Searched(query, names))
        if not found:
            return NO_MATCH
        state = self.owner.state(ctx)
        revealed: list[str] = state["revealed"]
        lines = []
        for place in found:
            entry = self.tools[place]
            if entry.name not in revealed:
                revealed.append(entry.name)
            lines.append(f"{entry.name}: {_first_line(entry.spec.description)}")
        return f"{FOUND}\n" + "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Searched:
    """A ``search_tools`` call read back from a run: its query and the tools it revealed."""

    query: str
    revealed: tuple[str, ...]
    """The tools its answer names, best first (none: no match, or the search failed)."""


def searched(name: str, arguments: Mapping[str, object], output: str) -> Searched | None:
    """The search a call of ``name`` with ``arguments`` answered by ``output`` was, or None
    for a call of any other tool (for the display, the run log, spans: what a search found)."""
    if name != SEARCH_TOOL:
        return None
    head, _, rest = output.partition("\n")
    found = [line.split(": ", 1)[0] for line in rest.splitlines()] if head == FOUND else []
    return Searched(str(arguments.get("query", "")), tuple(each for each in found if each))


def _revealed(owner: ToolSearch, ctx: HasStates) -> tuple[str, ...]:
    states = ctx.states
    state = states.get(owner.state_key) if states is not None else None
    return tuple(state["revealed"]) if state else ()


def _strategy_name(strategy: Strategy | Ranking) -> str:
    return strategy if isinstance(strategy, str) else getattr(strategy, "__name__", "function")


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line or "(no description)"


def _failed(error: Exception) -> str:
    return f"the tool search failed: {type(error).__name__}: {error}"


def needs_search(items: Sequence[Capability]) -> bool:
    """Whether none of ``items`` chooses the tools a request shows (so deferred tools need a
    ``ToolSearch`` added)."""
    return not any(isinstance(item, ToolSearch) for item in items)
