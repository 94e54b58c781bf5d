"""The loop's side of typed answers: what the model is asked and shown, and what its turn
settles (see ``tooldeck.run.output`` for the schema and the checks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from tooldeck.errors import ErrorCode
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult, ToolSpec
from tooldeck.models.base import Model, ModelSettings
from tooldeck.results import RunResult, StopReason, ToolTrace
from tooldeck.run._engine.contexts import run_context
from tooldeck.run._engine.prompted import ForcedCallHint, PromptedFallback
from tooldeck.run._engine.state import RunState, attach
from tooldeck.run.output import (
    FINAL_ANSWER,
    Accepted,
    OutputMode,
    OutputPlan,
    OutputSchema,
    prompted_instructions,
)
from tooldeck.run.policy import RunPolicy
from tooldeck.tools.registry import ToolView


def output_plan(
    model: Model, output_type: Any, mode: OutputMode, validators: Sequence[Callable[..., Any]]
) -> OutputPlan | None:
    """How an agent asks for its typed answer, or None without ``output_type``."""
    if output_type is None:
        if validators:
            raise ValueError("output_validators need an output_type")
        if mode != "auto":
            raise ValueError(f"output_mode={mode!r} needs an output_type")
        return None
    if mode not in ("auto", "native", "tool", "prompted"):
        raise ValueError(
            f"output_mode must be 'auto', 'native', 'tool' or 'prompted', got {mode!r}"
        )
    if mode == "native" and not model.native_output:
        raise ValueError(
            f"output_mode='native' needs a model with structured output; {model.name} has "
            "none: use output_mode='tool' or 'prompted' (or 'auto')"
        )
    chosen: Literal["native", "tool", "prompted"] = "native" if mode == "auto" else mode
    if mode == "auto" and not model.native_output:
        chosen = "tool"
    falls_back = mode == "auto" and chosen == "native"
    return OutputPlan(OutputSchema(output_type), chosen, validators, falls_back=falls_back)


def asked_with(plan: OutputPlan | None, model: Model, instructions: str) -> tuple[Model, str]:
    """The model a run asks and its instructions: with the schema written in them for a
    prompted answer; a native one chosen by ``"auto"`` falls back to that where the server
    refuses structured output."""
    if plan is None:
        return model, instructions
    if plan.mode == "prompted":
        return model, prompted_instructions(instructions, plan.schema.parameters)
    if plan.falls_back:
        return PromptedFallback(model, plan.schema.parameters), instructions
    if plan.mode == "tool":
        return ForcedCallHint(model), instructions
    return model, instructions


def request_settings(
    settings: ModelSettings, plan: OutputPlan | None
) -> tuple[ModelSettings, ModelSettings, ModelSettings]:
    """Settings for the first request, the later ones, and a last answer without tools.

    A forced tool choice applies to the first request only. A typed answer asked for with a
    final_answer tool needs a tool call in every turn; a native one sends its schema.

    Raises:
        ValueError: ``tool_choice="none"`` with a typed answer asked for by the
            final_answer tool: the model could never give it.
    """
    if plan is not None and plan.mode == "tool" and settings.tool_choice == "none":
        raise ValueError(
            "tool_choice='none' with output_type can never answer: the typed answer is asked "
            "for with the final_answer tool, which tool_choice='none' forbids the model to "
            "call. Leave tool_choice 'auto' (tools the model need not call), or use a model "
            "with structured output (output_mode='native')"
        )
    first = settings
    later = settings.with_tool_choice("auto") if settings.forces_a_call else settings
    last = settings.with_tool_choice("none")
    if plan is None or plan.mode == "prompted":
        return first, later, last
    if plan.mode == "native":
        spec = plan.spec
        return (
            replace(first, output_schema=spec),
            replace(later, output_schema=spec),
            replace(last, output_schema=spec),
        )

    def must_call(s: ModelSettings) -> ModelSettings:
        return s.with_tool_choice("required") if s.tool_choice == "auto" else s

    return must_call(first), must_call(later), last.with_tool_choice(FINAL_ANSWER)


def shown_specs(plan: OutputPlan | None, view: ToolView) -> tuple[ToolSpec, ...]:
    """What the model is shown: the view's tools, and the final_answer tool if asked for."""
    if plan is None or plan.mode != "tool":
        return view.specs
    return (*view.specs, plan.spec)


async def take_answer(
    plan: OutputPlan,
    retries: int,
    state: RunState,
    policy: RunPolicy,
    output: AssistantOutput,
    deps: Any,
) -> RunResult[Any] | None:
    """The typed answer in this turn: the run's result, or None to go on (a refused answer
    is answered with ``error[invalid_output]`` and the turn's other calls still run)."""
    verdict, call = plan.judge(output)
    if verdict is None:
        return None
    if isinstance(verdict, Accepted):
        call_id = call.id if call else ""
        context = run_context(
            call_id=call_id,
            tool_name=FINAL_ANSWER,
            deps=deps,
            round=policy.rounds,
            run_id=state.run_id,
        )
        verdict = await plan.check(verdict, context)
    if isinstance(verdict, Accepted):
        _answer_final_call(state, call, ToolResult.success("final answer accepted"))
        return state.result(verdict.raw, StopReason.ANSWER, None, verdict.value)
    stop = policy.refuse_output(retries, verdict.text)
    refusal = ToolResult.failure(ErrorCode.INVALID_OUTPUT, verdict.text)
    if call is None:
        state.turn = None
        state.messages.append(Message.user(refusal.output))
    else:
        state.trace.append(ToolTrace(call=call, result=refusal, duration_s=0.0))
        assert state.turn is not None  # a final_answer call came in the turn just recorded
        state.turn.answered[call.id] = refusal
    if stop is not None:
        if state.turn is not None and state.turn.complete:
            state.close_turn()
        raise attach(stop, state, StopReason.OUTPUT_RETRIES)
    return None


def _answer_final_call(state: RunState, call: ToolCall | None, accepted: ToolResult) -> None:
    """Close the turn of an accepted answer: the final_answer call and the calls beside it
    (not run: the answer ended the run) each get their result, so the transcript stays whole."""
    turn = state.turn
    if turn is None or call is None:
        state.turn = None
        return
    not_run = ToolResult.success("not run: the final answer ended the run")
    for made in turn.calls:
        result = accepted if made.id == call.id else not_run
        state.trace.append(ToolTrace(call=made, result=result, duration_s=0.0))
        turn.answered[made.id] = result
    state.close_turn()
