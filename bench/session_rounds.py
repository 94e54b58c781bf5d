"""What a session costs a run, round by round: a 10-round run (one async tool call a round,
a scripted model) in a new SQLiteSession of one database, against the same run without a
session. Medians of N runs, wall and CPU (the process's, every thread: the session's
connection thread too). Compare two versions by their source folders:

    for src in ../before/src src; do PYTHONPATH=$src .venv/bin/python bench/session_rounds.py; done
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, tool
from tooldeck.sessions import SQLiteSession

ROUNDS = 10


@tool
async def note(text: str) -> str:
    """Note it."""
    return text


def turns() -> list[AssistantOutput]:
    calls = [
        ToolCall(id=f"c{i}", name="note", arguments={"text": f"x{i}"}) for i in range(ROUNDS - 1)
    ]
    return [*(AssistantOutput(tool_calls=(c,)) for c in calls), AssistantOutput(content="done")]


async def timed(runs: int, in_session: bool) -> tuple[float, float]:
    folder = Path(tempfile.mkdtemp())
    walls: list[float] = []
    cpus: list[float] = []
    for index in range(runs + 5):
        agent = Agent(ScriptedModel(turns()), [note])
        session = SQLiteSession(folder / "s.db", f"s{index}") if in_session else None
        wall, cpu = time.perf_counter(), time.process_time()
        await agent.run("go", session=session)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        if session is not None:
            await session.aclose()
    return statistics.median(walls[5:]), statistics.median(cpus[5:])


async def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    for label, in_session in (("no session", False), ("SQLiteSession", True)):
        wall, cpu = await timed(runs, in_session)
        print(
            f"{label:14} wall {wall * 1e3:6.2f} ms  cpu {cpu * 1e3:6.2f} ms  per {ROUNDS}-round run"
        )


asyncio.run(main())
