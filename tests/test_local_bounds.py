"""The bounded leaves of a local model's grammar: integer ranges, number ranges, lengths.

GBNF alternatives of literals, digit classes and ``{n}`` repetitions read as regular
expressions once the quotes and spaces are gone, so each range is checked against every
integer around it, without a model.
"""

from __future__ import annotations

import random
import re

import pytest

from tooldeck.models.local._bounds import (
    MAX_DIGITS,
    MAX_OPEN_STRING,
    integer_range,
    leaf_rule,
    number_range,
    string_length,
)


def as_regex(gbnf: str) -> re.Pattern[str]:
    return re.compile(gbnf.replace('"."', "[.]").replace('"', "").replace(" ", ""))


def ranges() -> list[tuple[int, int]]:
    chosen = random.Random(15)
    edges = [0, 1, -1, 9, 10, 99, 100, -10, -100, 1000, 12345]
    pairs = [(a, b) for a in edges for b in edges if a <= b]
    for _ in range(300):
        low = chosen.randint(-3000, 3000)
        pairs.append((low, low + chosen.choice([0, 1, 9, 10, 99, chosen.randint(0, 6000)])))
    return pairs


def test_an_integer_range_admits_exactly_its_integers() -> None:
    for low, high in ranges():
        pattern = as_regex(integer_range(low, high))
        for value in range(low - 25, high + 26):
            assert bool(pattern.fullmatch(str(value))) == (low <= value <= high), (low, high)
        for text in ("01", "-0", "00", "+1", "1.0"):
            assert not pattern.fullmatch(text), (low, high, text)


def test_an_integer_range_reads_as_digits() -> None:
    assert integer_range(1, 50) == '([1-9] | [1-4] [0-9]{1} | "5" ("0"))'
    assert integer_range(-3, 3) == '"-" ([1-3]) | ([0-3])'


def test_a_number_range_holds_the_integral_part_and_writes_no_exponent() -> None:
    unit = as_regex(number_range(0, 1))
    assert [bool(unit.fullmatch(t)) for t in ("0", "0.25", "1", "1.0", "2", "-0.5", "1e-3")] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    negative = as_regex(number_range(-10.5, -2.5))
    assert [bool(negative.fullmatch(t)) for t in ("-2.7", "-10.5", "-11", "0", "-1")] == [
        True,
        True,
        False,
        False,
        False,
    ]
    above = as_regex(number_range(3, None))
    assert above.fullmatch("9" * MAX_DIGITS + ".5")
    assert not above.fullmatch("9" * (MAX_DIGITS + 1))
    assert not above.fullmatch("-1")


def test_a_string_length_counts_characters() -> None:
    assert string_length(2, 500) == '"\\"" json-char{2,500} "\\""'


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "integer", "maximum": 50}, "[1-4] [0-9]{1}"),
        ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3}, "([1-2])"),
        ({"type": "integer", "minimum": 0.5, "maximum": 2.5}, "([1-2])"),
        ({"type": "number", "minimum": 0, "maximum": 1}, "([0-1])"),
        ({"type": "string", "maxLength": 5000}, "json-char{0,5000}"),
        ({"type": "string", "minLength": 3}, f"json-char{{3,{MAX_OPEN_STRING}}}"),
    ],
)
def test_bounded_leaves_get_their_own_rule(schema: dict[str, object], expected: str) -> None:
    rule = leaf_rule(schema)
    assert rule is not None
    assert expected in rule


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer"},
        {"type": "string"},
        {"type": "integer", "enum": [1, 200], "maximum": 50},
        {"type": "string", "maxLength": 9, "pattern": "^[a-z]+$"},
        {"type": "string", "maxLength": 9, "format": "date"},
        {"type": "boolean"},
    ],
)
def test_other_leaves_stay_with_the_converter(schema: dict[str, object]) -> None:
    assert leaf_rule(schema) is None


def test_an_empty_range_is_refused_with_the_bounds() -> None:
    with pytest.raises(ValueError, match="empty integer range: 5 to 4"):
        integer_range(5, 4)
    with pytest.raises(ValueError, match="empty number range: 2 to 1"):
        number_range(2, 1)
