"""Middleware: hooks around each model request and each tool call of a run.

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

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from tooldeck.errors import InvalidArguments, MiddlewareError
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult, ToolSpec
from tooldeck.models.base import ModelSettings
from tooldeck.results import PendingCall, ToolTrace
from tooldeck.tools.context import RunContext


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model request as middleware sees it; return a changed copy (``dataclasses.replace``)."""

    messages: tuple[Message, ...]
    """The conversation to send."""
    settings: ModelSettings
    """Tool choice and sampling for this request (e.g. ``settings.with_tool_choice("none")``)."""
    instructions: str
    """The system prompt."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What middleware may read about a model request (read only)."""

    round: int
    """The round this request starts, counting from 1."""
    run_id: str
    deps: Any
    """The run's ``deps``."""
    tools: tuple[ToolSpec, ...]
    """The tools the model is shown in this request."""


class Middleware:
    """Subclass and override the hooks you need (each one ``async``); the others pass through."""

    async def before_request(
        self, request: ModelCall, ctx: RequestContext
    ) -> ModelCall | AssistantOutput:
        """See or change a request; return an AssistantOutput to answer in the model's place."""
        return request

    async def after_response(
        self, request: ModelCall, output: AssistantOutput, ctx: RequestContext
    ) -> AssistantOutput:
        """See or change what the model returned for ``request``."""
        return output

    async def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> ToolCall | ToolResult:
        """See a call whose arguments passed validation. Return it, a copy with other
        arguments (``call.model_copy(update={"arguments": ...})``, validated again), or a
        ToolResult to answer in the tool's place (the tool does not run)."""
        return call

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
    ) -> ToolResult:
        """See or change the result the model will read for ``call`` (the call as it ran)."""
        return result


T = TypeVar("T")

_HOOKS = ("before_request", "after_response", "before_tool_call", "after_tool_call")

RunCall = Callable[[ToolCall], Awaitable[ToolTrace | PendingCall]]
"""Runs a call (validating its arguments again when a middleware changed them)."""


class MiddlewareStack:
    """An agent's middleware, applied by the loop around each model request and tool call."""

    def __init__(self, items: Iterable[Middleware]) -> None:
        self.items = tuple(items)
        for item in self.items:
            _check(item)

    async def ask(
        self,
        request: ModelCall,
        ctx: RequestContext,
        complete: Callable[[ModelCall], Awaitable[AssistantOutput]],
    ) -> AssistantOutput:
        """The model's output for ``request``, through every layer (``complete`` asks the model)."""
        passed: list[Middleware] = []
        output: AssistantOutput | None = None
        for item in self.items:
            changed = await _hook(item, "before_request", item.before_request(request, ctx))
            if isinstance(changed, AssistantOutput):
                output = changed
                break
            request = _expect(item, "before_request", changed, ModelCall, "a ModelCall")
            passed.append(item)
        if output is None:
            output = await complete(request)
        for item in reversed(passed):
            got = await _hook(item, "after_response", item.after_response(request, output, ctx))
            output = _expect(item, "after_response", got, AssistantOutput, "an AssistantOutput")
        return output

    async def call_tool(
        self, call: ToolCall, ctx: RunContext[Any], run: RunCall, *, before: bool = True
    ) -> ToolTrace | PendingCall:
        """Run ``call`` through every layer. ``before=False`` (a paused agent tool going on)
        skips the before-hooks, which saw the call when it started."""
        passed: list[Middleware] = [] if before else list(self.items)
        answered: ToolResult | None = None
        changed_by: Middleware | None = None
        for item in self.items if before else ():
            returned = await _hook(item, "before_tool_call", item.before_tool_call(call, ctx))
            if isinstance(returned, ToolResult):
                answered = returned
                break
            checked = _same_call(item, call, returned)
            if checked.arguments != call.arguments:
                changed_by = item
            call = checked
            passed.append(item)
        if answered is None:
            ran = await _run_changed(call, run, changed_by)
            if isinstance(ran, PendingCall):
                return ran
            trace = ran
        else:
            trace = ToolTrace(call=call, result=answered, duration_s=0.0)
        result = trace.result
        for item in reversed(passed):
            returned = await _hook(item, "after_tool_call", item.after_tool_call(call, result, ctx))
            result = _expect(item, "after_tool_call", returned, ToolResult, "a ToolResult")
        return trace if result is trace.result else trace.model_copy(update={"result": result})


async def _run_changed(
    call: ToolCall, run: RunCall, changed_by: Middleware | None
) -> ToolTrace | PendingCall:
    try:
        return await run(call)
    except InvalidArguments as error:  # only arguments a middleware changed are validated here
        name = type(changed_by).__name__
        raise MiddlewareError(
            f"middleware {name} changed the arguments of {call.name!r} (call {call.id!r}) into "
            f"ones its schema refuses: {error}",
            name,
            "before_tool_call",
        ) from error


def _check(item: object) -> None:
    if not isinstance(item, Middleware):
        raise TypeError(
            f"middleware must be Middleware objects (subclass tooldeck.run.middleware.Middleware), "
            f"got {item!r}"
        )
    for hook in _HOOKS:
        if not inspect.iscoroutinefunction(getattr(type(item), hook)):
            raise TypeError(
                f"{type(item).__name__}.{hook} must be an async method (async def {hook}...)"
            )


async def _hook(item: Middleware, hook: str, pending: Awaitable[object]) -> object:
    """Await one hook; whatever it raises becomes a MiddlewareError naming it."""
    try:
        return await pending
    except Exception as error:
        name = type(item).__name__
        raise MiddlewareError(
            f"middleware {name} failed in {hook}: {type(error).__name__}: {error}", name, hook
        ) from error


def _expect(item: Middleware, hook: str, value: object, kind: type[T], what: str) -> T:
    if isinstance(value, kind):
        return value
    name = type(item).__name__
    raise MiddlewareError(
        f"middleware {name}.{hook} returned {type(value).__name__}, expected {what}", name, hook
    )


def _same_call(item: Middleware, call: ToolCall, returned: object) -> ToolCall:
    """The call a before-hook returned: the same call, perhaps with other arguments."""
    changed = _expect(item, "before_tool_call", returned, ToolCall, "the ToolCall or a ToolResult")
    if changed.id != call.id or changed.name != call.name:
        name = type(item).__name__
        raise MiddlewareError(
            f"middleware {name}.before_tool_call changed the call's id or tool name "
            f"({call.id!r} {call.name!r} -> {changed.id!r} {changed.name!r}); it may change "
            "the arguments only",
            name,
            "before_tool_call",
        )
    return changed
