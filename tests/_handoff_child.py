"""A separate process resuming a run paused inside the agent it was handed to.

    python tests/_handoff_child.py CHECKPOINT_FILE [approve|unknown]

Builds triage -> billing afresh (as another process would), resumes the checkpoint with
triage (the agent the run was started on) approving the paused call, and prints the
result, the requests billing's model received, and the refunds made, as JSON. With
``unknown`` triage has no handoffs to billing: the error is printed instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import answer
from tooldeck import Agent, Approve, ScriptedModel, tool
from tooldeck.errors import CheckpointError

refunds: list[str] = []


@tool(requires_approval=True)
def guarded_refund(order: str) -> str:
    """Refund an order."""
    refunds.append(order)
    return f"refunded {order}"


billing_model = ScriptedModel([answer("Order 42 is refunded.")])
billing = Agent(billing_model, [guarded_refund], name="billing", instructions="You handle billing.")
mode = sys.argv[2] if len(sys.argv) > 2 else "approve"
triage = Agent(ScriptedModel([]), name="triage", handoffs=[] if mode == "unknown" else [billing])
checkpoint = Path(sys.argv[1]).read_text(encoding="utf-8")
try:
    result = triage.resume_sync(checkpoint, {"r1": Approve()})
except CheckpointError as error:
    print(json.dumps({"error": str(error)}))
    sys.exit(0)
request = billing_model.requests[0]
print(
    json.dumps(
        {
            "agent": result.agent,
            "answer": result.answer,
            "stop_reason": str(result.stop_reason),
            "instructions": request.instructions,
            "tools": request.tool_names,
            "refunds": refunds,
        }
    )
)
