"""Scoring what a model did on a case: its first turn's calls, or the end of its run.

Calls are scored on the arguments the tool receives: tooldeck's strict schema form makes
the model write ``null`` for an optional parameter it leaves out, and validation turns that
``null`` back into "absent" (a Python function's tool is read through the JSON Schema it
shows, so its arguments stay JSON values). By BFCL's rule a turn with a call whose
arguments do not parse made no call; the stricter verdict (every call made counts) is kept
beside it when the two differ.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tooldeck.errors import InvalidArguments
from tooldeck.eval.cases import EvalCase, ExpectAnswer, ExpectCalls, ExpectDecision, ExpectOutput
from tooldeck.eval.scoring import Call, Verdict, score_calls, score_decision
from tooldeck.messages import Message

Made = tuple[str, Any]
"""A call as made: the tool name and its arguments (a dict, or the raw text that did not
parse)."""


@dataclass(frozen=True, slots=True)
class Judged:
    """The verdict on a case, before timing and usage are added."""

    correct: bool
    reason: str
    strict: bool | None
    valid_calls: int
    made: list[dict[str, Any]]


def judge_first_turn(case: EvalCase, made: Sequence[Made], error: str) -> Judged:
    """The first turn's calls against what the case expects (calls, no call, any call)."""
    scored = [scored_call(case, name, arguments) for name, arguments in made]
    verdict = _score(case, [call for call, _ in scored])
    unparsed = any(not isinstance(arguments, dict) for _, arguments in made)
    strict = verdict.correct and not error and not unparsed
    # BFCL decodes a turn as a whole: when a call in it does not parse, it made no call.
    correct = strict if not unparsed else _score(case, []).correct and not error
    reason = error or ("arguments did not parse" if unparsed else verdict.reason)
    return Judged(
        correct=correct,
        reason=reason,
        strict=None if strict == correct else strict,
        valid_calls=sum(valid for _, valid in scored),
        made=[{"name": name, "arguments": arguments} for name, arguments in made],
    )


def judge_run_end(
    case: EvalCase, made: Sequence[Made], answer: str, output: Any, error: str
) -> Judged:
    """The end of a whole run against the case's answer check or expected typed output."""
    problem = error or _end_problem(case, answer, output)
    return Judged(
        correct=not problem,
        reason=problem,
        strict=None,
        valid_calls=sum(valid for _, valid in (scored_call(case, n, a) for n, a in made)),
        made=[{"name": name, "arguments": arguments} for name, arguments in made],
    )


def _end_problem(case: EvalCase, answer: str, output: Any) -> str:
    expect = case.expect
    if isinstance(expect, ExpectAnswer):
        return expect.problem(answer)
    if isinstance(expect, ExpectOutput):
        if output is None:
            return "the run ended without a typed answer"
        if expect.equals is not None and as_json(output) != expect.equals:
            return f"the answer {as_json(output)!r} is not {expect.equals!r}"
    return ""


def _score(case: EvalCase, calls: Sequence[Call]) -> Verdict:
    expect = case.expect
    if isinstance(expect, ExpectDecision):
        return score_decision(expect.call, calls)
    if isinstance(expect, ExpectCalls):
        return score_calls(case.functions, calls, expect.calls, expect.any_order)
    raise TypeError(f"case {case.id!r} is not scored on its first turn")


def scored_call(case: EvalCase, name: str, arguments: Any) -> tuple[Call, bool]:
    """The call under the name the expected calls use, with the arguments the tool
    receives, and whether it is a valid call of one of the case's tools."""
    shown_name = case.names.get(name, name)
    entry = next((entry for entry in case.tools if entry.name == name), None)
    if entry is None or not isinstance(arguments, dict):
        return Call(shown_name, arguments if isinstance(arguments, dict) else {}), False
    try:
        received = entry.handler.validate(arguments)
    except InvalidArguments:
        return Call(shown_name, arguments), False
    twin = next((tool for tool in case.scoring_tools if tool.name == name), None)
    return Call(shown_name, received if twin is None else twin.validate(arguments)), True


def expected_shown(case: EvalCase) -> list[Any]:
    """What the case expects, for the report: calls in BFCL's form, or a check as text."""
    expect = case.expect
    if isinstance(expect, ExpectCalls):
        return [dict(call) for call in expect.calls]
    if isinstance(expect, ExpectDecision):
        return ["any call" if expect.call else "no call"]
    if isinstance(expect, ExpectAnswer):
        checks = {"contains": expect.contains, "equals": expect.equals, "matches": expect.matches}
        return [{"answer": {k: v for k, v in checks.items() if v is not None}}]
    return [{"output": expect.output_type.__name__, "equals": expect.equals}]


def as_json(value: Any) -> Any:
    """A typed answer as JSON values (a pydantic model or dataclass by its fields)."""
    from pydantic import TypeAdapter

    return json.loads(TypeAdapter(type(value)).dump_json(value))


def made_calls(messages: Sequence[Message]) -> list[Made]:
    """The calls of assistant messages: arguments, or the raw text when they did not parse."""
    return [
        (c.name, c.arguments if c.raw_arguments is None else c.raw_arguments)
        for message in messages
        if message.role == "assistant"
        for c in message.tool_calls
    ]


def first_calls(messages: Sequence[Message], search: str | None = None) -> tuple[list[Made], str]:
    """The calls and text of the first assistant message among ``messages``; with
    ``search`` (the search tool's name), of the first that does more than call it, its
    searches left out (a case whose tools are found by search is scored on its first turn
    that calls one)."""
    first = scored_turn(messages, search)
    if first is None:
        return [], ""
    made = made_calls([first])
    return [call for call in made if call[0] != search], first.content


def scored_turn(messages: Sequence[Message], search: str | None = None) -> Message | None:
    """The first assistant message among ``messages`` (with ``search``: the first that does
    more than call the search tool)."""
    for message in messages:
        if message.role != "assistant":
            continue
        calls = message.tool_calls
        if search is None or not calls or any(call.name != search for call in calls):
            return message
    return None
