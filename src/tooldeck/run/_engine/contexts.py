"""The one place a run builds a ``RunContext``: for a tool's handler, a middleware hook, an
approval rule, a guardrail, an output validator, a recovered call's ``reconcile``.

By name, never by position: a field added to ``RunContext`` is added here, and given by the
callers that know it (the others keep its default).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from tooldeck._budget import Budget
from tooldeck.messages import Message
from tooldeck.tools.context import Resumption, RunContext, ToolChanges
from tooldeck.tools.outputs import OutputStore


def run_context(
    *,
    deps: Any,
    round: int,
    run_id: str,
    call_id: str = "",
    tool_name: str = "",
    messages: Sequence[Message] = (),
    registry: ToolChanges | None = None,
    emit: Callable[[Any], None] | None = None,
    resumed: Resumption | None = None,
    outputs: OutputStore | None = None,
    cancelled: threading.Event | None = None,
    budget: Budget | None = None,
    inherited: object = None,
    states: dict[str, Any] | None = None,
) -> RunContext[Any]:
    """The context of a call (``call_id``, ``tool_name``) or of the run itself (a guardrail:
    both empty), at model turn ``round``; see ``RunContext`` for each field."""
    return RunContext(
        call_id=call_id,
        tool_name=tool_name,
        deps=deps,
        round=round,
        run_id=run_id,
        registry=registry,
        messages=messages,
        emit=emit,
        resumed=resumed,
        outputs=outputs,
        cancelled=cancelled,
        budget=budget,
        inherited=inherited,
        states=states,
    )
