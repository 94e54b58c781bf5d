"""Hypothesis strategies that break stored data: any value in any place, keys gone or added.

Used by the property tests of every stored format's reader (checkpoints, session rows, run
log rows): whatever these make of valid stored data, the reader loads it or raises its
documented error.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st


def nested(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


HOSTILE = st.sampled_from(
    [
        nested(70),
        nested(300),
        [nested(300)],
        "\ud800",
        "é💥",
        "",
        -1,
        0,
        2**70,
        1.5,
        True,
        False,
        None,
        [],
        {},
        "error[tool_error]: x",
        "[]",
        "{}",
    ]
)
"""Values that broke readers before: deep nesting, lone surrogates, wrong kinds, huge ints."""

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON_VALUES = HOSTILE | st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def mutated(draw: st.DrawFn, original: Any) -> Any:
    """``original`` (JSON data) with one change somewhere: a value replaced, a key removed
    or added, or an item appended."""
    data = copy.deepcopy(original)
    parent: Any = None
    key: Any = None
    node = data
    while isinstance(node, dict | list) and node and draw(st.integers(0, 9)) < 8:
        parent, key = (
            node,
            draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))),
        )
        node = node[key]
    change = draw(st.sampled_from(["replace", "remove", "add"]))
    if parent is None:
        return draw(JSON_VALUES) if change == "replace" else data
    if change == "replace":
        parent[key] = draw(JSON_VALUES)
    elif change == "remove":
        del parent[key]
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=8))] = draw(JSON_VALUES)
    else:
        parent.append(draw(JSON_VALUES))
    return data


@st.composite
def mutated_text(draw: st.DrawFn, text: str) -> str:
    """``text`` cut short, or with a character put in or taken out."""
    at = draw(st.integers(0, len(text)))
    change = draw(st.sampled_from(["cut", "insert", "delete"]))
    if change == "cut":
        return text[:at]
    if change == "insert":
        return (
            text[:at]
            + draw(st.sampled_from(['"', "{", "]", ",", "\\", "\ud800", "x", "0"]))
            + text[at:]
        )
    return text[:at] + text[at + 1 :]
