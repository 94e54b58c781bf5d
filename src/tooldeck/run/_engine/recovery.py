"""A run met again: its state read back from its journal, and — when another run comes
first — closed as it stood, each of its calls that had not reported answered truthfully.

A call of the run's last turn that had not reported is settled without running it:
a ``side_effects`` call by its record (its result if it reported, its ``reconcile`` or
``error[interrupted]`` if it started and never did, "it did not run" if it never started —
and the record is finished with what the model reads); an agent tool's call is answered
``error[interrupted]`` saying its agent may have acted (its run is not run again
automatically); any other call is answered ``error[interrupted]`` (it has no side
effects: the model may call it again). A resume that
was killed before any of its rounds was written keeps its decisions: a rejected call reads
its rejection, an external call its result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tooldeck.errors import ErrorCode
from tooldeck.messages import Message, ToolCall, ToolResult, Usage
from tooldeck.results import Decision, Reject, RunResult, StopReason, ToolTrace
from tooldeck.run._engine.checkpoint import restore
from tooldeck.run._engine.contexts import run_context
from tooldeck.run._engine.journal import Journaled, apply_steps
from tooldeck.run._engine.once import reconciled
from tooldeck.run._engine.records import traced
from tooldeck.run._engine.state import OpenTurn, RunState, untrusted_source
from tooldeck.run.agent_tool import NestingHandler
from tooldeck.run.budget import Budget
from tooldeck.run.events import RunRecovered
from tooldeck.run.policy import Limits, RunPolicy
from tooldeck.run.session import CallRecords, StoredRun
from tooldeck.tools.context import RunContext
from tooldeck.tools.registry import ToolView

NEVER_RAN = (
    "the run stopped (its process ended) before this call ran: it did not run. Call the "
    "tool again if it is still needed"
)
NO_REPORT = (
    "the run stopped (its process ended) before this call reported a result. The tool has no "
    "side effects: call it again if you still need its result"
)
AGENT_NO_REPORT = (
    "the run stopped (its process ended) while this agent's run was going on, before it "
    "reported: it may have acted through its tools. It is not run again automatically: "
    "check whether its work was done before calling it again"
)
NOT_DECIDED = (
    "the run stopped while this call waited for a person's decision: it did not run. Call "
    "the tool again if it is still needed"
)


def folded(
    run: Journaled, history: Sequence[Message], limits: Limits, budget: Budget | None
) -> tuple[RunState, RunPolicy]:
    """The run's state and policy where its journal leaves it: a run from a prompt from the
    session's history and its prompt, a resume from the pause it went on from; then its
    steps. A turn whose calls had not run is left open (not yet checked)."""
    if run.paused is not None:
        state, policy = restore(run.paused, limits, budget)
        counters = apply_steps(state, policy.counters(), run.steps)
        if run.steps:
            policy = RunPolicy(limits, counters, budget)
        return state, policy
    state = RunState(messages=[*history, *run.opening.prompt], run_id=run.run_id)
    if history:
        state.tainted_by = untrusted_source(history)
    counters = apply_steps(state, None, run.steps)
    return state, RunPolicy(limits, counters, budget)


@dataclass(frozen=True, slots=True)
class Closed:
    """An unfinished run closed as it stood: what the session keeps of it, and what the
    model and the person are told."""

    stored: StoredRun
    recovered: RunRecovered


async def close(
    run: Journaled,
    history: Sequence[Message],
    view: ToolView,
    records: CallRecords | None,
    limits: Limits,
) -> Closed:
    """Close ``run`` as it stood: its calls that had not reported answered (see the
    module), its messages from its prompt on kept as a stored run."""
    state, _ = folded(run, history, limits, None)
    turn = state.turn
    settled: list[ToolTrace] = []
    if turn is not None:
        decisions = run.opening.decided() if not run.steps else {}
        for place, call in enumerate(turn.calls):
            if call.id in turn.answered:
                continue
            context = _context(call, state, turn.round)
            decision = _decision(turn, call, decisions)
            result = await _settled(call, place, decision, view, records, context)
            settled.append(traced(call, result, 0.0, None))
        state.close_round(turn, settled, ())
    kept = tuple(state.messages[len(history) :])
    stored = StoredRun(run.run_id, messages=kept, capability_states=state.states)
    return Closed(stored, RunRecovered(run.run_id, "closed", run.rounds, tuple(settled)))


def _decision(turn: OpenTurn, call: ToolCall, decisions: Mapping[str, Decision]) -> Any:
    """For a resume killed before its first step: the decision on a pending call, or
    ``NOT_DECIDED`` for one that still waited; None for a call that was not pending."""
    if not turn.pending:
        return None
    for pending in turn.pending:
        if pending.call.id == call.id:
            return decisions.get(pending.id, NOT_DECIDED)
    return None


async def _settled(
    call: ToolCall,
    place: int,
    decision: Any,
    view: ToolView,
    records: CallRecords | None,
    context: RunContext[Any],
) -> ToolResult:
    if decision is NOT_DECIDED:
        return ToolResult.failure(ErrorCode.INTERRUPTED, NOT_DECIDED)
    if isinstance(decision, Reject):
        text = decision.message or "a person rejected this call; do not make it again"
        return ToolResult.failure(ErrorCode.REJECTED, text)
    if isinstance(decision, ToolResult):
        return decision
    entry = view.dispatch.get(call.name)
    if entry is not None and isinstance(entry.handler, NestingHandler):  # an agent tool
        return ToolResult.failure(ErrorCode.INTERRUPTED, AGENT_NO_REPORT)
    if entry is None or not entry.options.side_effects or records is None:
        return ToolResult.failure(ErrorCode.INTERRUPTED, NO_REPORT)
    key = context.idempotency_key
    before = await records.start_call(key, call.name)
    if before is not None and before.result is not None:
        return before.result
    if before is None:
        result = ToolResult.failure(ErrorCode.INTERRUPTED, NEVER_RAN)
    else:
        result = await reconciled(entry.options.reconcile, context) or ToolResult.failure(
            ErrorCode.INTERRUPTED, NEVER_RAN
        )
    await records.finish_call(key, result)
    return result


def _context(call: ToolCall, state: RunState, round_: int) -> RunContext[Any]:
    return run_context(
        call_id=call.id,
        tool_name=call.name,
        deps=None,
        round=round_,
        run_id=state.run_id,
        messages=state.messages,
    )


def stored_result(
    history: Sequence[Message], stored_runs: Sequence[tuple[str, int]], run_id: str
) -> tuple[RunResult[Any], int, str] | None:
    """The result of run ``run_id`` as the session stored it, if it finished there (the
    conversation up to its end, its answer: the last assistant message's text), its model
    rounds and its prompt. Usage and trace are this call's: nothing was asked or run."""
    end = 0
    for stored_id, count in stored_runs:
        end += count
        if stored_id != run_id:
            continue
        messages = tuple(history[:end])
        own = messages[end - count :]
        answer = next((m.content for m in reversed(own) if m.role == "assistant"), "")
        result: RunResult[Any] = RunResult(
            answer=answer,
            output=answer,
            messages=messages,
            tool_trace=(),
            usage=Usage(),
            stop_reason=StopReason.ANSWER,
            run_id=run_id,
        )
        prompt = own[0].content if own and own[0].role == "user" else ""
        return result, sum(1 for message in own if message.role == "assistant"), prompt or ""
    return None
