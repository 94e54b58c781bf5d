"""A stored conversation made well-formed before a model reads it again.

Providers refuse a conversation in which a tool call has no result, or a result answers no
call. tooldeck's own sessions store whole turns, but a history written by another store,
edited by hand, or ended by ``on_limit="final_answer"`` (whose last turn may hold calls
that never ran) can break that rule; ``repair`` restores it when a session is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence

from tooldeck.errors import ErrorCode
from tooldeck.messages import Message, ToolResult

INTERRUPTED_TEXT = (
    "the result of this call was lost: the run stopped before it was answered and stored. "
    "Call the tool again if you still need its result."
)


def repair(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Answer every tool call exactly once, right after the assistant turn that made it.

    A call without a result gets an ``error[interrupted]`` observation; a result that
    answers no open call of the turn just before it (an orphan, or a second answer) is
    dropped. A well-formed history is returned unchanged.
    """
    repaired: list[Message] = []
    waiting: dict[str, None] = {}
    """Ids of the latest assistant turn's calls that have no result yet, in the model's order."""
    changed = False
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in waiting:
                del waiting[message.tool_call_id]
                repaired.append(message)
            else:
                changed = True
            continue
        if waiting:
            repaired.extend(_interrupted(waiting))
            changed = True
        repaired.append(message)
        waiting = dict.fromkeys(call.id for call in message.tool_calls)
    if waiting:
        repaired.extend(_interrupted(waiting))
        changed = True
    return tuple(repaired) if changed else tuple(messages)


def _interrupted(call_ids: dict[str, None]) -> list[Message]:
    text = ToolResult.failure(ErrorCode.INTERRUPTED, INTERRUPTED_TEXT).output
    return [Message.tool(call_id, text) for call_id in call_ids]
