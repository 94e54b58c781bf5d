"""A paused run as versioned JSON, and the decisions that let it go on.

A run pauses when a call needs a person's decision (``requires_approval``) or belongs to the
application (``external_tool``). ``result.checkpoint`` holds everything needed to go on, in
any process; ``agent.resume(checkpoint, decisions)`` takes, per pending call id,
``Approve()``, ``Approve(arguments=...)``, ``Reject(message=...)`` or, for an external
call, the ``ToolResult`` of running it.

Binding: each pending call carries a digest of (run id, call id, tool name, canonical
arguments), and a decision applies to the call stored in the checkpoint, never to a call
sent back by the application. With a ``checkpoint_key`` the whole checkpoint is signed
(HMAC-SHA256), so any change to it is refused; without a key only changed pending calls
are (an accidental edit), not a deliberate forgery.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from typing import Any

from tooldeck.errors import CheckpointError
from tooldeck.messages import Message, ToolCall, ToolResult
from tooldeck.results import Approve, Checkpoint, Decision, PausedTurn, PendingCall, Reject
from tooldeck.run._engine.inbox import Inbox
from tooldeck.run._engine.state import OpenTurn, RunState
from tooldeck.run.agent_tool import NestingHandler
from tooldeck.run.budget import Budget
from tooldeck.run.policy import Limits, RunPolicy
from tooldeck.tools.registry import ToolView


def canonical_json(value: Any) -> str:
    """One text per value: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_digest(run_id: str, call: ToolCall) -> str:
    """SHA-256 of (run id, call id, tool name, canonical JSON of the arguments)."""
    arguments: Any = call.raw_arguments if call.raw_arguments is not None else call.arguments
    text = canonical_json([run_id, call.id, call.name, arguments])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def make_checkpoint(state: RunState, policy: RunPolicy, key: bytes | None) -> Checkpoint:
    """The checkpoint of a run paused in its open turn, signed when there is a key."""
    turn = state.turn
    if turn is None or not turn.pending:
        raise AssertionError("only a run with pending calls has a checkpoint")
    checkpoint = Checkpoint(
        run_id=state.run_id,
        messages=tuple(state.messages),
        trace=tuple(state.trace),
        usage=state.usage,
        counters=policy.counters(),
        turn=PausedTurn(
            round=turn.round,
            answered=dict(turn.answered),
            pending=turn.pending,
            untrusted=turn.untrusted,
        ),
        history_summary=state.summary,
        guardrails=state.guardrails,
        tainted_by=state.tainted_by,
        agent=state.agent,
        shown=state.shown,
        capability_states=state.states,
        queued=_queued(state),
    )
    if key is None:
        return checkpoint
    return checkpoint.model_copy(update={"signature": _sign(checkpoint, key)})


def _queued(state: RunState) -> tuple[Message, ...]:
    """What was sent to the run and had not joined it as it pauses (its inbox closes: a
    message sent from now on goes to the resumed run)."""
    if state.inbox is None:
        return ()
    return state.inbox.close(
        "it has paused: calls wait for a decision (a message it had not sent yet is in its "
        "checkpoint); resume it and send to the resumed run"
    )


def _sign(checkpoint: Checkpoint, key: bytes) -> str:
    return hmac.new(key, checkpoint.signed_payload(), hashlib.sha256).hexdigest()


def verify(checkpoint: Checkpoint, key: bytes | None) -> None:
    """Refuse a checkpoint changed since it was made (all of it with a key, else its calls)."""
    if key is not None:
        if checkpoint.signature is None:
            raise CheckpointError(
                "the checkpoint is not signed, but this agent has a checkpoint_key: "
                "it was not made by an agent with that key"
            )
        if not _same(checkpoint.signature, _payload_signature(checkpoint, key)):
            raise CheckpointError(
                "the checkpoint's signature does not match: it was changed after it was made, "
                "or made with another checkpoint_key"
            )
    _check_calls(checkpoint)
    for number, message in enumerate(checkpoint.queued):
        if message.role != "user":
            raise CheckpointError(
                f"queued message {number} is a {message.role!r} message: only user messages "
                "are sent to a run (RunHandle.send); the checkpoint was not made by tooldeck"
            )


