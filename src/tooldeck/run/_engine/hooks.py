"""A run's capabilities, sorted by the hooks they override, and applied at those points.

``Hooks.of(capabilities)`` keeps only what overrides a hook, so a run pays for each point
(requests, calls, the answer, events, instructions, state) only when something is there;
``None`` when nothing is. Request hooks run in list order going in and reverse coming out,
like layers around the model; call hooks wrap the tool's handler the same way (the first
capability outermost). A hook that raises, or returns what it must not, ends the run with
``MiddlewareError`` naming it; ``RunStopped`` errors (a guardrail's trip) pass as they are.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar

from tooldeck.errors import InvalidArguments, MiddlewareError, RunStopped
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult
from tooldeck.results import PendingCall, RunResult, ToolTrace
from tooldeck.run.capabilities import (
    CALL_HOOKS,
    REQUEST_HOOKS,
    CallNext,
    Capability,
    ModelCall,
    RequestContext,
    RunView,
    overrides,
)
from tooldeck.run.events import Event
from tooldeck.tools.context import RunContext
from tooldeck.tools.registry import ToolView

T = TypeVar("T")

RunCall = Callable[[ToolCall], Awaitable[ToolTrace | PendingCall]]
"""Runs a call (validating its arguments again when a hook changed them)."""
_ASYNC_HOOKS = (*REQUEST_HOOKS, *CALL_HOOKS, "on_answer", "join_messages")


class _Paused(BaseException):
    """A tool that paused (an agent tool waiting on a person): out through every wrapper,
    whose after-parts do not run (they run when the call goes on)."""

    def __init__(self, pending: PendingCall) -> None:
        self.pending = pending


@dataclass(frozen=True, slots=True)
class Hooks:
    """The capabilities of a run (or an agent) by the points they hook."""

    items: tuple[Capability, ...]
    requests: tuple[Capability, ...]
    calls: tuple[Capability, ...]
    instructing: tuple[Capability, ...]
    answering: tuple[Capability, ...]
    watching: tuple[Capability, ...]
    stateful: tuple[Capability, ...]
    showing: tuple[Capability, ...] = ()
    """Those that change the tools a request shows (``show_tools``)."""
    joining: tuple[Capability, ...] = ()
    """Those that bring messages into the conversation while the run works
    (``join_messages``)."""

    @classmethod
    def of(cls, items: Iterable[Capability]) -> Hooks | None:
        """The hooks of ``items`` (each checked), None when none overrides a hook."""
        items = tuple(items)
        for item in items:
            check(item)

        def having(*hooks: str) -> tuple[Capability, ...]:
            return tuple(item for item in items if any(overrides(item, h) for h in hooks))

        hooks = cls(
            items,
            having(*REQUEST_HOOKS),
            having(*CALL_HOOKS),
            having("instructions"),
            having("on_answer"),
            having("on_event"),
            having("initial_state"),
            having("show_tools"),
            having("join_messages"),
        )
        return hooks if any(getattr(hooks, name) for name in _POINTS) else None

    @property
    def runs(self) -> bool:
        """Whether it hooks the run itself (instructions, the answer, events, state, the
        tools shown, messages joining)."""
        return bool(
            self.instructing
            or self.answering
            or self.watching
            or self.stateful
            or self.showing
            or self.joining
        )

    def start(
        self,
        view: RunView,
        states: dict[str, Any] | None,
        carried: Mapping[str, Any] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """As a run starts: the instructions its capabilities add, and its states (a resumed
        run's kept; a capability new to the run from ``carried``, the states the session's
        last committed run ended with, through ``next_run_state``, else ``initial_state``)."""
        states = {} if states is None else states
        for item in self.stateful:
            key = item.state_key
            if key in states:
                continue
            first = None
            if carried is not None and key in carried:
                last = copy.deepcopy(carried[key])
                then = _hooked(item, "next_run_state", item.next_run_state, last)
                if then is not None:
                    first = _expect(item, "next_run_state", then, dict, "a dict or None")
            if first is None:
                first = item.initial_state()
            if first is not None:
                states[key] = first
        view = RunView(view.run_id, view.agent, view.round, view.deps, view.messages, states)
        texts = [
            _hooked(item, "instructions", lambda i=item: i.instructions(view))
            for item in self.instructing
        ]
        return "\n\n".join(text for text in texts if text), states

    def shown(self, view: ToolView, ctx: RunView) -> ToolView:
        """The tools the next request shows, after every ``show_tools`` hook in turn."""
        for item in self.showing:
            got = _hooked(item, "show_tools", item.show_tools, view, ctx)
            view = _expect(item, "show_tools", got, ToolView, "a ToolView")
        return view

    async def ask(
        self,
        request: ModelCall,
        ctx: RequestContext,
        complete: Callable[[ModelCall], Awaitable[AssistantOutput]],
    ) -> AssistantOutput:
        """The model's output for ``request``, through every layer (``complete`` asks the model)."""
        passed: list[Capability] = []
        output: AssistantOutput | None = None
        for item in self.requests:
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
        """Run ``call`` through every call hook. ``before=False`` (a paused agent tool going
        on) skips the before-halves, which saw the call when it started."""
        ran: list[ToolTrace] = []
        seen = [call]

        async def innermost(sent: ToolCall) -> ToolResult:
            seen.append(sent)
            outcome = await run(sent)
            if isinstance(outcome, PendingCall):
                raise _Paused(outcome)
            ran.append(outcome)
            return outcome.result

        step: CallNext = innermost
        for item in reversed(self.calls):
            step = _layer(item, step, ctx, before)
        try:
            result = await step(call)
        except _Paused as paused:
            return paused.pending
        if not ran:  # answered in the tool's place
            return ToolTrace(call=seen[-1], result=result, duration_s=0.0)
        trace = ran[-1]
        return trace if result is trace.result else trace.model_copy(update={"result": result})

    async def answered(self, result: RunResult[Any], view: RunView) -> RunResult[Any]:
        """The run's answer after every ``on_answer`` hook."""
        for item in self.answering:
            got = await _hook(item, "on_answer", item.on_answer(result, view))
            result = _expect(item, "on_answer", got, RunResult, "a RunResult")
        return result

    async def joined(self, view: RunView) -> tuple[Message, ...]:
        """The messages every ``join_messages`` hook brings now, in list order: each must
        be a user Message."""
        messages: list[Message] = []
        for item in self.joining:
            got = await _hook(item, "join_messages", item.join_messages(view))
            if not isinstance(got, list | tuple) or not all(
                isinstance(message, Message) and message.role == "user" for message in got
            ):
                name = type(item).__name__
                raise MiddlewareError(
                    f"middleware {name}.join_messages returned {got!r}, expected a list of "
                    "user Messages (Message.user(...))",
                    name,
                    "join_messages",
                )
            messages.extend(got)
        return tuple(messages)

    async def told(
        self, events: AsyncGenerator[Event, None], view: Callable[[], RunView]
    ) -> AsyncGenerator[Event, None]:
        """``events``, each shown to every ``on_event`` hook first."""
        async with aclosing(events):
            async for event in events:
                seen = view()
                for item in self.watching:
                    _hooked(item, "on_event", item.on_event, event, seen)
                yield event


