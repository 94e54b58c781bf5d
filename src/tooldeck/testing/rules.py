"""Which step answers a request: the rules first, then the list of steps, in order.

A rule answers the requests its predicate accepts (``when``) with its step (``then``): the
same step every time, or each step of a list once, in turn (then the rule is spent). A
request no rule takes gets the next step of the list; when none is left, the simulator
answers HTTP 500 naming the request, and records it (``ProviderSimulator.unscripted``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FunctionType

from tooldeck.testing.request import SimRequest
from tooldeck.testing.steps import STEP_TYPES, Step, StepLike

Predicate = Callable[[SimRequest], bool]
"""A test of a request: ``last_user_contains("refund")``, or any function of a SimRequest."""


@dataclass(frozen=True, slots=True)
class Rule:
    """Answer the requests ``when`` accepts with ``then`` (see ``rule``)."""

    when: Predicate
    then: tuple[StepLike, ...]
    repeat: bool
    """The one step of ``then`` answers every match (``times`` None)."""
    times: int | None
    """How many requests the rule answers at most; None: no limit."""
    name: str = ""


def rule(when: Predicate, then: StepLike | Sequence[StepLike], *, times: int | None = None) -> Rule:
    """A rule: requests ``when`` accepts are answered by ``then``.

    ``then`` is a step (it answers every match, or ``times`` matches), a function of the
    request returning one, or a list of steps (each answers one match, in order; then the
    rule is spent).

    Examples:
        >>> from tooldeck.testing import call, reply
        >>> r = rule(last_user_contains("refund"), call("refund_order", {"order_id": "A1"}))
        >>> r.times is None
        True
    """
    if not callable(when):
        raise TypeError(f"rule(when=...) takes a function of the request, got {when!r}")
    listed = isinstance(then, Sequence)
    steps: tuple[StepLike, ...] = tuple(then) if isinstance(then, Sequence) else (then,)
    if not steps:
        raise ValueError("rule(then=...) needs a step, or a list of at least one")
    for step in steps:
        _check_step(step, "rule(then=...)")
    if times is not None and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
        raise ValueError(f"rule(times=...) is a count >= 1 or None, got {times!r}")
    if listed and times is not None:
        raise ValueError("rule(times=...) goes with one step; a list answers once per step")
    name = when.__name__ if isinstance(when, FunctionType) else repr(when)
    return Rule(when, steps, not listed, len(steps) if listed else times, name)


def _check_step(step: object, where: str) -> None:
    if not (isinstance(step, STEP_TYPES) or callable(step)):
        raise TypeError(
            f"{where} takes steps made by reply(), call() or fail.*(), or a function of the "
            f"request returning one; got {step!r}"
        )


def last_user_contains(text: str) -> Predicate:
    """The request ends with a user message containing ``text`` (any case): a new prompt,
    not the tool results after it."""
    wanted = text.casefold()

    def accepts(request: SimRequest) -> bool:
        last = request.last
        return last is not None and last.role == "user" and wanted in last.text.casefold()

    accepts.__name__ = f"last_user_contains({text!r})"
    return accepts


def last_tool_result_contains(text: str) -> Predicate:
    """The request ends with tool results, one of which contains ``text`` (any case)."""
    wanted = text.casefold()

    def accepts(request: SimRequest) -> bool:
        return any(wanted in result.text.casefold() for result in request.trailing_results)

    accepts.__name__ = f"last_tool_result_contains({text!r})"
    return accepts


def after_tool(name: str) -> Predicate:
    """The request ends with the result of a call of the tool ``name``."""

    def accepts(request: SimRequest) -> bool:
        results = request.trailing_results
        before = request.messages[: len(request.messages) - len(results)]
        if not results or not before or before[-1].role != "assistant":
            return False
        return any(called == name for called, _ in before[-1].tool_calls)

    accepts.__name__ = f"after_tool({name!r})"
    return accepts


class Script:
    """The rules and the list, and what each has left; safe to ask from any thread."""

    def __init__(self, steps: Sequence[StepLike], rules: Sequence[Rule]) -> None:
        for index, step in enumerate(steps, 1):
            _check_step(step, f"step {index}")
        for given in rules:
            if not isinstance(given, Rule):
                raise TypeError(f"rules=[...] takes rule(when=..., then=...), got {given!r}")
        self._steps = list(steps)
        self._next = 0
        self._rules = list(rules)
        self._used = [0] * len(self._rules)
        self._lock = threading.Lock()

    @property
    def steps_left(self) -> int:
        """Steps of the list not used yet (rules not counted)."""
        return len(self._steps) - self._next

    def add(self, steps: Sequence[StepLike]) -> None:
        """Append steps to the list (checked first)."""
        for index, step in enumerate(steps, len(self._steps) + 1):
            _check_step(step, f"step {index}")
        with self._lock:
            self._steps.extend(steps)

    def take(self, request: SimRequest) -> StepLike | None:
        """The step that answers ``request``, or None when no rule and no step is left."""
        with self._lock:
            for index, given in enumerate(self._rules):
                if self._spent(index) or not given.when(request):
                    continue
                used = self._used[index]
                self._used[index] = used + 1
                return given.then[0] if given.repeat else given.then[used]
            if self._next < len(self._steps):
                self._next += 1
                return self._steps[self._next - 1]
            return None

    def _spent(self, index: int) -> bool:
        limit = self._rules[index].times
        return limit is not None and self._used[index] >= limit

    def exhausted(self, request: SimRequest) -> str:
        """Why nothing answered ``request``, naming it."""
        spent = [r.name for i, r in enumerate(self._rules) if self._spent(i)]
        rules = f"; {len(self._rules)} rule(s), none matched" if self._rules else ""
        spent_note = f" (spent: {', '.join(spent)})" if spent else ""
        return (
            f"no step left for {request.describe()}: the list's {len(self._steps)} step(s) "
            f"are used{rules}{spent_note}"
        )


def resolve(step: StepLike, request: SimRequest) -> Step:
    """The step itself, or what a step function returns for ``request`` (checked)."""
    if isinstance(step, STEP_TYPES):
        return step
    made = step(request)
    if not isinstance(made, STEP_TYPES):
        raise TypeError(
            f"a step function returned {made!r} for {request.describe()}: it must return "
            "reply(...), call(...) or fail.*(...)"
        )
    return made
