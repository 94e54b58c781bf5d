"""What the application decides about a paused call (``Approve``, ``Reject``, an external
call's ``ToolResult``) and the approvals a run remembers (``Approve(scope=...)``).

Public through ``tooldeck`` and ``tooldeck.results``; kept apart from the run's records in
results.py. May import: ``tooldeck.messages``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from tooldeck.messages import FROZEN, ToolResult

ApprovalScope = Literal["once", "run", "session"]
"""How long an ``Approve`` lasts: this call only, every later call of its tool in this run,
or in this run and the session's next runs."""

APPROVAL_SCOPES: tuple[ApprovalScope, ...] = ("once", "run", "session")


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the pending call as stored, or with ``arguments`` edited by the person; with a
    ``scope``, the later calls of its tool too, without asking."""

    arguments: dict[str, Any] | None = None
    """Replacement arguments, validated again against the tool's schema before it runs."""
    by: str = ""
    """Who decided (a user name, "cli", "policy"...), for the run log."""
    scope: ApprovalScope = "once"
    """``"once"``: this call only. ``"run"``: the later calls of the same tool in this run
    run without pausing (after handoffs and resumes too). ``"session"``: those of the
    session's next runs as well. A remembered approval shows in ``RunResult.approvals``."""

    def __post_init__(self) -> None:
        if self.scope not in APPROVAL_SCOPES:
            raise ValueError(
                f"Approve(scope=...) must be 'once', 'run' or 'session', got {self.scope!r}"
            )


class RememberedApproval(BaseModel):
    """A person's ``Approve(scope="run" | "session")``: the later calls of ``tool`` run
    under it without pausing (``RunResult.approvals``; ``ForgetApprovals`` revokes it)."""

    model_config = FROZEN

    tool: str
    scope: Literal["run", "session"]
    by: str = ""
    """Who approved, as ``Approve(by=...)`` said."""
    call_id: str
    """The call the person approved with this scope."""
    run_id: str
    """The run that call was made in."""


APPROVALS_STATE = "tooldeck.approvals"
"""Where a run keeps its remembered approvals among its capability states (a key no
capability class can have): checkpoints, journals and sessions carry them with the rest."""


def remembered_approvals(states: Mapping[str, Any] | None) -> tuple[RememberedApproval, ...]:
    """The remembered approvals kept in a run's capability states, by tool name.

    Raises:
        ValueError: what is kept there is not what tooldeck writes (a hand edit).
    """
    kept = None if states is None else states.get(APPROVALS_STATE)
    if kept is None:
        return ()
    if not isinstance(kept, dict):
        raise ValueError(f"{APPROVALS_STATE} must be an object, got {type(kept).__name__}")
    try:
        return tuple(RememberedApproval.model_validate(entry) for entry in kept.values())
    except ValidationError as error:
        raise ValueError(f"{APPROVALS_STATE} holds a broken approval: {error}") from None


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run the call; the model reads ``error[rejected]: <message>``."""

    message: str = ""
    """Why, in words the model can act on (a default line when empty)."""
    by: str = ""
    """Who decided, for the run log."""


Decision = Approve | Reject | ToolResult
"""What the application says about one pending call (a ToolResult: an external call's outcome)."""
