"""Middleware: hooks around each model request and each tool call of a run — a
``Capability`` with only those hooks (``tooldeck.run.capabilities``).

``Agent(middleware=[a, b])`` runs the before-hooks in list order (``a`` first) and the
after-hooks in reverse order (``a`` last), like layers around the model and the tools.
A before-hook may answer in the model's or the tool's place: the layers inside it (and the
model or tool) are skipped, the after-hooks of the layers outside it still run. A hook that
raises, or returns something that is not what it must return, ends the run with
``MiddlewareError`` (a RunStopped: ``.result`` holds the run so far); nothing is dropped
silently. An agent without middleware pays nothing for this module.

Examples:
    >>> from tooldeck import Agent, AssistantOutput, ScriptedModel
    >>> from tooldeck.run.middleware import Middleware
    >>> class Canned(Middleware):
    ...     async def before_request(self, request, ctx):
    ...         return AssistantOutput(content="answered by middleware")
    >>> Agent(ScriptedModel([]), middleware=[Canned()]).run_sync("Hi").answer
    'answered by middleware'
"""

from __future__ import annotations

from collections.abc import Iterable

from tooldeck.run.capabilities import Capability, ModelCall, RequestContext

__all__ = ["Middleware", "ModelCall", "RequestContext", "checked_middleware"]


class Middleware(Capability):
    """Subclass and override the hooks you need (each one ``async``); the others pass
    through: ``before_request``, ``after_response``, ``before_tool_call``,
    ``after_tool_call`` (or ``wrap_call``, around the whole call)."""


def checked_middleware(items: Iterable[object]) -> tuple[Middleware, ...]:
    """``Agent(middleware=...)``: Middleware objects only, as the keyword always took."""
    checked: list[Middleware] = []
    for item in items:
        if not isinstance(item, Middleware):
            raise TypeError(
                "middleware must be Middleware objects (subclass "
                f"tooldeck.run.middleware.Middleware), got {item!r}"
            )
        checked.append(item)
    return tuple(checked)