def _payload_signature(checkpoint: Checkpoint, key: bytes) -> str:
    """The signature a checkpoint read back should carry; its data may be hostile."""
    try:
        return _sign(checkpoint, key)
    except (ValueError, RecursionError) as error:  # nested past what the encoder takes
        raise CheckpointError(
            f"the checkpoint cannot be checked against its signature: {error} (its data nest "
            "deeper than any run makes them): it was not made by tooldeck"
        ) from None


def _stored_call_digest(run_id: str, call: ToolCall) -> str:
    try:
        return call_digest(run_id, call)
    except (ValueError, RecursionError) as error:
        raise CheckpointError(
            f"pending call {call.id!r} ({call.name}) cannot be checked against its digest: "
            f"{error} (its arguments nest deeper than any run makes them)"
        ) from None


def _same(stored: str, expected: str) -> bool:
    """A constant-time comparison of a stored hex digest; any text may be stored there, and
    ``hmac.compare_digest`` takes only ASCII strings."""
    return hmac.compare_digest(stored.encode("utf-8", "surrogatepass"), expected.encode("ascii"))


def _check_calls(checkpoint: Checkpoint) -> None:
    """Each pending call matches its digest and the paused turn, in nested checkpoints too."""
    for pending in checkpoint.turn.pending:
        if not _same(pending.digest, _stored_call_digest(checkpoint.run_id, pending.call)):
            raise CheckpointError(
                f"pending call {pending.call.id!r} ({pending.call.name}) was changed after the "
                "checkpoint was made (its digest does not match): refusing to run it"
            )
        if (pending.kind == "agent") != (pending.nested is not None):
            raise CheckpointError(
                f"pending call {pending.call.id!r} ({pending.call.name}) is broken: a call of "
                "kind 'agent' holds the checkpoint of its inner run, and no other call does"
            )
        if pending.nested is not None:
            _check_calls(pending.nested)
    _check_turn(checkpoint)


def _check_turn(checkpoint: Checkpoint) -> None:
    """Every call of the paused turn is either answered or pending, exactly once."""
    last = checkpoint.messages[-1] if checkpoint.messages else None
    made = {call.id: call for call in last.tool_calls} if last is not None else {}
    for pending in checkpoint.turn.pending:
        if made.get(pending.call.id) != pending.call:
            raise CheckpointError(
                f"pending call {pending.call.id!r} is not the call the model made in the "
                "checkpoint's last turn: refusing to run it"
            )
    pending_ids = [pending.call.id for pending in checkpoint.turn.pending]
    accounted = sorted([*checkpoint.turn.answered, *pending_ids])
    if not pending_ids or accounted != sorted(made):
        raise CheckpointError(
            "the checkpoint's paused turn does not account for each of the model's calls "
            f"exactly once (calls {sorted(made)}, answered {sorted(checkpoint.turn.answered)}, "
            f"pending {pending_ids})"
        )


def check_decisions(
    checkpoint: Checkpoint, decisions: Mapping[str, Decision]
) -> dict[str, Decision]:
    """Refuse decisions for calls that are not pending, or of the wrong kind.

    Returns the decisions keyed by ``PendingCall.id``: a bare call id (accepted when exactly
    one pending call has it) becomes the full id of a call made inside an agent tool.
    """
    pending_calls = checkpoint.pending
    by_id = {pending.id: pending for pending in pending_calls}
    keyed: dict[str, Decision] = {}
    for call_id, decision in decisions.items():
        pending = by_id.get(call_id) or _by_call_id(call_id, pending_calls)
        problem = _wrong_kind(pending, decision)
        if problem:
            raise CheckpointError(f"call {call_id!r} ({pending.call.name}): {problem}")
        if isinstance(decision, Approve) and decision.arguments is not None:
            _check_json(call_id, decision.arguments)
        scope = decision.scope if isinstance(decision, Approve) else "once"
        if scope != "once" and not pending.own:
            raise CheckpointError(
                f"call {call_id!r} ({pending.call.name}) is made inside the agent tool "
                f"{' > '.join(pending.path)}, whose run ends with the call: "
                f"Approve(scope={scope!r}) is for the run's own calls; approve it once"
            )
        if pending.id in keyed:
            raise CheckpointError(f"two decisions for pending call {pending.id!r}: send one")
        keyed[pending.id] = decision
    return keyed


