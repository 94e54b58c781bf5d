"""Session storage: tooldeck's sessions beside the OpenAI Agents SDK's, in one harness.

    .venv/bin/python bench/sessions.py              # alternating rounds, prints the table
    .venv/bin/python bench/sessions.py --rounds 1   # a quick look
    .venv/bin/python bench/sessions.py --split      # where a SQLite append's time goes

Figures per store, all from the application's side of an ``await``, as wall time and as
the process's CPU time (every thread; not the PostgreSQL server's) — on a shared, loaded
machine the CPU time is the steadier figure, since wall time also counts the waits for a
core and for the disk:
- append: commit one 4-item turn (user prompt, tool call, tool result, answer) to a session
  that already holds turns; the median of 300 appends, microseconds;
- load: read a session of 1,000 such turns (4,000 items) back; the median of 15 loads, ms.
  tooldeck keeps the turns it decoded (a stored turn never changes), per process for the
  session objects of one conversation, so for it "cold" is the load of a process that has
  not read the session (the process's cache emptied first: everything decoded), "a new
  session object" one made after the process has read the session (a request handler's
  object, say), and "load again" the same object's next load; the other library decodes
  everything every time.

Stores: tooldeck's SQLiteSession (synchronous NORMAL, the default, and FULL) and
PostgresSession; the OpenAI Agents SDK 0.24.0's SQLiteSession (WAL, synchronous FULL, its
defaults) and SQLAlchemySession (on SQLite through aiosqlite, and on PostgreSQL through
asyncpg). PostgreSQL is pgserver's 16 on a Unix socket, started here. The other library runs
from its own virtual environment ($BENCH_VENVS/openai_agents, made by bench/setup_venvs.sh
with the SDK's sqlalchemy extra and aiosqlite); each round runs both
libraries, one after the other, in fresh processes. The script is stdlib-only at import so
the same file runs in both environments (``--worker``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VENVS = Path(os.environ.get("BENCH_VENVS", Path.home() / ".cache/tooldeck-bench/venvs"))
COUNTS = {"appends": 300, "turns": 1000, "loads": 15}
"""Timed appends, turns in the loaded session, timed loads (``--quick``: a few of each)."""


class Store:
    """One session store of one library: how to open it, append a turn, load it all."""

    async def open(self, session_id: str) -> None:
        raise NotImplementedError

    async def append(self) -> None:
        raise NotImplementedError

    async def load(self) -> int:
        """Read the whole session; return how many items came back (to check the work)."""
        raise NotImplementedError

    async def first_load(self) -> int:
        """A load in a process that has not read the session (no cache: the same as load)."""
        return await self.load()

    async def object_load(self) -> int:
        """A load by a new session object in a process that has read the session."""
        return await self.first_load()

    async def close(self) -> None:
        raise NotImplementedError


class ToolDeckStore(Store):
    def __init__(self, kind: str, where: str, synchronous: str = "NORMAL") -> None:
        from tooldeck import AssistantOutput, Message, ToolCall

        self.kind, self.where, self.synchronous = kind, where, synchronous
        call = ToolCall(id="call_1", name="add_numbers", arguments={"left": 2, "right": 3})
        self.turn = (
            Message.user("What is 2 + 3? Please use the tool."),
            Message.assistant(AssistantOutput(tool_calls=(call,))),
            Message.tool("call_1", "5"),
            Message.assistant(AssistantOutput(content="2 + 3 = 5")),
        )

    async def open(self, session_id: str) -> None:
        self.pool: Any = None
        if self.kind == "postgres":  # one pool, so a new session object reuses a connection
            from psycopg_pool import AsyncConnectionPool

            self.pool = AsyncConnectionPool(self.where, kwargs={"autocommit": True}, open=False)
            await self.pool.open()
        self.session_id = session_id
        self.session = self._new_session()
        self.head = (await self.session.load()).head

    def _new_session(self) -> Any:
        from tooldeck.sessions import PostgresSession, SQLiteSession

        if self.kind == "sqlite":
            synchronous: Any = self.synchronous
            return SQLiteSession(self.where, self.session_id, synchronous=synchronous)
        return PostgresSession(self.pool, self.session_id)

    async def first_load(self) -> int:
        from tooldeck.sessions import stored_run_cache

        stored_run_cache.clear()  # as in a new process: nothing decoded yet
        return await self.object_load()

    async def object_load(self) -> int:
        fresh = self._new_session()
        loaded = len((await fresh.load()).messages)
        await fresh.aclose()
        return loaded

    async def append(self) -> None:
        from tooldeck.sessions import Turn

        turn = Turn(uuid.uuid4().hex, self.turn)
        self.head = await self.session.append(turn, after=self.head)

    async def load(self) -> int:
        return len((await self.session.load()).messages)

    async def close(self) -> None:
        await self.session.aclose()
        if self.pool is not None:
            await self.pool.close()


OPENAI_TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "What is 2 + 3? Please use the tool."},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "add_numbers",
        "arguments": '{"left": 2, "right": 3}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "5"},
    {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "2 + 3 = 5", "annotations": []}],
    },
]


class OpenAIStore(Store):
    def __init__(self, kind: str, where: str) -> None:
        self.kind, self.where = kind, where

    async def open(self, session_id: str) -> None:
        if self.kind == "sqlite":
            from agents import SQLiteSession

            self.session: Any = SQLiteSession(session_id, self.where)
        else:
            from agents.extensions.memory import SQLAlchemySession

            self.session = SQLAlchemySession.from_url(
                session_id, url=self.where, create_tables=True
            )

    async def append(self) -> None:
        await self.session.add_items(OPENAI_TURN)

    async def load(self) -> int:
        return len(await self.session.get_items())

    async def close(self) -> None:
        if self.kind == "sqlite":
            self.session.close()
        else:
            await self.session.engine.dispose()


async def measure(store: Store) -> dict[str, float]:
    """The append and load medians of one store."""
    # Start with no dirty pages waiting: on ext4 an fsync also flushes other files' data,
    # so a store measured after another's writes would pay for them (synchronous FULL).
    os.sync()
    await store.open(f"append-{uuid.uuid4().hex}")
    for _ in range(30):  # warm up: connections, prepared statements, caches
        await store.append()
    appends = [await _timed(store.append) for _ in range(COUNTS["appends"])]
    await store.close()
    await store.open(f"load-{uuid.uuid4().hex}")
    for _ in range(COUNTS["turns"]):
        await store.append()
    first_loads = [await _timed(store.first_load) for _ in range(COUNTS["loads"])]
    assert await store.load() == await store.first_load() == 4 * COUNTS["turns"]
    object_loads = [await _timed(store.object_load) for _ in range(COUNTS["loads"])]
    loads = [await _timed(store.load) for _ in range(COUNTS["loads"])]
    await store.close()
    return {
        "append_us": _median(appends, 0) * 1e6,
        "append_cpu_us": _median(appends, 1) * 1e6,
        "first_load_ms": _median(first_loads, 0) * 1e3,
        "first_load_cpu_ms": _median(first_loads, 1) * 1e3,
        "object_load_ms": _median(object_loads, 0) * 1e3,
        "object_load_cpu_ms": _median(object_loads, 1) * 1e3,
        "load_ms": _median(loads, 0) * 1e3,
        "load_cpu_ms": _median(loads, 1) * 1e3,
    }


async def _timed(step: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """Wall time, and CPU time of this process (every thread: the database's too)."""
    wall, cpu = time.perf_counter(), time.process_time()
    await step()
    return time.perf_counter() - wall, time.process_time() - cpu


def _median(samples: list[tuple[float, float]], which: int) -> float:
    return statistics.median(sample[which] for sample in samples)


def worker(library: str, workdir: Path, postgres: str) -> dict[str, dict[str, float]]:
    """Every store of one library, in this process."""
    stores: dict[str, Store]
    if library == "tooldeck":
        stores = {
            "SQLite (NORMAL)": ToolDeckStore("sqlite", str(workdir / "td-normal.db")),
            "SQLite (FULL)": ToolDeckStore("sqlite", str(workdir / "td-full.db"), "FULL"),
            "PostgreSQL": ToolDeckStore("postgres", postgres),
        }
    else:
        asyncpg_url = postgres.replace("postgresql://", "postgresql+asyncpg://", 1)
        stores = {
            "SQLiteSession (FULL)": OpenAIStore("sqlite", str(workdir / "oa.db")),
            "SQLAlchemySession, SQLite": OpenAIStore(
                "sqlalchemy", f"sqlite+aiosqlite:///{workdir / 'oa-sqlalchemy.db'}"
            ),
            "SQLAlchemySession, PostgreSQL": OpenAIStore("sqlalchemy", asyncpg_url),
        }
    return {name: asyncio.run(measure(store)) for name, store in stores.items()}


def start_postgres(root: Path) -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    return pgserver.get_server(root / "pgdata", cleanup_mode="delete")


def drive(rounds: int) -> None:
    other = VENVS / "openai_agents" / "bin" / "python"
    if not other.exists():
        sys.exit(f"{other} is missing: run bench/setup_venvs.sh (see this script's docstring)")
    pythons = {"tooldeck": Path(sys.executable), "openai_agents": other}
    with tempfile.TemporaryDirectory(prefix="tooldeck-bench-sessions-") as tmp:
        server = start_postgres(Path(tmp))
        postgres = server.get_uri()
        results: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in pythons}
        loads, fsyncs = [], []
        for round_ in range(rounds):
            for library, python in pythons.items():
                workdir = Path(tmp) / f"{library}-{round_}"
                workdir.mkdir()
                loads.append(os.getloadavg()[0])
                fsyncs.append(fsync_us(workdir))
                command = [str(python), __file__, "--worker", library, str(workdir), postgres]
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                results[library].append(json.loads(done.stdout))
                print(f"round {round_ + 1} {library}: {done.stdout.strip()}", file=sys.stderr)
        server.cleanup()
    print_table(results, loads, fsyncs)


