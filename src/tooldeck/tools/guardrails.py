"""What a guardrail returns (``GuardrailResult``) and the guardrails of a tool (``ToolGuardrail``).

A guardrail is a function, sync or async, of the run's ``RunContext`` and what it judges:
the prompt, the answer, a call's validated arguments or a call's result. It returns a
``GuardrailResult``: passed, tripped (the run stops), refused (a tool's call does not run;
the model reads ``error[refused]: <message>``) or replaced (the call runs with other
arguments, or the model reads another result). The agent-level ones and how a run applies
them are in ``tooldeck.run.guardrails``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from tooldeck.errors import ToolDefinitionError
from tooldeck.messages import ToolResult
from tooldeck.tools.context import RunContext

Verdict = Literal["passed", "tripped", "refused", "replaced"]


@dataclass(frozen=True, slots=True)
class GuardrailResult:
    """A guardrail's verdict; make one with ``passed()``, ``tripped()``, ``refused()`` or
    ``replaced()``.

    Example:
        >>> from tooldeck.run.guardrails import GuardrailResult
        >>> GuardrailResult.tripped("the prompt asks for a password").verdict
        'tripped'
    """

    verdict: Verdict
    message: str = ""
    """Why, for the host (and for the model, when a call is refused or an answer retried)."""
    data: Any = None
    """Anything the guardrail found, handed to the host (``GuardrailTripped.data``, the
    ``GuardrailChecked`` event)."""
    replacement: Any = None
    """For ``replaced``: the new arguments (a dict, validated again) or the new result."""

    @classmethod
    def passed(cls) -> GuardrailResult:
        """Nothing to object to: the run goes on."""
        return _PASSED

    @classmethod
    def tripped(cls, message: str, data: Any = None) -> GuardrailResult:
        """Stop the run (``GuardrailTripped``, ``stop_reason == "guardrail"``); an output
        guardrail with ``retry=True`` asks the model again with ``message`` instead."""
        return cls("tripped", message, data)

    @classmethod
    def refused(cls, message: str, data: Any = None) -> GuardrailResult:
        """A tool guardrail only: the call does not run (on its arguments) or its result is
        withheld (on its result); the model reads ``error[refused]: <message>``."""
        return cls("refused", message, data)

    @classmethod
    def replaced(cls, replacement: Any, message: str = "") -> GuardrailResult:
        """A tool guardrail only: on the arguments, a dict the call runs with instead
        (validated again); on the result, the text or ``ToolResult`` the model reads instead."""
        return cls("replaced", message, None, replacement)


_PASSED = GuardrailResult("passed")

ArgumentsCheck = Callable[
    [RunContext[Any], dict[str, Any]], GuardrailResult | Awaitable[GuardrailResult]
]
"""Judges a call's validated arguments, before approval."""
ResultCheck = Callable[[RunContext[Any], ToolResult], GuardrailResult | Awaitable[GuardrailResult]]
"""Judges a call's result, before the model reads it."""


@dataclass(frozen=True, slots=True)
class ToolGuardrail:
    """The guardrail of a tool's calls: on the validated arguments (before a person is asked
    to approve the call), on the result (before the model reads it), or both.

    A plain function given in ``@tool(guardrails=[...])`` or ``Agent(tool_guardrails=[...])``
    is an ``arguments`` check.
    """

    arguments: ArgumentsCheck | None = None
    result: ResultCheck | None = None
    name: str = ""
    """Its name in traces and logs (default: the function's name)."""

    @classmethod
    def of(cls, item: ToolGuardrail | ArgumentsCheck, where: str) -> ToolGuardrail:
        """``item`` as a ToolGuardrail, named; ``where`` names its owner for the error."""
        if isinstance(item, ToolGuardrail):
            check = item.arguments or item.result
            if check is None:
                raise ToolDefinitionError(f"{where}: a ToolGuardrail needs arguments= or result=")
            if item.name:
                return item
            return cls(item.arguments, item.result, _name_of(check))
        if not callable(item):
            raise ToolDefinitionError(
                f"{where}: a guardrail must be a function (ctx, arguments) -> GuardrailResult "
                f"or a ToolGuardrail, got {item!r}"
            )
        return cls(item, None, _name_of(item))


def _name_of(function: Callable[..., Any]) -> str:
    return str(getattr(function, "__name__", type(function).__name__))
