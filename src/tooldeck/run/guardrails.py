"""Guardrails: checks that run beside the model and can stop the run.

``Agent(input_guardrails=[...])`` judge the prompt, concurrently with the run's first model
request (``Guardrail(check, blocking=True)``: before it); one that trips cancels the request
and stops the run before any tool of that round runs. ``Agent(output_guardrails=[...])``
judge the answer (the text, or the typed output) before the run ends; one that trips stops
the run, or (``Guardrail(check, retry=True)``) the model reads its message and answers
again, within ``output_retries``. Tool guardrails (``@tool(guardrails=[...])``,
``Agent(tool_guardrails=[...])``, see ``ToolGuardrail``) are applied by ``run._engine.calls.guard``.

A stop is ``GuardrailTripped`` (``stop_reason == "guardrail"``); every decision is a
``GuardrailChecked`` event and is kept in ``RunResult.guardrails``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar

from tooldeck.errors import ErrorCode, GuardrailTripped
from tooldeck.messages import AssistantOutput, Message, ToolResult
from tooldeck.results import RunResult, StopReason
from tooldeck.run._engine.contexts import run_context
from tooldeck.run._engine.request import Delta, Emit, with_deltas
from tooldeck.run._engine.state import RunState, attach
from tooldeck.run.capabilities import Capability
from tooldeck.run.events import GuardrailChecked
from tooldeck.run.policy import RunPolicy
from tooldeck.safety import GuardrailDecision, GuardrailStage
from tooldeck.tools.context import RunContext
from tooldeck.tools.guardrails import ArgumentsCheck, GuardrailResult, ToolGuardrail

__all__ = [
    "Guardrail",
    "GuardrailCheck",
    "GuardrailResult",
    "ToolGuardrail",
]

T = TypeVar("T")

GuardrailCheck = Callable[[RunContext[Any], Any], GuardrailResult | Awaitable[GuardrailResult]]
"""A function of the run's context and the prompt (input) or the answer (output)."""


@dataclass(frozen=True, slots=True)
class Guardrail:
    """An input or output guardrail with its settings (a plain function needs none).

    Example:
        >>> from tooldeck.run.guardrails import Guardrail, GuardrailResult
        >>> def no_secrets(ctx, answer):
        ...     if "sk-" in answer:
        ...         return GuardrailResult.tripped("a secret")
        ...     return GuardrailResult.passed()
        >>> Guardrail(no_secrets, retry=True).retry
        True
    """

    check: GuardrailCheck
    name: str = ""
    """Its name in traces and logs (default: the function's name)."""
    blocking: bool = False
    """Input only: judge the prompt before the first request, not beside it."""
    retry: bool = False
    """Output only: a trip asks the model again with the message, within ``output_retries``."""


@dataclass(frozen=True, slots=True)
class Guards:
    """An agent's guardrails, checked once as the agent is made."""

    input: tuple[Guardrail, ...] = ()
    output: tuple[Guardrail, ...] = ()


class Guardrails(Capability):
    """Input, output and tool guardrails as one capability: ``Agent(capabilities=[
    Guardrails(input=[...], output=[...], tool=[...])])``, the same as the keywords
    ``input_guardrails=``, ``output_guardrails=`` and ``tool_guardrails=``.

    It holds for the whole run when the run starts on its agent (``run_level``): after
    handoffs and inside agent tools, beside each agent's own. The run applies each kind
    where it belongs: the input ones beside the first request, the tool ones on each
    call's arguments before any approval and on its result, the output ones on the answer.
    """

    run_level = True

    def __init__(
        self,
        input: Iterable[Guardrail | GuardrailCheck] = (),
        output: Iterable[Guardrail | GuardrailCheck] = (),
        tool: Iterable[ToolGuardrail | ArgumentsCheck] = (),
    ) -> None:
        self.guards = guards_of(input, output)
        self.tool = tuple(ToolGuardrail.of(item, "tool_guardrails") for item in tool)

    def __repr__(self) -> str:
        guards = self.guards or Guards()
        return f"Guardrails(input={guards.input!r}, output={guards.output!r}, tool={self.tool!r})"


