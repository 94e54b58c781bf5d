"""The records a run keeps of its safety checks: what each guardrail decided, and which call
brought untrusted content into the conversation.

Layer 1 (beside ``tooldeck.messages``, below ``tooldeck.results``, which holds them in a
run's result and checkpoint). May import: ``tooldeck.messages``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from tooldeck.messages import FROZEN

__all__ = ["GuardrailDecision", "GuardrailStage", "UntrustedSource"]

GuardrailStage = Literal["input", "output", "arguments", "result"]
"""Where a guardrail ran: on the prompt, the answer, a call's arguments or its result."""


class GuardrailDecision(BaseModel):
    """What one guardrail decided, as the run's trace keeps it (``RunResult.guardrails``)."""

    model_config = FROZEN

    name: str
    stage: GuardrailStage
    """The prompt, the answer, a call's arguments (before approval) or its result."""
    verdict: Literal["passed", "tripped", "refused", "replaced", "retry"]
    """``tripped`` stopped the run; ``retry``: the model was asked again with the message."""
    message: str = ""
    round: int = 0
    call_id: str = ""
    """The call a tool guardrail judged."""


class UntrustedSource(BaseModel):
    """The call whose result first brought untrusted content into the conversation (a
    tool marked ``trust="untrusted"``): from then on the run's context is *tainted*."""

    model_config = FROZEN

    call_id: str
    tool_name: str
    round: int = 0
    """The round of the run it came in (0: an earlier run of the conversation)."""

    def describe(self) -> str:
        """``'fetch_page' (call 'c1')``, for messages that say where it came from."""
        return f"{self.tool_name!r} (call {self.call_id!r})"


def unsigned_safety_defaults(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's payload (``model_dump(mode="json")``) without the fields of these
    records where they hold their defaults (no decision, no untrusted content): a checkpoint
    signed before the fields existed still verifies."""
    turn = checkpoint["turn"]
    drops: list[tuple[dict[str, Any], str, object]] = [
        (checkpoint, "guardrails", []),
        (checkpoint, "tainted_by", None),
        (checkpoint, "agent", ""),
        (checkpoint, "shown", None),
        (checkpoint, "capability_states", None),
        (checkpoint, "queued", []),
        (turn, "untrusted", []),
    ]
    drops += [(message, "untrusted", False) for message in checkpoint["messages"]]
    for pending in turn["pending"]:
        drops += [(pending, "reason", ""), (pending, "own", True), (pending, "where", "")]
        drops.append((pending, "reaches", []))
    for record, key, empty in drops:
        if key in record and record[key] == empty:
            del record[key]
    for pending in turn["pending"]:
        if pending.get("nested"):
            unsigned_safety_defaults(pending["nested"])
    return checkpoint
