"""Durable runs across processes: queue throughput with 1 and 2 workers, and recovery time.

Throughput: worker processes (each ``DBOS.launch()`` in its event loop, a queue with
``worker_concurrency``) take scripted runs (bench/durable.py's 4 requests + 3 tool calls,
7 steps) from one DBOS queue; this process enqueues them once every worker is serving and
times from the first enqueue to the last run's end. SQLite (one file shared by the
processes) and PostgreSQL (a server started here with ``pgserver``, the tests' dev
dependency, over a Unix socket).

Recovery: a worker is SIGKILLed while a run's tool sleeps; a new worker with the same
executor id is started; the figure is the time from starting that process to the run's end,
split into the process's start (imports, ``DBOS.launch()``) and the recovery itself (the
replay of the recorded steps and the steps left).

    .venv/bin/python bench/durable_workers.py [--runs 200] [--databases sqlite,postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSClient

HERE = Path(__file__).resolve().parent
QUEUE = "bench-runs"
NAME = "bench-workers"


def declare() -> Any:
    from durable import LoopModel, add  # bench/durable.py: the same workload
    from tooldeck import Agent
    from tooldeck.durable import DurableAgent

    return DurableAgent(Agent(LoopModel(), [add]), name=NAME)


def configure(db: str, executor: str, schema: str) -> None:
    DBOS(
        config={
            "name": "tooldeck-bench-workers",
            "system_database_url": db,
            "executor_id": executor,
            "application_version": "bench",
            "dbos_system_schema": schema,
            "log_level": "ERROR",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )


async def serve(args: argparse.Namespace) -> None:
    declare()
    configure(args.db, args.executor, args.schema)
    DBOS.launch()
    await DBOS.register_queue_async(
        QUEUE, worker_concurrency=args.concurrency, polling_interval_sec=0.05
    )
    print(json.dumps({"serving": args.executor, "at": time.time()}), flush=True)
    await asyncio.Event().wait()


def spawn(db: str, executor: str, schema: str, env: dict[str, str] | None = None) -> Any:
    argv = [sys.executable, __file__, "--serve", "--db", db, "--executor", executor]
    argv += ["--schema", schema]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )


def ready(process: Any) -> float:
    """Wait for a worker's first line; the time it said it was serving."""
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"a worker exited with {process.wait()}")
    return float(json.loads(line)["at"])


def wait_done(client: DBOSClient, ids: list[str], timeout_s: float = 600) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = client.list_workflows(
            workflow_ids=ids, status="SUCCESS", load_input=False, load_output=False
        )
        if len(done) == len(ids):
            return time.time()
        time.sleep(0.05)
    raise TimeoutError(f"runs did not finish in {timeout_s} s")


async def enqueue(count: int) -> list[str]:
    durable = _DECLARED[0]
    await DBOS.register_queue_async(QUEUE, worker_concurrency=16, polling_interval_sec=0.05)
    ids = [f"run-{uuid.uuid4().hex[:12]}" for _ in range(count)]
    for run_id in ids:
        await durable.start_async("go", run_id=run_id, queue=QUEUE)
    return ids


_DECLARED: list[Any] = []


def throughput(db: str, workers: int, runs: int) -> dict[str, Any]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    configure(db, "enqueuer", schema)
    DBOS.listen_queues([])
    DBOS.launch()
    processes = [spawn(db, f"worker-{n}", schema) for n in range(workers)]
    client = DBOSClient(system_database_url=db, dbos_system_schema=schema)
    try:
        for process in processes:
            ready(process)
        started = time.time()
        ids = asyncio.run(enqueue(runs))
        enqueued = time.time()
        ended = wait_done(client, ids)
    finally:
        for process in processes:
            process.kill()
            process.wait()
        client.destroy()
        DBOS.destroy()
    return {
        "workers": workers,
        "runs": runs,
        "seconds": round(ended - started, 2),
        "runs_per_s": round(runs / (ended - started), 1),
        "enqueue_s": round(enqueued - started, 2),
    }


async def start_slow_run() -> str:
    durable = _DECLARED[0]
    run_id = f"slow-{uuid.uuid4().hex[:8]}"
    await durable.start_async("go", run_id=run_id, queue=QUEUE)
    return run_id


def recovery(db: str) -> dict[str, Any]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    configure(db, "enqueuer", schema)
    DBOS.listen_queues([])
    DBOS.launch()
    client = DBOSClient(system_database_url=db, dbos_system_schema=schema)
    first = spawn(db, "worker-r", schema, env={"BENCH_ADD_SLEEP_S": "60"})
    try:
        ready(first)
        run_id = asyncio.run(start_slow_run())
        while len(client.list_workflow_steps(run_id)) < 1:  # the first model turn recorded
            time.sleep(0.02)
        time.sleep(0.2)  # the tool is sleeping now
        first.send_signal(signal.SIGKILL)
        first.wait()
        launched = time.time()
        second = spawn(db, "worker-r", schema)
        serving = ready(second)
        ended = wait_done(client, [run_id])
        second.kill()
        second.wait()
    finally:
        client.destroy()
        DBOS.destroy()
    return {
        "total_s": round(ended - launched, 2),
        "process_start_s": round(serving - launched, 2),
        "recovery_s": round(ended - serving, 2),
    }


def postgres_url(root: Path) -> tuple[str, Any]:
    import pgserver

    server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    return server.get_uri(), server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--db", default="")
    parser.add_argument("--executor", default="")
    parser.add_argument("--schema", default="dbos")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args))
        return
    _DECLARED.append(declare())
    figures: dict[str, Any] = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as root:
        server = None
        for database in args.databases.split(","):
            if database == "postgres":
                url, server = postgres_url(Path(root))
            else:
                url = f"sqlite:///{Path(root) / 'bench.sqlite'}"
            figures[database] = {
                "throughput": [throughput(url, workers, args.runs) for workers in (1, 2)],
                "recovery": recovery(url),
            }
            print(json.dumps({database: figures[database]}), flush=True)
        if server is not None:
            server.cleanup()
    figures["load_after"] = os.getloadavg()
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
