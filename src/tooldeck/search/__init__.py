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
from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from tooldeck.run.capabilities import Capability, RunView
from tooldeck.search._rank import Ranker, Ranking, Strategy, check_strategy, ranker
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import tool
from tooldeck.tools.registry import ToolEntry, ToolView, deferred

__all__ = ["NO_MATCH", "SEARCH_TOOL", "ToolSearch"]

SEARCH_TOOL = "search_tools"
NO_MATCH = "no tool matches; do not search again with the same words"
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

    Examples:
        >>> from tooldeck.search import ToolSearch
        >>> ToolSearch()
        ToolSearch(strategy='bm25')
    """

    def __init__(self, strategy: Strategy | Ranking = "bm25", *, max_limit: int = 20) -> None:
        check_strategy(strategy)
        if not isinstance(max_limit, int) or max_limit < 1:
            raise ValueError(f"max_limit must be a whole number of at least 1, got {max_limit!r}")
        self.strategy, self.max_limit = strategy, max_limit
        self._indexes: list[tuple[ToolView, _Index]] = []

    def initial_state(self) -> dict[str, Any]:
        """The tools revealed so far, in the order they were revealed."""
        return {"revealed": []}

    def show_tools(self, view: ToolView, ctx: RunView) -> ToolView:
        """``view`` with ``search_tools`` after the usual tools, then the tools revealed."""
        if not view.deferred:
            return view
        index = self._index(view)
        states = ctx.states
        state = states.get(self.state_key) if states is not None else None
        revealed = tuple(state["revealed"]) if state else ()
        return index.shown(revealed)

    def _index(self, view: ToolView) -> _Index:
        for seen, index in self._indexes:
            if seen is view:
                return index
        index = _Index(self, view)
        self._indexes = [*self._indexes[-(_KEPT_VIEWS - 1) :], (view, index)]
        return index

    def __repr__(self) -> str:
        shown = self.strategy if isinstance(self.strategy, str) else self.strategy.__name__
        return f"ToolSearch(strategy={shown!r})"


class _Index:
    """One tool set's deferred tools: the search tool bound to them, their ranker (built at
    the first search), and the views with each set of reveals."""

    def __init__(self, owner: ToolSearch, view: ToolView) -> None:
        self.owner, self.view = owner, view
        self.tools = tuple(view.deferred.values())
        self._ranker: Ranker | None = None
        self._shown: dict[tuple[str, ...], ToolView] = {}
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
        return "tools found (callable from your next turn):\n" + "\n".join(lines)


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line or "(no description)"


def _failed(error: Exception) -> str:
    return f"the tool search failed: {type(error).__name__}: {error}"


def needs_search(items: Sequence[Capability]) -> bool:
    """Whether none of ``items`` chooses the tools a request shows (so deferred tools need a
    ``ToolSearch`` added)."""
    return not any(isinstance(item, ToolSearch) for item in items)
