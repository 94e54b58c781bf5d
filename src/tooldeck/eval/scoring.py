"""Scoring tool calls the way BFCL's AST checker does (Berkeley Function Calling Leaderboard).

The rules, from the data's README (``tooldeck/eval/bfcl/data/README.md``):

- the function name must match exactly, and the number of calls must match;
- required parameters present; no parameter outside the schema *and* the ground truth;
- types exact: ``bool`` is not ``int``, ``"5"`` is not ``5``, ``5.0`` fails an integer; the
  only coercion is int -> float for float parameters (BFCL's checker also turns a Python
  tuple given for a ``tuple`` parameter into a list: JSON never yields a tuple, so that
  step has nothing to do here). A value of the ground truth's own type is accepted too,
  where that differs from the declared type (BFCL reads such a ground truth as a variable
  name);
- strings compared after removing `` ,./-_*^``, lower-casing and ``'`` -> ``"``, also inside
  lists and dicts; other values by equality, no float tolerance;
- an optional parameter may be left out only when its acceptable values include ``""``;
- ``parallel*`` categories: calls matched to the ground truth in any order, greedily (each
  expected call takes the first unmatched call that fits; no backtracking, as in BFCL);
- irrelevance: making no call is right; live_relevance: making any call is right. BFCL
  decodes a turn as a whole, so a turn with a call whose arguments do not parse made no
  call (``tooldeck.eval.judge`` applies that, and reports the stricter verdict beside it).

``score`` takes a BFCL record; ``score_calls`` the same rules for any expected calls (a
user's case file): ``functions`` there describe each tool's parameters with JSON Schema
type names, which the rules read like BFCL's (``number`` is a float, ``object`` a dict).

Values are the JSON the model sent. Java/JavaScript parameters are scored on typed values
(tooldeck shows the model the converted, typed schema; BFCL instead asks for source-code
strings and parses them), so those categories are not comparable with BFCL's own numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PYTHON_TYPES: Mapping[str, type] = {
    **dict.fromkeys(("string", "String", "char", "any", "Any", ""), str),
    **dict.fromkeys(("integer", "int", "long", "short", "byte", "Bigint"), int),
    **dict.fromkeys(("float", "double", "number"), float),
    **dict.fromkeys(("boolean", "bool", "Boolean"), bool),
    **dict.fromkeys(
        ("array", "list", "tuple", "Array", "ArrayList", "Queue", "Stack", "Set"), list
    ),
    **dict.fromkeys(("dict", "object", "HashMap", "Hashtable"), dict),
}
"""BFCL type name -> the Python type of a correct value (after ``json.loads``)."""

_FLOAT_TYPES = frozenset({"float", "double", "number"})
_PUNCTUATION = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True, slots=True)
class Call:
    """One call the model made, under the BFCL function name."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a case's calls are right, and if not, the first reason."""

    correct: bool
    reason: str = ""

    @classmethod
    def ok(cls) -> Verdict:
        """Right."""
        return cls(True)

    @classmethod
    def wrong(cls, reason: str) -> Verdict:
        """Wrong, and why."""
        return cls(False, reason)


def standardize(text: str) -> str:
    """BFCL's string normalisation: ``"April 1, 2024"`` -> ``"april12024"``."""
    return _PUNCTUATION.sub("", text).lower().replace("'", '"')


def score(record: Mapping[str, Any], calls: Sequence[Call]) -> Verdict:
    """Score the calls the model made for one BFCL record (its first turn)."""
    if record.get("ground_truth") is None:
        return score_decision(bool(record.get("expect_call")), calls)
    return score_calls(
        record["functions"], calls, record["ground_truth"], "parallel" in record["category"]
    )


def score_decision(expect_call: bool, calls: Sequence[Call]) -> Verdict:
    """A case where any call is right (``expect_call``), or where making none is."""
    if expect_call:
        return Verdict.ok() if calls else Verdict.wrong("no call was made")
    if not calls:
        return Verdict.ok()
    return Verdict.wrong(f"made {len(calls)} call{'' if len(calls) == 1 else 's'}")


def score_calls(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    answers: Sequence[Mapping[str, Any]],
    any_order: bool,
) -> Verdict:
    """The calls made against the expected ones ``[{name: {param: [acceptable values]}}]``.

    ``any_order`` matches them greedily in any order (BFCL's ``parallel*`` rule); otherwise
    the n-th call is checked against the n-th expected call.
    """
    if len(calls) != len(answers):
        return Verdict.wrong(f"wrong number of calls: {len(calls)}, expected {len(answers)}")
    if any_order:
        return _match_any_order(functions, calls, answers)
    for number, (call, answer) in enumerate(zip(calls, answers, strict=True)):
        verdict = check_call(_function(functions, answer), call, answer)
        if not verdict.correct:
            prefix = f"call {number}: " if len(answers) > 1 else ""
            return Verdict.wrong(prefix + verdict.reason)
    return Verdict.ok()


def _match_any_order(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    answers: Sequence[Mapping[str, Any]],
) -> Verdict:
    taken: set[int] = set()
    for number, answer in enumerate(answers):
        function = _function(functions, answer)
        reasons = []
        for index, call in enumerate(calls):
            if index in taken:
                continue
            verdict = check_call(function, call, answer)
            if verdict.correct:
                taken.add(index)
                break
            reasons.append(f"call {index}: {verdict.reason}")
        else:
            return Verdict.wrong(f"no call matches expected call {number}: " + "; ".join(reasons))
    return Verdict.ok()


def _function(
    functions: Sequence[Mapping[str, Any]], answer: Mapping[str, Any]
) -> Mapping[str, Any]:
    name = next(iter(answer))
    return next((f for f in functions if f["name"] == name), functions[0])