def guards_of(
    input_guardrails: Iterable[Guardrail | GuardrailCheck],
    output_guardrails: Iterable[Guardrail | GuardrailCheck],
) -> Guards | None:
    """The agent's input and output guardrails, named and checked; None when it has none
    (its tool guardrails go with its calls' options)."""
    guards = Guards(
        tuple(_named(item, "input_guardrails") for item in input_guardrails),
        tuple(_named(item, "output_guardrails") for item in output_guardrails),
    )
    for guardrail in guards.input:
        if guardrail.retry:
            raise ValueError(f"input guardrail {guardrail.name!r}: retry=True is for output ones")
    for guardrail in guards.output:
        if guardrail.blocking:
            raise ValueError(
                f"output guardrail {guardrail.name!r}: blocking=True is for input ones"
            )
    return guards if guards.input or guards.output else None


def _named(item: Guardrail | GuardrailCheck, where: str) -> Guardrail:
    if isinstance(item, Guardrail):
        check = item.check
    elif callable(item):
        check, item = item, Guardrail(item)
    else:
        check = None
    if not callable(check):
        raise TypeError(
            f"{where}: expected a function (ctx, value) -> GuardrailResult or a Guardrail, "
            f"got {item!r}"
        )
    if item.name:
        return item
    name = str(getattr(check, "__name__", type(check).__name__))
    return Guardrail(check, name, item.blocking, item.retry)


async def judge(
    check: Callable[[RunContext[Any], Any], Any],
    context: RunContext[Any],
    value: Any,
    name: str,
    stage: GuardrailStage,
) -> GuardrailChecked:
    """One guardrail's decision on ``value``, as its event. A guardrail that raises, or
    returns anything but a GuardrailResult, trips (fail closed)."""
    try:
        verdict = check(context, value)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception as error:
        verdict = GuardrailResult.tripped(f"the guardrail raised {type(error).__name__}: {error}")
    if not isinstance(verdict, GuardrailResult):
        verdict = GuardrailResult.tripped(
            f"the guardrail returned {verdict!r}, not a GuardrailResult"
        )
    decision = GuardrailDecision(
        name=name,
        stage=stage,
        verdict=verdict.verdict,
        message=verdict.message,
        round=context.round,
        call_id=context.call_id,
    )
    return GuardrailChecked(context.round, decision, verdict.data, verdict.replacement)


def stop(checked: GuardrailChecked, state: RunState | None = None) -> GuardrailTripped:
    """The error of a guardrail that stops the run (with the run so far, given its state)."""
    decision = checked.decision
    where = f" on call {decision.call_id!r}" if decision.call_id else ""
    error = GuardrailTripped(
        f"{decision.stage} guardrail {decision.name!r}{where} tripped: {decision.message}",
        decision.name,
        decision.stage,
        checked.data,
    )
    return error if state is None else attach(error, state, StopReason.GUARDRAIL)


def context_of(state: RunState, round_: int, deps: Any) -> RunContext[Any]:
    """What an input or output guardrail is given: the run, no call."""
    return run_context(
        call_id="",
        tool_name="",
        deps=deps,
        round=round_,
        run_id=state.run_id,
        messages=state.messages,
    )


async def judge_input(
    guardrails: Sequence[Guardrail], context: RunContext[Any], prompt: str
) -> list[GuardrailChecked]:
    """The input guardrails' decisions, run concurrently; the first trip cancels the others
    (its decision is the last one)."""
    tasks = [
        asyncio.ensure_future(judge(g.check, context, prompt, g.name, "input")) for g in guardrails
    ]
    decided: list[GuardrailChecked] = []
    try:
        for next_done in asyncio.as_completed(tasks):
            checked = await next_done
            decided.append(checked)
            if checked.decision.verdict == "tripped":
                break
    finally:
        for task in tasks:
            task.cancel()
    return decided


