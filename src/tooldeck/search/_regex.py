"""The ``"regex"`` strategy: a regular expression (case-insensitive) over each deferred
tool's name, then its text (name, description, parameters); name matches first.

Fast on thousands of tools: the names and the texts are each joined into one string, kept
with the index, so a search is a scan of that string rather than one search per tool.

- A pattern holding a word it cannot match without (``refund``, ``temp.*unit``,
  ``^get_``) looks for that word first (``str.find`` on the lower-cased string), and
  checks the pattern on the tools where it is, only.
- Any other pattern is searched in the joined string itself; a match found there is
  checked on its own tool's text when it runs past it, and the scan goes on at the next
  tool.
- A pattern whose match depends on what is around it (``^``, ``$``, ``\\A``, ``\\Z``,
  lookarounds, inline flags), with no such word, searches each tool in turn.

Whichever way, the answer is the one searching each tool in turn gives: the tools whose
text the pattern matches, in their order, up to the limit.
"""

from __future__ import annotations

import functools
import itertools
import re
import string
from bisect import bisect_right
from collections.abc import Collection
from dataclasses import dataclass

_CONTEXTUAL = re.compile(r"(?<!\[)\^|\$|\\[AZz]|\(\?")
"""What makes a match depend on the text around it (an anchor, a lookaround, a flag)."""
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_- ")
"""Characters a pattern means literally (ASCII, so ``str.lower`` agrees with IGNORECASE)."""
_QUANTIFIERS = frozenset("*?{+")
_NUMBERED = re.compile(r"\\[xuUN0-9]")
"""An escape naming a character by its number (or a group by its): plain digits follow."""


class RegexRanker:
    """The regex strategy over tools' ``names`` and ``texts`` (built once per tool set)."""

    def __init__(self, names: list[str], texts: list[str]) -> None:
        self._names = _Joined(names)
        self._texts = _Joined(texts)

    async def rank(self, query: str, limit: int) -> list[int]:
        pattern = re.compile(query, re.IGNORECASE)  # re.error: the caller says why
        search = _Search(pattern, required_word(query), _CONTEXTUAL.search(query) is not None)
        ranked = self._names.matching(search, limit, ())
        if len(ranked) < limit:
            ranked += self._texts.matching(search, limit - len(ranked), frozenset(ranked))
        return ranked


@dataclass(frozen=True, slots=True)
class _Search:
    """A compiled query, the word every match holds (lower case; None: not known), and
    whether a match depends on its surroundings."""

    pattern: re.Pattern[str]
    word: str | None
    contextual: bool


def required_word(query: str) -> str | None:
    """The longest run of plain characters (letters, digits, ``_``, ``-``, space) outside
    any group, class or escape that every match of ``query`` holds, lower-cased; None if
    there is none (an alternation, an inline flag, an escape of a character by its number,
    or nothing plain)."""
    if "|" in query or "(?" in query or _NUMBERED.search(query):
        return None
    runs: list[str] = []
    run: list[str] = []
    depth = 0
    index = 0
    while index < len(query):
        char = query[index]
        if depth == 0 and char in _PLAIN:
            run.append(char)
            index += 1
            continue
        if char in _QUANTIFIERS and run:
            run.pop()  # the character before a quantifier may be absent or repeated
        runs.append("".join(run))
        run = []
        index = _past(query, index, char)
        depth += (char == "(") - (char == ")")
    runs.append("".join(run))
    word = max(runs, key=len).strip()
    return word.lower() or None


def _past(query: str, index: int, char: str) -> int:
    """Where the pattern goes on after the special character at ``index``."""
    if char == "\\":
        return index + 2
    if char == "{":  # a quantifier's counts
        closing = query.find("}", index)
        return index + 1 if closing < 0 else closing + 1
    if char == "[":  # a class: to its closing bracket (one right after '[' or '[^' is in it)
        end = index + 1
        if end < len(query) and query[end] == "^":
            end += 1
        if end < len(query) and query[end] == "]":
            end += 1
        while end < len(query) and query[end] != "]":
            end += 2 if query[end] == "\\" else 1
        return end + 1
    return index + 1


_SEPARATOR = "\n\x00\n"
"""Between two texts: ``.`` and ``\\s`` do not cross it (a match rarely runs past its text)."""
_SHORTEST_WORD = 3
"""A shorter word is in nearly every text: scanning for the pattern is faster."""


def _folded(text: str) -> str:
    """``text`` lower-cased, each character in its place: a character that is not ASCII
    becomes the ASCII letter it matches in a case-insensitive pattern (the Kelvin sign: k),
    or NUL (which no word holds)."""
    if text.isascii():
        return text.lower()
    table = {ord(char): _ascii_twin(char) for char in set(text) if not char.isascii()}
    return text.translate(table).lower()


@functools.cache
def _ascii_twin(char: str) -> str:
    letters = string.ascii_lowercase
    return next((a for a in letters if re.fullmatch(a, char, re.IGNORECASE)), "\x00")


class _Joined:
    """Texts joined into one string, with where each starts."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.starts: list[int] = []
        at = 0
        for text in texts:
            self.starts.append(at)
            at += len(text) + len(_SEPARATOR)
        self.joined = _SEPARATOR.join(texts)
        self.folded = _SEPARATOR.join(map(_folded, texts))
        """The same lower-cased, each character in its place: where a word is found."""

    def matching(self, search: _Search, limit: int, passed: Collection[int]) -> list[int]:
        """The indexes of up to ``limit`` texts ``search`` matches, in order, but those
        ``passed``."""
        if limit <= 0:
            return []
        texts, pattern = self.texts, search.pattern
        if search.word is not None and len(search.word) >= _SHORTEST_WORD:
            holding = _Holding(self, search.word)
            hits = (i for i in holding if i not in passed and pattern.search(texts[i]))
        elif search.contextual:
            every = (i for i, text in enumerate(texts) if pattern.search(text))
            hits = (i for i in every if i not in passed)
        else:
            hits = (i for i in _Scan(self, pattern) if i not in passed)
        return list(itertools.islice(hits, limit))


class _Holding:
    """The texts of ``joined`` whose lower case holds ``word``, in order (an iterator)."""

    def __init__(self, joined: _Joined, word: str) -> None:
        self._joined, self._word, self._at = joined, word, 0

    def __iter__(self) -> _Holding:
        return self

    def __next__(self) -> int:
        joined = self._joined
        found = joined.folded.find(self._word, self._at)
        if found < 0:
            raise StopIteration
        index = bisect_right(joined.starts, found) - 1
        self._at = _next_start(joined, index)
        return index


class _Scan:
    """The texts of ``joined`` the pattern matches, found by searching the joined string,
    in order (an iterator)."""

    def __init__(self, joined: _Joined, pattern: re.Pattern[str]) -> None:
        self._joined, self._pattern, self._at = joined, pattern, 0

    def __iter__(self) -> _Scan:
        return self

    def __next__(self) -> int:
        joined, pattern = self._joined, self._pattern
        while (match := pattern.search(joined.joined, self._at)) is not None:
            index = bisect_right(joined.starts, match.start()) - 1
            self._at = _next_start(joined, index)
            text = joined.texts[index]
            if match.end() <= joined.starts[index] + len(text) or pattern.search(text):
                return index
        raise StopIteration


def _next_start(joined: _Joined, index: int) -> int:
    """Where the text after ``index`` starts (past the end after the last)."""
    return joined.starts[index + 1] if index + 1 < len(joined.starts) else len(joined.joined) + 1
