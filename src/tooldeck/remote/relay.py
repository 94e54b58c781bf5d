"""A remote agent as a handoff target: a local agent that only relays to it.

``remote.as_agent()`` is an ``Agent`` whose one tool is ``remote.as_tool()`` and whose model
(``RelayModel``) asks no provider: handed the conversation, it calls the remote with it
(``handed_text``), then answers with what the remote said. So a handoff to a remote goes
through the tool path, with all it brings: the reply is untrusted content (the run is
tainted), its text streams nested under the call, a remote input request pauses the run,
and a failure is ``error[remote_error]``, which the relay answers as it is.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from tooldeck.messages import AssistantOutput, Message, ToolCall
from tooldeck.models.base import Ask, AskModel

TRANSFER = "transfer_to_"
"""The start of a handoff tool's name (``tooldeck.run.handoff``): the transfer itself is
not part of what the remote is told."""
HANDED_OVER = "The conversation so far, handed over to you (oldest first):"
ANSWER_LAST = "Answer the user's last message:"


class RelayModel(AskModel):
    """Answers by calling one tool with the conversation it is handed (``handed_text``),
    then with its result."""

    name = "a2a-relay"

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name

    async def answer(self, ask: Ask) -> AssistantOutput:
        """Call the remote tool; once it has answered, answer with what it said."""
        messages = list(ask.messages)
        answered = _answer_to(messages, self.tool_name)
        if answered is not None:
            return AssistantOutput(content=answered)
        prompt = handed_text(messages, self.tool_name)
        call_id = f"relay-{uuid.uuid4().hex[:12]}"
        call = ToolCall(id=call_id, name=self.tool_name, arguments={"input": prompt})
        return AssistantOutput(tool_calls=(call,))


def _answer_to(messages: list[Message], tool_name: str) -> str | None:
    """The result of the relay's last call, when it is the conversation's last message."""
    if len(messages) < 2 or messages[-1].role != "tool":
        return None
    turn = messages[-2]
    calls = {call.id: call.name for call in turn.tool_calls}
    if calls.get(messages[-1].tool_call_id or "") != tool_name:
        return None
    return messages[-1].content


def handed_text(messages: Sequence[Message], relay_tool: str) -> str:
    """What the remote is sent of the conversation the handoff carries (what a local agent
    handed the run would read, by the handoff's ``sees=``): the user's last message alone
    when nothing else came before it; else each message on a line (``user: ...``,
    ``assistant: ...``, ``assistant called name({...})``, ``tool result: ...``), then that
    message again as the one to answer. The transfer calls and the relay's own earlier calls
    (``relay_tool``; their answers are the assistant's) are left out, with their results."""
    lines: list[str] = []
    left_out: set[str] = set()
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id not in left_out:
                lines.append(f"tool result: {message.content}")
            continue
        if message.role not in ("user", "assistant"):
            continue
        if message.content:
            lines.append(f"{message.role}: {message.content}")
        for call in message.tool_calls:
            if call.name.startswith(TRANSFER) or call.name == relay_tool:
                left_out.add(call.id)
                continue
            arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
            lines.append(f"assistant called {call.name}({arguments})")
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    if lines == [f"user: {last}"]:
        return last
    return "\n".join([HANDED_OVER, *lines, "", ANSWER_LAST, last])
