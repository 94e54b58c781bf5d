"""A separate process for the session tests: one scenario on one session, its outcome as JSON.

    python tests/_session_child.py KIND WHERE SESSION_ID WORKDIR SCENARIO [NAME]

KIND/WHERE name the database (``sqlite PATH`` or ``postgres DSN``). Processes that must
overlap meet at a barrier of files in WORKDIR: each writes ``ready-NAME`` and waits for
``go``. Scenarios:

- ``race``: one run whose tool waits at the barrier (so every racer has loaded the
  session before any commits); prints ``committed`` or ``conflict``.
- ``retry``: three runs, each run again after a conflict until it is committed.
- ``resume``: at the barrier, resume the session's paused ``delete_file`` call (approved);
  the tool appends a line to WORKDIR/executed; prints ``resumed`` or ``refused``.
- ``hang-in-tool``: a run whose tool writes WORKDIR/in-tool and sleeps (to be killed).
- ``hang-in-write``: a run whose commit writes WORKDIR/in-write after its INSERT, before
  its COMMIT, and sleeps (to be killed with the transaction open). On PostgreSQL the
  session gets a pool without autocommit, so its append is BEGIN, INSERT, COMMIT (with
  autocommit the append is one INSERT statement: atomic at the server, with no window).
- ``big-writes``: appends large turns forever (to be killed at a random moment).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from helpers import answer, call, calls
from tooldeck import Agent, Approve, Message, ScriptedModel, tool
from tooldeck.errors import CheckpointError, SessionConflict
from tooldeck.sessions import PostgresSession, Session, SQLiteSession, StoredRun

kind, where, session_id, workdir_text, scenario = sys.argv[1:6]
name = sys.argv[6] if len(sys.argv) > 6 else "child"
workdir = Path(workdir_text)


async def at_barrier() -> None:
    (workdir / f"ready-{name}").touch()
    deadline = time.monotonic() + 120
    while not (workdir / "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the parent never said go")
        await asyncio.sleep(0.005)


@tool
async def slow_step() -> str:
    """Take a moment, so runs of several processes overlap."""
    await asyncio.sleep(0.02)
    return "stepped"


@tool
async def hang() -> str:
    """Never return."""
    (workdir / "in-tool").touch()
    await asyncio.sleep(3600)
    return "unreachable"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (records that it ran)."""
    with (workdir / "executed").open("a") as record:
        record.write(f"{os.getpid()} {path}\n")
    return f"deleted {path}"


async def open_session() -> Session:
    if kind == "sqlite":
        return SQLiteSession(where, session_id)
    if scenario == "hang-in-write":
        from psycopg_pool import AsyncConnectionPool

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(where, open=False)
        await pool.open()
        return PostgresSession(pool, session_id)
    return PostgresSession(where, session_id)


async def race(session: Session) -> dict[str, Any]:
    model = ScriptedModel([calls(call("slow_step", "w1")), answer(f"answer of {name}")])
    await at_barrier()  # the racers start their runs together
    try:
        result = await Agent(model, [slow_step]).run(f"prompt of {name}", session=session)
    except SessionConflict as conflict:
        kept = conflict.result.answer if conflict.result is not None else "(no result)"
        return {"outcome": "conflict", "answer": kept}
    return {"outcome": "committed", "answer": result.answer}


async def retry(session: Session) -> dict[str, Any]:
    conflicts = 0
    for turn in range(3):
        script = [calls(call("slow_step", f"s{turn}")), answer(f"answer {name}-{turn}")]
        while True:
            agent = Agent(ScriptedModel(script), [slow_step])
            try:
                await agent.run(f"prompt {name}-{turn}", session=session)
                break
            except SessionConflict:
                conflicts += 1
    return {"outcome": "done", "conflicts": conflicts}


async def resume(session: Session) -> dict[str, Any]:
    agent = Agent(ScriptedModel([answer("Deleted.")]), [delete_file])
    await at_barrier()
    try:
        result = await agent.resume(session=session, decisions={"d1": Approve()})
    except CheckpointError as refused:
        return {"outcome": "refused", "message": str(refused)}
    return {"outcome": "resumed", "answer": result.answer}


async def hang_in_tool(session: Session) -> dict[str, Any]:
    model = ScriptedModel([calls(call("hang", "h1")), answer("never")])
    await Agent(model, [hang]).run("this run is killed in its tool", session=session)
    return {"outcome": "not killed"}


async def hang_in_write(session: Session) -> dict[str, Any]:
    pause_inside_the_write_transaction()
    await Agent(ScriptedModel([answer("unstored")])).run("killed in its commit", session=session)
    return {"outcome": "not killed"}


def pause_inside_the_write_transaction() -> None:
    """Wrap the backend's INSERT so the process stops after it, before the COMMIT."""
    if kind == "sqlite":
        import tooldeck.sessions.sqlite as backend

        inserted = backend._append

        def append_then_hang(db: Any, parameters: Any) -> bool:
            inserted(db, parameters)
            (workdir / "in-write").touch()
            time.sleep(3600)
            return True

        backend._append = append_then_hang
    else:
        import tooldeck.sessions.postgres as pg_backend

        insert = pg_backend._insert_if_head

        async def insert_then_hang(db: Any, statement: Any) -> bool:
            await insert(db, statement)
            (workdir / "in-write").touch()
            await asyncio.sleep(3600)
            return True

        pg_backend._insert_if_head = insert_then_hang


async def big_writes(session: Session) -> dict[str, Any]:
    head = (await session.load()).head
    while True:
        turn = StoredRun(
            f"big-{head}", (Message.user(f"big {head}"), Message.user("x" * 2_000_000))
        )
        head = await session.append(turn, after=head)
        (workdir / "wrote-one").touch()


SCENARIOS = {
    "race": race,
    "retry": retry,
    "resume": resume,
    "hang-in-tool": hang_in_tool,
    "hang-in-write": hang_in_write,
    "big-writes": big_writes,
}


async def main() -> None:
    session = await open_session()
    try:
        outcome = await SCENARIOS[scenario](session)
    finally:
        await session.aclose()
    print(json.dumps(outcome), flush=True)


asyncio.run(main())
