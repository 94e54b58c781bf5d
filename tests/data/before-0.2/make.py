"""Made by tooldeck at f4fea0e (before the house rebuilt): a paused run's checkpoint (signed),
a session holding a finished run and a paused one, and a run log of both."""

import asyncio
import sys
from pathlib import Path

from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, tool
from tooldeck.runlog import RunLog
from tooldeck.sessions import SQLiteSession

out = Path(sys.argv[1])


@tool
def add(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def calls(*made):
    return AssistantOutput(tool_calls=tuple(made))


async def main():
    log = RunLog(out / "logs.db")
    model = ScriptedModel(
        [
            calls(ToolCall(id="a1", name="add", arguments={"left": 2, "right": 3})),
            AssistantOutput(content="5"),
            calls(
                ToolCall(id="d1", name="delete_file", arguments={"path": "a.txt"}),
                ToolCall(id="a2", name="add", arguments={"left": 1, "right": 1}),
            ),
        ]
    )
    agent = Agent(
        model, [add, delete_file], checkpoint_key=b"old-key", run_log=log, instructions="Use tools."
    )
    session = SQLiteSession(out / "sessions.db", "conversation-1")
    done = await agent.run("Add 2 and 3.", session=session, run_id="run-1")
    paused = await agent.run("Delete a.txt.", session=session, run_id="run-2")
    assert paused.stop_reason == "paused", paused.stop_reason
    (out / "checkpoint.json").write_text(paused.checkpoint.to_json())
    await session.aclose()
    log.close()
    print(done.answer, [p.id for p in paused.pending])


asyncio.run(main())
