"""A separate caller process for tests/test_a2a_client.py and tests/test_a2a_hop.py: an
agent whose tool is a remote A2A agent (the sample agent, or a tooldeck server), its model
the provider simulator (``OPENAI_BASE_URL``).

    python tests/_a2a_child.py SCENARIO WORKDIR REMOTE_URL

- ``pause``: the remote asks for a decision; the caller's signed checkpoint goes to
  WORKDIR/checkpoint.json.
- ``resume``: an agent built afresh resumes it, the remote's pending call approved.
- ``reject``: the same, the call rejected with the reason in ``$A2A_REJECT_REASON``.

``$A2A_BEARER`` (a token sent with every request to the remote) and ``$A2A_NAME`` (the
remote tool's name) are used when set.

The outcome is printed as JSON on the last line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from helpers import tool_messages
from tooldeck import Agent, Approve, Reject
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.remote import A2AAgent

scenario, workdir_text, remote_url = sys.argv[1:4]
workdir = Path(workdir_text)
KEY = b"a2a-tests-key"


async def caller() -> Agent[None, str]:
    model = OpenAIChatModel(
        "caller-model",
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        max_retries=0,
    )
    token = os.environ.get("A2A_BEARER")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    name = os.environ.get("A2A_NAME")
    remote = A2AAgent(remote_url, allowed=[remote_url], headers=headers, name=name)
    await remote.connect()
    return Agent(model, tools=[remote.as_tool()], checkpoint_key=KEY)


async def main() -> None:
    agent = await caller()
    checkpoint = workdir / "checkpoint.json"
    if scenario == "pause":
        result = await agent.run("Mail the ops team")
        assert result.checkpoint is not None
        checkpoint.write_text(result.checkpoint.to_json(), encoding="utf-8")
    else:
        stored = checkpoint.read_text(encoding="utf-8")
        from tooldeck import Checkpoint

        ids = [p.id for p in Checkpoint.from_json(stored).pending]
        reason = os.environ.get("A2A_REJECT_REASON", "")
        decision = Reject(reason) if scenario == "reject" else Approve()
        result = await agent.resume(stored, {ids[0]: decision})
    outcome = {
        "answer": result.answer,
        "stop_reason": str(result.stop_reason),
        "pending": [
            {"id": p.id, "name": p.call.name, "arguments": p.call.arguments, "reason": p.reason}
            for p in result.pending
        ],
        "read": tool_messages(result.messages),
        "tainted": result.tainted_by is not None,
    }
    print(json.dumps(outcome))


asyncio.run(main())
