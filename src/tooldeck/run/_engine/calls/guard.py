"""Tool guardrails on a round's calls: on the validated arguments before approval, and on
the result before the model reads it (``@tool(guardrails=...)``, then
``Agent(tool_guardrails=...)``, in order; see ``tooldeck.run.guardrails``).

A guardrail may pass, refuse (the model reads ``error[refused]: <message>``), replace the
arguments (validated again) or the result, or stop the run (``GuardrailTripped``). Only a
round whose tools have guardrails comes here.
"""

from __future__ import annotations

from dataclasses import replace

from tooldeck.errors import ErrorCode, GuardrailTripped, InvalidArguments
from tooldeck.messages import ToolResult
from tooldeck.results import ToolTrace
from tooldeck.run._engine.calls.execute import Ran, execute
from tooldeck.run._engine.calls.shared import CallRound, Emit, Ready, refused
from tooldeck.run._engine.calls.texts import invalid_arguments_text
from tooldeck.run.events import Event, GuardrailChecked
from tooldeck.run.guardrails import judge, stop
from tooldeck.tools.guardrails import ToolGuardrail
from tooldeck.tools.registry import ToolEntry


def _guardrails(entry: ToolEntry, round_: CallRound) -> tuple[ToolGuardrail, ...]:
    return entry.options.guardrails + round_.options.tool_guardrails


async def guard_arguments(
    item: Ready, round_: CallRound
) -> tuple[Ready | ToolTrace, list[Event], GuardrailTripped | None]:
    """The call with its arguments judged: ready (maybe with new arguments) or refused; the
    decisions as events; the stop, if a guardrail said stop."""
    events: list[Event] = []
    for guardrail in _guardrails(item.entry, round_):
        if guardrail.arguments is None:
            continue
        context = round_.context(item.call)
        checked = await judge(
            guardrail.arguments, context, item.arguments, guardrail.name, "arguments"
        )
        events.append(checked)
        verdict = checked.decision.verdict
        if verdict == "tripped":
            return item, events, stop(checked)
        if verdict == "refused":
            return refused(item.call, ErrorCode.REFUSED, checked.decision.message), events, None
        if verdict == "replaced":
            changed = _with_arguments(item, checked)
            if isinstance(changed, ToolTrace):
                return changed, events, None
            item = changed
    return item, events, None


def _with_arguments(item: Ready, checked: GuardrailChecked) -> Ready | ToolTrace:
    """The call with a guardrail's arguments, validated again (refused if they do not fit)."""
    new = checked.replacement
    call = item.call.model_copy(update={"arguments": new if isinstance(new, dict) else {}})
    try:
        if not isinstance(new, dict):
            raise TypeError(f"replaced arguments must be a dict, got {new!r}")
        arguments = item.entry.handler.validate(new)
    except (InvalidArguments, TypeError) as error:
        text = (
            invalid_arguments_text(call, error)
            if isinstance(error, InvalidArguments)
            else str(error)
        )
        why = f"the guardrail {checked.decision.name!r} replaced the arguments: {text}"
        return refused(call, ErrorCode.INVALID_ARGUMENTS, why, error)
    return replace(item, call=call, arguments=arguments)


async def execute_guarded(item: Ready, round_: CallRound, emit: Emit | None, put: Emit) -> Ran:
    """Run the call (``emit`` passes on the events of a run inside it), then judge its
    result (the decisions go to ``put``); a stop raises GuardrailTripped."""
    ran = await execute(item, round_, emit)
    if not isinstance(ran, ToolTrace):
        return ran
    for guardrail in _guardrails(item.entry, round_):
        if guardrail.result is None:
            continue
        context = round_.context(item.call)
        checked = await judge(guardrail.result, context, ran.result, guardrail.name, "result")
        put(checked)
        verdict = checked.decision.verdict
        if verdict == "tripped":
            raise stop(checked)
        if verdict == "refused":
            withheld = ToolResult.failure(ErrorCode.REFUSED, checked.decision.message)
            ran = ran.model_copy(update={"result": withheld})
        elif verdict == "replaced":
            new = checked.replacement
            given = new if isinstance(new, ToolResult) else ToolResult.success(str(new))
            ran = ran.model_copy(update={"result": given})
    return ran


async def answer_guarded(item: Ready, round_: CallRound) -> Ran:
    """A call made outside a run (served over MCP), judged as a run's call is; a guardrail
    that says stop refuses it (there is no run to stop), with its message."""
    judged, _, tripped = await guard_arguments(item, round_)
    if isinstance(judged, ToolTrace):
        return judged
    if tripped is None:
        try:
            return await execute_guarded(judged, round_, None, _unseen)
        except GuardrailTripped as error:
            tripped = error
    return refused(item.call, ErrorCode.REFUSED, str(tripped))


def _unseen(event: Event) -> None:
    """A decision with no run to show it in (it is in the refusal the caller reads)."""
