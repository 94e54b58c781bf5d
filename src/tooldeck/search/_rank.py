"""Ranking deferred tools for a query: BM25 (``bm25s``), a regular expression, or a function.

Each ranker is built once per tool set (``ranker``) and asked per search (``rank``); it
answers the indexes of the tools that match, best first, and nothing when none does.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol

from tooldeck.search._regex import RegexRanker
from tooldeck.tools.registry import ToolEntry

Strategy = Literal["bm25", "regex"]
Ranking = Callable[[str, Sequence[ToolEntry]], Sequence[str] | Awaitable[Sequence[str]]]
"""A user's ranking: ``(query, tools) -> names``, best first (sync or async)."""

_WORDS = re.compile(r"[A-Za-z][a-z]*|[0-9]+|[^\W\d_]+")
_INSTALL = (
    "ToolSearch(strategy='bm25') needs the bm25s library: pip install 'tooldeck[search]' "
    "(or give ToolSearch(strategy='regex'))"
)


class Ranker(Protocol):
    async def rank(self, query: str, limit: int) -> list[int]: ...


def words(text: str, stop: frozenset[str]) -> list[str]:
    """The lower-case words of ``text``, names split at ``_`` and case (``getUserId`` ->
    get, user, id), without the ``stop`` words."""
    return [word for word in map(str.lower, _WORDS.findall(text)) if word not in stop]


def described(entry: ToolEntry) -> str:
    """What a search reads of a tool: its name, description, and each parameter's name and
    description."""
    parts = [entry.name, entry.spec.description]
    properties = entry.spec.parameters.get("properties", {})
    if isinstance(properties, dict):
        for name, schema in properties.items():
            parts.append(str(name))
            if isinstance(schema, dict) and isinstance(schema.get("description"), str):
                parts.append(schema["description"])
    return "\n".join(parts)


def check_strategy(strategy: object) -> None:
    """Refuse a strategy that is not one there is, and BM25 without its library."""
    if callable(strategy):
        return
    if strategy not in ("bm25", "regex"):
        raise ValueError(
            f"ToolSearch strategy must be 'bm25', 'regex' or a function (query, tools) -> "
            f"names, got {strategy!r}"
        )
    if strategy == "bm25":
        import importlib.util

        if importlib.util.find_spec("bm25s") is None:
            raise ImportError(_INSTALL)


def ranker(strategy: Strategy | Ranking, tools: Sequence[ToolEntry]) -> Ranker:
    """The ranker of ``strategy`` over ``tools`` (its index built now)."""
    if strategy == "bm25":
        return _BM25(tools)
    if strategy == "regex":
        return RegexRanker([entry.name for entry in tools], list(map(described, tools)))
    assert callable(strategy)
    return _Given(strategy, tools)


class _BM25:
    """BM25 over each tool's name, description and parameters (``bm25s``'s sparse index)."""

    def __init__(self, tools: Sequence[ToolEntry]) -> None:
        import bm25s
        from bm25s.stopwords import STOPWORDS_EN

        self._stop = stop = frozenset(STOPWORDS_EN)
        corpus = [words(described(entry), stop) or ["-"] for entry in tools]
        self._index = bm25s.BM25()
        self._index.index(corpus, show_progress=False)
        self._vocabulary: dict[str, int] = self._index.vocab_dict

    async def rank(self, query: str, limit: int) -> list[int]:
        known = self._vocabulary
        ids = [known[word] for word in dict.fromkeys(words(query, self._stop)) if word in known]
        if not ids:
            return []
        import numpy as np

        scores = self._index.get_scores_from_ids(ids)
        size = min(limit, len(scores))
        best = np.argpartition(-scores, size - 1)[:size]
        ordered = best[np.argsort(-scores[best], kind="stable")]
        return [int(i) for i in ordered if scores[i] > 0]


class _Given:
    """The user's function; names it answers that are no deferred tool are passed over."""

    def __init__(self, ranking: Ranking, tools: Sequence[ToolEntry]) -> None:
        self._ranking, self._tools = ranking, tuple(tools)
        self._places = {entry.name: i for i, entry in enumerate(tools)}

    async def rank(self, query: str, limit: int) -> list[int]:
        names: Any = self._ranking(query, self._tools)
        if inspect.isawaitable(names):
            names = await names
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise TypeError(f"a ToolSearch ranking must return a list of tool names, got {names!r}")
        places = self._places
        ranked = [places[name] for name in dict.fromkeys(names) if name in places]
        return ranked[:limit]