def fsync_us(folder: Path) -> float:
    """The median time of an fsync after a 4 KiB write here: what synchronous FULL pays."""
    probe = folder / "fsync-probe"
    times = []
    with probe.open("wb") as handle:
        for _ in range(20):
            handle.write(b"x" * 4096)
            handle.flush()
            started = time.perf_counter()
            os.fsync(handle.fileno())
            times.append(time.perf_counter() - started)
    probe.unlink()
    return statistics.median(times) * 1e6


def print_table(
    results: dict[str, list[dict[str, dict[str, float]]]], loads: list[float], fsyncs: list[float]
) -> None:
    print(
        "| library | store | append a 4-item turn: wall / CPU (µs) "
        "| load 1,000 turns, cold: wall / CPU (ms) | by a new session object (ms) "
        "| load again (ms) |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for library, rounds in results.items():
        for store in rounds[0]:
            cells = [_cell(rounds, store, *figure) for figure in FIGURES]
            print(f"| {library} | {store} | {' | '.join(cells)} |")
    print(f"\n1-minute load average during the runs: {min(loads):.1f} to {max(loads):.1f}")
    print(f"fsync of a 4 KiB write, median per round: {min(fsyncs):.0f} to {max(fsyncs):.0f} µs")


FIGURES = (
    ("append", "us", 0),
    ("first_load", "ms", 1),
    ("object_load", "ms", 1),
    ("load", "ms", 1),
)
"""(figure, unit, decimals): the table's columns."""


def _cell(
    rounds: list[dict[str, dict[str, float]]], store: str, name: str, unit: str, digits: int
) -> str:
    """The median over rounds of one figure: wall / CPU."""
    wall = statistics.median(r[store][f"{name}_{unit}"] for r in rounds)
    cpu = statistics.median(r[store][f"{name}_cpu_{unit}"] for r in rounds)
    return f"{wall:.{digits}f} / {cpu:.{digits}f}"


async def split_append(folder: Path) -> dict[str, float]:
    """Where a SQLite append's time goes (medians of 300, µs): encoding the turn, the round
    trip to the connection thread with an empty job, and the SQL transaction in the thread."""
    from tooldeck.sessions import SQLiteSession, Turn, _log
    from tooldeck.sessions.sqlite import _append, _write

    store = ToolDeckStore("sqlite", str(folder / "split.db"))
    session = SQLiteSession(store.where, "split")
    head = (await session.load()).head

    def turn() -> Turn:
        return Turn(uuid.uuid4().hex, store.turn)

    encode, hop, transaction = [], [], []
    for _ in range(COUNTS["appends"]):
        started = time.perf_counter()
        parameters = _log.append_parameters("split", turn(), head)
        encode.append(time.perf_counter() - started)
        started = time.perf_counter()
        await session._run(lambda db: None)
        hop.append(time.perf_counter() - started)

        def commit(db: Any, parameters: tuple[Any, ...] = parameters) -> float:
            started = time.perf_counter()
            _write(db, _append, parameters)
            return time.perf_counter() - started

        transaction.append(await session._run(commit))
        head += 1
    await session.aclose()
    return {
        name: statistics.median(samples) * 1e6
        for name, samples in (("encode", encode), ("hop", hop), ("transaction", transaction))
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--worker", nargs=3, metavar=("LIBRARY", "WORKDIR", "POSTGRES"))
    parser.add_argument("--quick", action="store_true", help="a few of each (a smoke test)")
    parser.add_argument(
        "--split", action="store_true", help="where a SQLite append's time goes (tooldeck only)"
    )
    options = parser.parse_args()
    if options.quick:
        COUNTS.update(appends=5, turns=20, loads=2)
    if options.split:
        with tempfile.TemporaryDirectory() as folder:
            parts = asyncio.run(split_append(Path(folder)))
        print(", ".join(f"{name} {value:.0f} µs" for name, value in parts.items()))
    elif options.worker:
        library, workdir, postgres = options.worker
        print(json.dumps(worker(library, Path(workdir), postgres)))
    else:
        drive(options.rounds)


if __name__ == "__main__":
    main()