_POINTS = (
    "requests",
    "calls",
    "instructing",
    "answering",
    "watching",
    "stateful",
    "showing",
    "joining",
)


def _layer(item: Capability, inner: CallNext, ctx: RunContext[Any], before: bool) -> CallNext:
    """One capability's layer around ``inner``: its ``wrap_call``, or its two halves."""
    if overrides(item, "wrap_call"):

        async def wrapped(call: ToolCall) -> ToolResult:
            async def call_next(sent: ToolCall) -> ToolResult:
                return await _further(
                    item, "wrap_call", call, _same_call(item, "wrap_call", call, sent), inner
                )

            got = await _hook(item, "wrap_call", item.wrap_call(call, ctx, call_next))
            return _expect(item, "wrap_call", got, ToolResult, "a ToolResult")

        return wrapped

    async def halves(call: ToolCall) -> ToolResult:
        sent = call
        if before and overrides(item, "before_tool_call"):
            returned = await _hook(item, "before_tool_call", item.before_tool_call(call, ctx))
            if isinstance(returned, ToolResult):
                return returned
            sent = _same_call(item, "before_tool_call", call, returned)
        result = await _further(item, "before_tool_call", call, sent, inner)
        if not overrides(item, "after_tool_call"):
            return result
        got = await _hook(item, "after_tool_call", item.after_tool_call(sent, result, ctx))
        return _expect(item, "after_tool_call", got, ToolResult, "a ToolResult")

    return halves


