"""Remembered approvals: a person's ``Approve(scope="run" | "session")`` kept for the run.

They live among the run's capability states under ``APPROVALS_STATE`` (by tool name), so
whatever carries those carries them: a checkpoint (signed with the rest), each journal step
of a run in a session, and the session's kept states for its next run — of which a fresh run
takes only the ``session`` ones. A call whose tool asks for approval runs without pausing
while the run remembers an approval of its tool, unless it waits because the conversation
holds untrusted content (``after_untrusted="ask"``): that question is asked each time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tooldeck.errors import CheckpointError, SessionError
from tooldeck.results import (
    APPROVALS_STATE,
    Approve,
    Checkpoint,
    Decision,
    RememberedApproval,
    remembered_approvals,
)
from tooldeck.run._engine.state import RunState


def carry_from_session(state: RunState) -> None:
    """As a run starts from a prompt in a session (or is handed on): the ``session``
    approvals the session's last committed run ended with, unless the run keeps its own."""
    states, carried = state.states, state.carried
    if states is not None and APPROVALS_STATE in states:
        return  # resumed, recovered or handed on: the run goes on with its own
    if carried is None or APPROVALS_STATE not in carried:
        return
    try:
        kept = remembered_approvals(carried)
    except ValueError as error:
        raise SessionError(f"the session's kept approvals cannot be read: {error}") from None
    lasting = {item.tool: item.model_dump() for item in kept if item.scope == "session"}
    if lasting:
        state.states = {**(states or {}), APPROVALS_STATE: lasting}


def check_kept(state: RunState, resumed: Checkpoint | None) -> None:
    """Refuse, before anything runs, remembered approvals that are not what tooldeck
    writes (a hand-edited checkpoint or journal)."""
    try:
        remembered_approvals(state.states)
    except ValueError as error:
        if resumed is not None:
            raise CheckpointError(f"the checkpoint's remembered approvals: {error}") from None
        raise SessionError(f"the run journal's remembered approvals: {error}") from None


def remember_decisions(
    state: RunState, resumed: Checkpoint, decisions: Mapping[str, Decision]
) -> None:
    """As a paused run goes on: keep each ``Approve`` with a scope on a call the run made
    itself (a code-mode program's included), by its tool (a session approval is not narrowed
    by a later run one)."""
    for pending in resumed.pending:
        decision = decisions.get(pending.id) if pending.own else None
        if not isinstance(decision, Approve) or decision.scope == "once":
            continue
        states = state.states if state.states is not None else {}
        kept: dict[str, Any] = states.setdefault(APPROVALS_STATE, {})
        before = kept.get(pending.call.name)
        if before is not None and before.get("scope") == "session" and decision.scope == "run":
            continue
        kept[pending.call.name] = RememberedApproval(
            tool=pending.call.name,
            scope=decision.scope,
            by=decision.by,
            call_id=pending.call.id,
            run_id=state.run_id,
        ).model_dump()
        state.states = states


def approval_for(states: Mapping[str, Any] | None, tool: str) -> RememberedApproval | None:
    """The approval the run remembers for ``tool``'s calls, if any."""
    if states is None:
        return None
    kept = states.get(APPROVALS_STATE)
    if not kept or tool not in kept:
        return None
    return RememberedApproval.model_validate(kept[tool])
