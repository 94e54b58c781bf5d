"""Starting, watching and killing the processes of ``_durable_app.py`` from a test (and,
``command`` overridden, of ``_durable_shop.py``: tests/_promise_doors.py's ``DurableDoor``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

APP = Path(__file__).with_name("_durable_app.py")
WAIT_S = 120.0
"""Generous: the machine may be loaded; the tests assert order and content, not speed."""


class DurableApp:
    """One system database and one log file shared by the processes of a test."""

    def __init__(self, root: Path, db: str | None = None, schema: str | None = None) -> None:
        self.db = db or f"sqlite:///{root / 'runs.sqlite'}"
        self.schema = schema
        """DBOS's system schema in a PostgreSQL database (one per test)."""
        self.log = root / "calls.log"
        self.processes: list[subprocess.Popen[str]] = []
        self.wait_s = WAIT_S

    def command(self, mode: str) -> list[str]:
        """A process of ``mode``: the program and the options every process of a test takes."""
        return [sys.executable, str(APP), mode, "--db", self.db, "--log", str(self.log)]

    def spawn(
        self, mode: str, *, executor: str, env: dict[str, str] | None = None, **options: Any
    ) -> subprocess.Popen[str]:
        argv = [*self.command(mode), "--executor", executor]
        if self.schema:
            argv += ["--schema", self.schema]
        for name, value in options.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        self.processes.append(process)
        return process

    def output(self, process: subprocess.Popen[str]) -> Any:
        """The JSON line a process printed when it ended well."""
        out, err = process.communicate(timeout=self.wait_s)
        assert process.returncode == 0, f"exit {process.returncode}\n{err[-3000:]}"
        return json.loads(out.strip().splitlines()[-1])

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def counts(self) -> Counter[str]:
        """How many times each event happened (the run id that ``note`` logs left out)."""
        return Counter(" ".join(line.split()[:3]) for line in self.lines())

    def wait_until(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.wait_s
        while not ready():
            for process in self.processes:
                if process.poll() is not None and process.returncode > 0:
                    assert process.stderr is not None
                    raise AssertionError(f"a process failed: {process.stderr.read()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; log: {self.lines()}")
            time.sleep(0.05)

    def logged(self, *events: str) -> bool:
        counts = self.counts()
        return all(counts[event] >= 1 for event in events)

    def client(self) -> Any:
        """A DBOS client on the test's system database (call ``destroy()`` when done)."""
        from dbos import DBOSClient

        return DBOSClient(system_database_url=self.db, dbos_system_schema=self.schema or "dbos")

    def steps(self, run_id: str) -> list[str]:
        """The names of the steps DBOS has recorded for the run, in step order."""
        client = self.client()
        try:
            return [step["function_name"] for step in client.list_workflow_steps(run_id)]
        finally:
            client.destroy()

    def recorded(self, run_id: str, names: Iterable[str]) -> bool:
        done = set(self.steps(run_id))
        return all(name in done for name in names)

    def kill(self, process: subprocess.Popen[str]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=self.wait_s)
        assert process.returncode == -signal.SIGKILL

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()


@pytest.fixture(scope="module")
def launched_dbos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DBOS launched in the test process on a SQLite system database, for one test module
    (DBOS is one per process: the README's example launches its own); its URL. Durable
    agents may be declared after launch in one process (recovery needs them before)."""
    from dbos import DBOS

    url = f"sqlite:///{tmp_path_factory.mktemp('dbos') / 'system.sqlite'}"
    DBOS(
        config={
            "name": "tooldeck-tests",
            "system_database_url": url,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()
    yield url
    DBOS.destroy()
