"""The regex strategy of tool search, made fast on thousands of tools (issue 37: a search
over 10,000 deferred tools under 5 ms): its joined-string scans and its word look-up answer
exactly what searching each tool in turn answers, whatever the pattern."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tooldeck.eval.bfcl.dialect import bfcl_tools
from tooldeck.search._rank import described
from tooldeck.search._regex import RegexRanker, required_word
from tooldeck.tools.registry import ToolEntry

BFCL = Path(__file__).resolve().parents[1] / "src/tooldeck/eval/bfcl/data/bfcl_tools.jsonl"
PATTERNS = [
    "weather",
    "zzz_nothing",
    "temp.*unit",
    r"\bcity\b",
    "^get",
    "^calc",
    "_info$",
    "area$",
    r"get_\w+",
    r"e\sp",
    r"s\s+t",
    "[^a-z]{3}",
    "[^a]bc",
    "[]a]b",
    "(?=calc)c",
    r"a\Wb",
    "rain|snow",
    "x|y",
    "ab*c",
    "ab+c",
    r"\d+",
    r"\d{4}",
    r"\dx",
    "e{2}",
    "c{2,}t",
    "_{1,2}",
    r"\x41rea",
    r"a\.b",
    "(abc)?def",
    "get weather",
    "city name",
    "CITY",
    "kelvin",
    "ſtock",
    "caf",
    "café",
    "\n",
    ".",
]


def _texts() -> tuple[list[str], list[str]]:
    """400 BFCL tools and three of words a case-insensitive pattern matches unlike
    ``str.lower`` would (the Kelvin sign, the long s, an accent)."""
    functions: dict[str, dict[str, object]] = {}
    for line in BFCL.read_text(encoding="utf-8").splitlines()[:400]:
        for function in json.loads(line)["functions"]:
            functions.setdefault(function["name"].replace(".", "_"), function)
    made = [{**f, "name": name} for name, f in functions.items()]
    entries = [ToolEntry.of(item) for item in bfcl_tools(made, strict=False).tools]
    names = [entry.name for entry in entries] + ["to_\u212aelvin", "long_s", "cafe_menu"]
    texts = [described(entry) for entry in entries] + [
        "to_\u212aelvin\nConvert to \u212aelvin degrees.",
        "long_s\nThe \u017ftock of old books.",
        "cafe_menu\nThe Café's menu of the day.",
    ]
    return names, texts


def each_in_turn(names: list[str], texts: list[str], query: str, limit: int) -> list[int]:
    """The answer as it was before: every name searched, then every text, in turn."""
    pattern = re.compile(query, re.IGNORECASE)
    ranked = [i for i, name in enumerate(names) if pattern.search(name)][:limit]
    for index, text in enumerate(texts):
        if len(ranked) >= limit:
            break
        if index not in ranked and pattern.search(text):
            ranked.append(index)
    return ranked


NAMES, TEXTS = _texts()
RANKER = RegexRanker(NAMES, TEXTS)


@pytest.mark.parametrize("query", PATTERNS)
@pytest.mark.parametrize("limit", [1, 5, 20])
async def test_the_fast_regex_answers_what_searching_each_tool_answers(
    query: str, limit: int
) -> None:
    assert await RANKER.rank(query, limit) == each_in_turn(NAMES, TEXTS, query, limit)


async def test_case_insensitive_words_find_their_unicode_twins() -> None:
    assert [NAMES[i] for i in await RANKER.rank("kelvin degrees", 5)] == ["to_\u212aelvin"]
    assert [NAMES[i] for i in await RANKER.rank("stock of old", 5)] == ["long_s"]


@pytest.mark.parametrize(
    ("query", "word"),
    [
        ("refund", "refund"),
        ("Temp.*Unit", "temp"),
        ("^get_weather$", "get_weather"),
        ("refunds?", "refund"),
        ("x{10}", None),  # the counts are no word
        (r"\x41rea", None),  # a character by its number: digits follow
        (r"\1abc", None),
        ("(?i)abc", None),
        ("a|b", None),
        ("(order)? refund", "refund"),
        ("[refund]", None),
        (r"\d+", None),
    ],
)
def test_the_word_every_match_holds(query: str, word: str | None) -> None:
    assert required_word(query) == word
