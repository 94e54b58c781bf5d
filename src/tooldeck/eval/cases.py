"""What one evaluation case is: a conversation, the tools it offers, and what is expected.

A case comes from a suite (``tooldeck.eval.bfcl``) or from a user's case file
(``tooldeck.eval.casefile``); ``run_eval`` runs it on a model and scores it. What is
expected is one of:

- ``ExpectCalls``: the first turn makes exactly these calls, each argument one of its
  acceptable values (BFCL's possible-answers form ``{name: {param: [values]}}``);
- ``ExpectDecision``: the first turn makes no call (``call=False``), or any call (``True``);
- ``ExpectAnswer``: the run, carried to its end with the real tools, answers with text that
  passes a check (contains, equals or matches a pattern);
- ``ExpectOutput``: the run ends with a typed answer of a type (and equal to a value).

The first two score the model's first turn only (its calls run against stubs); the last two
run the whole conversation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooldeck.messages import Message
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.registry import ToolEntry


@dataclass(frozen=True, slots=True)
class ExpectCalls:
    """The first turn makes exactly these calls."""

    calls: tuple[Mapping[str, Mapping[str, list[Any]]], ...]
    """``{name: {param: [acceptable values]}}`` per call; ``""`` among the values means
    the parameter may be left out, and a parameter not listed must not be passed."""
    any_order: bool = True
    """Match the calls in any order (greedily, as BFCL's ``parallel*`` categories do)."""


@dataclass(frozen=True, slots=True)
class ExpectDecision:
    """The first turn makes no call (``call=False``) or any call at all (``call=True``)."""

    call: bool


@dataclass(frozen=True, slots=True)
class ExpectAnswer:
    """The run ends with an answer whose text passes every check given."""

    contains: str | None = None
    """Found in the answer, case and spacing aside."""
    equals: str | None = None
    """The whole answer, surrounding spaces and case aside."""
    matches: str | None = None
    """A regular expression found in the answer (``re.search``)."""

    def problem(self, answer: str) -> str:
        """Why ``answer`` fails the checks, or ``""`` when it passes them."""
        folded = " ".join(answer.split()).casefold()
        if self.contains is not None and " ".join(self.contains.split()).casefold() not in folded:
            return f"the answer does not contain {self.contains!r}"
        if self.equals is not None and folded != " ".join(self.equals.split()).casefold():
            return f"the answer is not {self.equals!r}"
        if self.matches is not None and re.search(self.matches, answer) is None:
            return f"the answer does not match {self.matches!r}"
        return ""


@dataclass(frozen=True, slots=True)
class ExpectOutput:
    """The run ends with a typed answer of ``output_type`` (equal to ``equals`` if given)."""

    output_type: type[Any]
    equals: Any = None
    """The expected value as JSON (a typed answer is compared by its JSON form); None: any."""


Expectation = ExpectCalls | ExpectDecision | ExpectAnswer | ExpectOutput
"""What a case expects of the model: calls, a decision, an answer, or a typed output."""


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One conversation to run, its tools, and what is expected of the model."""

    id: str
    """Unique within its suite."""
    suite: str
    """Where the case comes from: ``bfcl:simple_python``, or a case file's path."""
    category: str
    """What accuracy is grouped by (a BFCL category, or a case file's own labels)."""
    messages: tuple[Message, ...]
    """The conversation; the last message is the user's."""
    tools: tuple[ToolEntry, ...]
    expect: Expectation
    instructions: str = ""
    functions: tuple[Mapping[str, Any], ...] = ()
    """Each tool's parameters as the scorer reads them: ``{"name", "parameters"}`` under the
    name the expected calls use (BFCL's own function definitions for BFCL cases)."""
    scoring_tools: tuple[FunctionTool[..., Any], ...] = ()
    """Tools that read a call's arguments as the JSON values the scorer compares, where
    ``tools`` would give Python objects (a Python function's tool: its JSON Schema twin)."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Tool name -> the name the expected calls use, where they differ (BFCL's dotted names)."""
    parallel: bool | None = None
    """``ModelSettings.parallel_tool_calls`` for the case (None: the model's default)."""
    tool_search: bool = False
    """Its tools are deferred and found with ``tooldeck.search.ToolSearch``: the model may
    search a few times, and its first turn that calls another tool is the one scored
    (``bfcl:many_tools``)."""
    code_mode: bool = False
    """Its tools are called from a Python program: they are shown behind
    ``tooldeck.code.CodeMode``'s ``run_code`` instead of one call at a time (``--tools code``;
    only for a case run to its end)."""

    @property
    def key(self) -> tuple[str, str]:
        """(suite, id): what identifies the case in stored results."""
        return self.suite, self.id

    @property
    def expects_call(self) -> bool | None:
        """Whether the first turn should call a tool (None: the case does not say)."""
        if isinstance(self.expect, ExpectCalls):
            return True
        if isinstance(self.expect, ExpectDecision):
            return self.expect.call
        return None

    @property
    def first_turn_only(self) -> bool:
        """Whether only the first turn is scored (its calls run against stubs)."""
        return isinstance(self.expect, ExpectCalls | ExpectDecision)

    def expected_calls(self) -> Sequence[Mapping[str, Any]]:
        """The expected calls in BFCL's form (empty unless the case expects calls)."""
        return self.expect.calls if isinstance(self.expect, ExpectCalls) else ()