class InputCheck:
    """The input guardrails of one run, judging its prompt beside (or before) its first
    request."""

    def __init__(self, guardrails: Sequence[Guardrail], state: RunState, deps: Any) -> None:
        self._blocking = [guardrail for guardrail in guardrails if guardrail.blocking]
        self._beside = [guardrail for guardrail in guardrails if not guardrail.blocking]
        self._state = state
        self._context = context_of(state, 1, deps)

    async def beside(
        self, request: Callable[[Emit | None], Awaitable[AssistantOutput]], deltas: bool
    ) -> AsyncGenerator[Delta | GuardrailChecked | AssistantOutput, None]:
        """The first request (its deltas too, if asked for) with the guardrails' decisions;
        a trip cancels the request and raises GuardrailTripped."""
        prompt = self._state.messages[-1].content
        if self._blocking:
            decided, tripped = self._record(
                await judge_input(self._blocking, self._context, prompt)
            )
            for event in decided:
                yield event
            if tripped is not None:
                raise tripped
        checking = asyncio.ensure_future(judge_input(self._beside, self._context, prompt))
        output = None
        try:
            if deltas:
                asked = with_deltas(lambda emit: _raced(checking, request(emit)))
                async with aclosing(asked):
                    async for item in asked:
                        if isinstance(item, AssistantOutput):
                            output = item
                        else:
                            yield item
            else:
                output = await _raced(checking, request(None))
        except _Tripped:
            pass
        except BaseException:  # the request failed, or the run was closed or cancelled
            checking.cancel()
            raise
        decided, tripped = self._record(await checking)
        for event in decided:
            yield event
        if tripped is not None:
            raise tripped
        assert output is not None  # the request answered, or the guardrails tripped
        yield output

    def _record(
        self, decided: list[GuardrailChecked]
    ) -> tuple[list[GuardrailChecked], GuardrailTripped | None]:
        """Keep the decisions; a trip (the last one) is the run's stop."""
        self._state.guardrails += tuple(checked.decision for checked in decided)
        if _tripped(decided):
            return decided, stop(decided[-1], self._state)
        return decided, None


class _Tripped(Exception):
    """An input guardrail tripped before the first request answered."""


async def _raced(checking: asyncio.Future[list[GuardrailChecked]], request: Awaitable[T]) -> T:
    """The request's answer, unless the guardrails trip first: then the request is cancelled."""
    asking = asyncio.ensure_future(request)
    try:
        racing: set[asyncio.Future[Any]] = {checking, asking}
        await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        if not asking.done() and _tripped(checking.result()):
            raise _Tripped
        return await asking
    finally:
        if not asking.done():
            asking.cancel()
            await asyncio.wait({asking})


def _tripped(decided: list[GuardrailChecked]) -> bool:
    return bool(decided) and decided[-1].decision.verdict == "tripped"


async def judge_answer(
    guards: Guards,
    retries: int,
    state: RunState,
    policy: RunPolicy,
    result: RunResult[Any],
    deps: Any,
) -> tuple[RunResult[Any] | None, Iterable[GuardrailChecked]]:
    """The answer after the output guardrails: kept, or None to ask the model again (a
    ``retry`` guardrail tripped), with their decisions (read to their end, they raise the
    stop of a trip without retry)."""
    context = context_of(state, policy.rounds, deps)
    decided: list[GuardrailChecked] = []
    for guardrail in guards.output:
        checked = await judge(guardrail.check, context, result.output, guardrail.name, "output")
        decided.append(checked)
        if checked.decision.verdict != "tripped":
            continue
        if not guardrail.retry or policy.refuse_output(retries, "") is not None:
            state.guardrails += tuple(item.decision for item in decided)
            return None, announced(decided, stop(checked, state))
        retry = checked.decision.model_copy(update={"verdict": "retry"})
        decided[-1] = GuardrailChecked(checked.round, retry, checked.data)
        refusal = ToolResult.failure(ErrorCode.REFUSED, checked.decision.message)
        state.messages.append(Message.user(refusal.output))
        state.guardrails += tuple(item.decision for item in decided)
        return None, decided
    state.guardrails += tuple(item.decision for item in decided)
    return result.model_copy(update={"guardrails": tuple(state.guardrails)}), decided


def announced(
    decided: Iterable[GuardrailChecked], tripped: GuardrailTripped
) -> Iterator[GuardrailChecked]:
    """The decisions, then the stop raised: the loop passes them on as events, and the run
    ends with the stop right after them."""
    yield from decided
    raise tripped