def _by_call_id(call_id: str, pending_calls: tuple[PendingCall, ...]) -> PendingCall:
    found = [pending for pending in pending_calls if pending.call.id == call_id]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CheckpointError(
            f"no pending call with id {call_id!r}; pending: {_describe(pending_calls)}"
        )
    raise CheckpointError(
        f"call id {call_id!r} is ambiguous: pending calls {', '.join(repr(p.id) for p in found)} "
        "have it (made inside agent tools); key the decision by PendingCall.id"
    )


def _wrong_kind(pending: PendingCall, decision: object) -> str:
    if pending.kind == "approval":
        if isinstance(decision, Approve | Reject):
            return ""
        return (
            f"needs Approve() or Reject(), got {type(decision).__name__} "
            "(a ToolResult answers an external call)"
        )
    if isinstance(decision, ToolResult | Reject):
        return ""
    return (
        f"is an external call: send the ToolResult of running it (or Reject()), "
        f"got {type(decision).__name__}"
    )


def _check_json(call_id: str, arguments: object) -> None:
    if not isinstance(arguments, dict):
        raise CheckpointError(
            f"Approve(arguments=...) for {call_id!r} must be a dict, got {type(arguments).__name__}"
        )
    try:
        canonical_json(arguments)
    except (TypeError, ValueError, RecursionError) as error:
        raise CheckpointError(
            f"Approve(arguments=...) for {call_id!r} must be JSON data: {error}"
        ) from None


def check_tools(checkpoint: Checkpoint, view: ToolView) -> None:
    """Refuse, before anything runs, to go on when a pending call's tool is no longer among
    the agent's tools, or a paused call's inner run cannot go on. A deferred tool counts:
    the run's search revealed it (its reveals are applied as it starts)."""
    known = {*view.names, *view.deferred}
    pending_calls = checkpoint.turn.pending
    missing = sorted({p.call.name for p in pending_calls if p.call.name not in known})
    if missing:
        raise CheckpointError(
            f"cannot resume: the agent has no tool named {', '.join(map(repr, missing))} "
            "any more (pending calls need it)"
        )
    for pending in pending_calls:
        if pending.nested is None:
            continue
        handler = (view.dispatch.get(pending.call.name) or view.deferred[pending.call.name]).handler
        if not isinstance(handler, NestingHandler):
            raise CheckpointError(
                f"pending call {pending.call.id!r} holds the paused run of an agent tool, but "
                f"{pending.call.name!r} is not an agent tool of this agent"
            )
        handler.check_resume(pending.nested)


def restore(
    checkpoint: Checkpoint, limits: Limits, budget: Budget | None = None
) -> tuple[RunState, RunPolicy]:
    """The run's state and policy as they were when it paused (the clock starts again)."""
    usage = checkpoint.usage
    state = RunState(
        messages=list(checkpoint.messages),
        trace=list(checkpoint.trace),
        run_id=checkpoint.run_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        requests=usage.requests,
        cost_usd=usage.cost_usd or 0.0,
        cost_known=usage.cost_usd is not None,
        summary=checkpoint.history_summary,
        guardrails=tuple(checkpoint.guardrails),
        tainted_by=checkpoint.tainted_by,
        agent=checkpoint.agent,
        shown=checkpoint.shown,
        states=copy.deepcopy(checkpoint.capability_states),
        inbox=Inbox(checkpoint.queued) if checkpoint.queued else None,
    )
    calls = checkpoint.messages[-1].tool_calls
    state.turn = OpenTurn(
        round=checkpoint.turn.round,
        calls=calls,
        answered=dict(checkpoint.turn.answered),
        pending=checkpoint.turn.pending,
        started=True,
        untrusted=checkpoint.turn.untrusted,
    )
    return state, RunPolicy(limits, checkpoint.counters, budget)


def _describe(pending: Iterable[PendingCall]) -> str:
    shown = [f"{p.id!r} ({p.call.name}, {p.kind})" for p in pending]
    return ", ".join(shown) or "none"
