"""A remote agent as a handoff target: a local agent that only relays to it.

``remote.as_agent()`` is an ``Agent`` whose one tool is ``remote.as_tool()`` and whose model
(``RelayModel``) asks no provider: handed the conversation, it calls the remote with the
last user message, then answers with what the remote said. So a handoff to a remote goes
through the tool path, with all it brings: the reply is untrusted content (the run is
tainted), its text streams nested under the call, a remote input request pauses the run,
and a failure is ``error[remote_error]``, which the relay answers as it is.
"""

from __future__ import annotations

import uuid

from tooldeck.messages import AssistantOutput, Message, ToolCall
from tooldeck.models.base import Ask, AskModel


class RelayModel(AskModel):
    """Answers by calling one tool with the last user message, then with its result."""

    name = "a2a-relay"

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name

    async def answer(self, ask: Ask) -> AssistantOutput:
        """Call the remote tool; once it has answered, answer with what it said."""
        messages = list(ask.messages)
        answered = _answer_to(messages, self.tool_name)
        if answered is not None:
            return AssistantOutput(content=answered)
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
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
