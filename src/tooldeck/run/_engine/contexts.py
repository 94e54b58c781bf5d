"""The one place a run builds a ``RunContext``: for a tool's handler, a middleware hook, an
approval rule, a guardrail, an output validator, a recovered call's ``reconcile``.

Its parameters are ``RunContext``'s fields in their order: callers name each field they give
(a field added to ``RunContext`` is added here, and given by the callers that know it),
but for the one on every tool call, ``CallRound.context``, which passes them in that order:
a call with fourteen keywords costs 0.4 us more than one with fourteen positions, 2% of a
W1a round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from tooldeck._budget import Budget
from tooldeck.messages import Message
from tooldeck.tools.context import Resumption, RunContext, ToolCaller, ToolChanges
from tooldeck.tools.outputs import OutputStore


def run_context(
    call_id: str,
    tool_name: str,
    deps: Any,
    round: int = 0,
    run_id: str = "",
    registry: ToolChanges | None = None,
    messages: Sequence[Message] = (),
    emit: Callable[[Any], None] | None = None,
    resumed: Resumption | None = None,
    outputs: OutputStore | None = None,
    cancelled: threading.Event | None = None,
    budget: Budget | None = None,
    inherited: object = None,
    states: dict[str, Any] | None = None,
    caller: ToolCaller | None = None,
) -> RunContext[Any]:
    """The context of a call (``call_id``, ``tool_name``) or of the run itself (a guardrail:
    both empty), at model turn ``round``; see ``RunContext`` for each field."""
    # Positional, in RunContext's field order: a class called with keywords builds a dict of
    # them each time (0.65 us more a call, 2-3% of W1a's round). The names match the fields
    # one for one, which tests/test_structure_36.py holds.
    return RunContext(
        call_id,
        tool_name,
        deps,
        round,
        run_id,
        registry,
        messages,
        emit,
        resumed,
        outputs,
        cancelled,
        budget,
        inherited,
        states,
        caller,
    )