def check_call(function: Mapping[str, Any], call: Call, answer: Mapping[str, Any]) -> Verdict:
    """One call against one expected call ``{name: {param: [acceptable values]}}``."""
    ((expected_name, accepted),) = answer.items()
    if call.name != expected_name:
        return Verdict.wrong(f"function {call.name!r}, expected {expected_name!r}")
    parameters: Mapping[str, Any] = function["parameters"].get("properties", {})
    for name in function["parameters"].get("required", []):
        if name not in call.arguments:
            return Verdict.wrong(f"missing required parameter {name!r}")
    for name, value in call.arguments.items():
        if name not in parameters or name not in accepted:
            return Verdict.wrong(f"unexpected parameter {name!r}")
        problem = check_value(name, value, parameters[name], accepted[name])
        if problem:
            return Verdict.wrong(problem)
    for name, values in accepted.items():
        if name not in call.arguments and "" not in values:
            return Verdict.wrong(f"parameter {name!r} left out, but it is not optional")
    return Verdict.ok()


def check_value(name: str, value: Any, parameter: Mapping[str, Any], accepted: list[Any]) -> str:
    """The reason ``value`` is wrong for a parameter, or ``""`` when it is right."""
    declared = parameter.get("type") or ""
    expected = PYTHON_TYPES.get(declared, str)
    if declared in _FLOAT_TYPES and type(value) is int:
        value = float(value)
    answer_type = next((type(a) for a in accepted if a != ""), None)
    as_variable = answer_type is not None and answer_type is not expected
    if type(value) is not expected:
        if as_variable and type(value) is answer_type:
            return _literal(name, value, accepted)
        return f"{name!r}: type {type(value).__name__}, expected {declared or 'string'}"
    item_type = _item_type(parameter) if isinstance(value, list) else None
    typed = item_type is None or (
        isinstance(value, list) and _items_typed(value, item_type, accepted)
    )
    if not typed:
        return f"{name!r}: an item has the wrong type, expected {parameter['items'].get('type')}"
    if as_variable:
        return _literal(name, value, accepted)
    if isinstance(value, dict):
        return _dict_matches(name, value, accepted)
    if isinstance(value, list) and item_type is dict:
        return _dict_list_matches(name, value, accepted)
    if expected in (str, list):
        return _normalised(name, value, accepted)
    return _literal(name, value, accepted)


def _item_type(parameter: Mapping[str, Any]) -> type | None:
    items = parameter.get("items")
    if not isinstance(items, Mapping):
        return None
    return PYTHON_TYPES.get(items.get("type") or "", str)


def _items_typed(value: list[Any], item_type: type, accepted: list[Any]) -> bool:
    """BFCL's one-level item check: some acceptable list (or a non-list answer) admits the items."""
    for answer in accepted:
        if not isinstance(answer, list):
            return True
        if all(_item_fits(item, item_type, answer) for item in value):
            return True
    return False


def _item_fits(item: Any, item_type: type, answer: list[Any]) -> bool:
    if type(item) is item_type:
        return True
    answer_type = next((type(a) for a in answer if a != ""), None)
    return answer_type is not None and type(item) is answer_type


def _normal(value: Any) -> Any:
    """Strings standardised, and the string items of a list (one level, as BFCL does)."""
    if isinstance(value, str):
        return standardize(value)
    if isinstance(value, list):
        return [standardize(v) if isinstance(v, str) else v for v in value]
    return value


def _text(value: Any) -> Any:
    return standardize(value) if isinstance(value, str) else value


def _normalised(name: str, value: Any, accepted: list[Any]) -> str:
    # BFCL reads an acceptable "" as an empty list when the value is a list.
    options = [[] if a == "" and isinstance(value, list) else a for a in accepted]
    if _normal(value) in [_normal(option) for option in options]:
        return ""
    return f"{name!r}: {value!r} is not one of {accepted!r}"


def _literal(name: str, value: Any, accepted: list[Any]) -> str:
    if value in accepted:
        return ""
    return f"{name!r}: {value!r} is not one of {accepted!r}"


def _dict_matches(name: str, value: dict[str, Any], accepted: list[Any]) -> str:
    reason = f"{name!r}: {value!r} matches no acceptable dict"
    for answer in accepted:
        if answer == "" or not isinstance(answer, dict):
            continue
        reason = _dict_problem(name, value, answer)
        if not reason:
            return ""
    return reason


def _dict_problem(name: str, value: dict[str, Any], answer: dict[str, Any]) -> str:
    for key, item in value.items():
        if key not in answer:
            return f"{name!r}: unexpected key {key!r}"
        options = answer[key] if isinstance(answer[key], list) else [answer[key]]
        if _text(item) not in [_text(option) for option in options]:
            return f"{name!r}: key {key!r} has {item!r}, expected one of {options!r}"
    for key, options in answer.items():
        listed = options if isinstance(options, list) else [options]
        if key not in value and "" not in listed:
            return f"{name!r}: missing key {key!r}"
    return ""


def _dict_list_matches(name: str, value: list[Any], accepted: list[Any]) -> str:
    reason = f"{name!r}: {value!r} matches no acceptable list"
    for answer in [[] if a == "" else a for a in accepted]:
        if not isinstance(answer, list) or len(answer) != len(value):
            reason = f"{name!r}: wrong number of dicts"
            continue
        problems = [
            _dict_problem(name, item, expected) if isinstance(item, dict) else "not a dict"
            for item, expected in zip(value, answer, strict=True)
        ]
        reason = next((p for p in problems if p), "")
        if not reason:
            return ""
    return reason