async def _further(
    item: Capability, hook: str, call: ToolCall, sent: ToolCall, inner: CallNext
) -> ToolResult:
    """Run ``sent`` further in; arguments this layer changed that the schema refuses end the
    run naming it."""
    try:
        return await inner(sent)
    except InvalidArguments as error:
        if sent.arguments == call.arguments:
            raise
        name = type(item).__name__
        raise MiddlewareError(
            f"middleware {name} changed the arguments of {call.name!r} (call {call.id!r}) into "
            f"ones its schema refuses: {error}",
            name,
            hook,
        ) from error


def check(item: object) -> None:
    """Refuse what is not a Capability, and hooks that must be async and are not."""
    if not isinstance(item, Capability):
        raise TypeError(
            "capabilities must be Capability objects (subclass "
            f"tooldeck.run.capabilities.Capability), got {item!r}"
        )
    for hook in _ASYNC_HOOKS:
        if overrides(item, hook) and not inspect.iscoroutinefunction(getattr(type(item), hook)):
            raise TypeError(
                f"{type(item).__name__}.{hook} must be an async method (async def {hook}...)"
            )


async def _hook(item: Capability, hook: str, pending: Awaitable[object]) -> object:
    """Await one hook; whatever it raises (but a run's stop) becomes a MiddlewareError."""
    try:
        return await pending
    except (RunStopped, InvalidArguments):
        raise
    except Exception as error:
        raise _failed(item, hook, error) from error


def _hooked(item: Capability, hook: str, call: Callable[..., T], *args: Any) -> T:
    """Call one synchronous hook, as ``_hook`` awaits one."""
    try:
        return call(*args)
    except RunStopped:
        raise
    except Exception as error:
        raise _failed(item, hook, error) from error


def _failed(item: Capability, hook: str, error: Exception) -> MiddlewareError:
    name = type(item).__name__
    return MiddlewareError(
        f"middleware {name} failed in {hook}: {type(error).__name__}: {error}", name, hook
    )


def _expect(item: Capability, hook: str, value: object, kind: type[T], what: str) -> T:
    if isinstance(value, kind):
        return value
    name = type(item).__name__
    raise MiddlewareError(
        f"middleware {name}.{hook} returned {type(value).__name__}, expected {what}", name, hook
    )


def _same_call(item: Capability, hook: str, call: ToolCall, returned: object) -> ToolCall:
    """The call a hook passed on: the same call, perhaps with other arguments."""
    what = "the ToolCall or a ToolResult" if hook == "before_tool_call" else "a ToolCall"
    changed = _expect(item, hook, returned, ToolCall, what)
    if changed.id != call.id or changed.name != call.name:
        name = type(item).__name__
        raise MiddlewareError(
            f"middleware {name}.{hook} changed the call's id or tool name "
            f"({call.id!r} {call.name!r} -> {changed.id!r} {changed.name!r}); it may change "
            "the arguments only",
            name,
            hook,
        )
    return changed
