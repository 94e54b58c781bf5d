"""A run whose process was killed mid-run is not "running" forever: ``tooldeck run`` against
the provider simulator, its second model request left hanging, is SIGKILLed; the runs page
(fetched over HTTP from ``tooldeck web``'s app) and ``tooldeck logs`` said "running" while
it lived and say "interrupted (process gone)" once it is gone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _asgi_server import listening, serving
from tooldeck.runlog import LoggedRun
from tooldeck.runlog._schema import connect
from tooldeck.runlog.read import list_runs, load_run
from tooldeck.testing import ProviderSimulator, call, fail
from tooldeck.web import create_app

TOKEN = "interrupted-token"
SHOP = '''
from tooldeck import tool


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"
'''


def environment(home: Path, sim: ProviderSimulator) -> dict[str, str]:
    kept = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return {**kept, **sim.env, "TOOLDECK_HOME": str(home)}


def tooldeck(home: Path, sim: ProviderSimulator, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        env=environment(home, sim),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def hanging_run(
    tmp_path: Path, provider: Callable[..., ProviderSimulator]
) -> Iterator[tuple[subprocess.Popen[str], ProviderSimulator, Path]]:
    """``tooldeck run`` waiting on a model request that never answers (it is logged by then);
    killed at the end whatever happened."""
    (tmp_path / "shop.py").write_text(SHOP)
    sim = provider([call("lookup_order", {"order_id": "A1"}), fail.hang()])
    home = tmp_path / "home"
    command = [sys.executable, "-m", "tooldeck.cli", "run", "Where is order A1?"]
    command += ["-t", str(tmp_path / "shop.py"), "--model", "openai-chat:gpt-4.1-mini"]
    child = subprocess.Popen(
        [*command, "--base-url", sim.base_url, "--no-display"],
        env=environment(home, sim),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield child, sim, home
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=60)


def logged_while_hanging(
    child: subprocess.Popen[str], sim: ProviderSimulator, log: Path
) -> LoggedRun:
    """The run as the log holds it once its second request hangs and its start is written."""
    deadline = time.monotonic() + 120
    while True:
        if child.poll() is not None:
            raise AssertionError(f"tooldeck ended early: {child.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, "the run never hung on its second request"
        runs = list_runs(log) if log.exists() else []
        if len(sim.requests) == 2 and runs:
            (run,) = runs
            return run
        time.sleep(0.05)


def runs_page(root: str) -> str:
    with httpx.Client(base_url=root, follow_redirects=True, timeout=30) as client:
        response = client.get("/runs", params={"token": TOKEN})
        assert response.status_code == 200
        return response.text


def badge(page: str, run_id: str) -> str:
    """The Stop badge of the run's row of the runs page."""
    row = page.split(f'href="/runs/{run_id}"', 1)[1].split("</tr>", 1)[0]
    found = re.search(r'<span class="badge (stop-[\w-]+)"[^>]*>([^<]*)</span>', row)
    assert found is not None, row
    return f"{found.group(1)}: {found.group(2)}"


def test_a_killed_run_reads_as_interrupted_in_the_runs_page_and_the_logs(
    hanging_run: tuple[subprocess.Popen[str], ProviderSimulator, Path],
) -> None:
    child, sim, home = hanging_run
    log = home / "logs.db"
    run = logged_while_hanging(child, sim, log)
    assert (run.status, run.process_gone, run.writer_pid) == ("running", False, child.pid)
    listener = listening()
    app = create_app(agent=None, home=home, token=TOKEN, port=listener.getsockname()[1])
    with serving(app, listener) as root:
        assert badge(runs_page(root), run.run_id) == "stop-running: running"
        alive = tooldeck(home, sim, "logs", "show", run.run_id)
        assert alive.stdout.splitlines()[-1] == (
            f"(no end logged yet: the run is still going in process {child.pid} on "
            f"{run.writer_host})"
        )

        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL

        page = runs_page(root)
        assert badge(page, run.run_id) == "stop-interrupted: interrupted (process gone)"
        assert f"({child.pid} on " in page  # the badge's title names the process
        with httpx.Client(base_url=root, follow_redirects=True, timeout=30) as client:
            one = client.get(f"/runs/{run.run_id}", params={"token": TOKEN}).text
        assert f"the process that ran this run (process {child.pid} on " in one
        assert "it was killed or crashed mid-run, and the run will not go on" in one

    gone = load_run(log, run.run_id)
    assert (gone.status, gone.process_gone, gone.stop_reason) == ("interrupted", True, None)
    listed = tooldeck(home, sim, "logs")
    assert listed.returncode == 0, listed.stderr
    (line,) = [line for line in listed.stdout.splitlines() if line.startswith(run.run_id[:12])]
    assert "interrupted (process gone)" in line
    shown = tooldeck(home, sim, "logs", "show", run.run_id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == (
        f"stopped: interrupted (process gone): no end was logged and process {child.pid} on "
        f"{gone.writer_host}, which ran it, is gone (killed, or crashed mid-run); it will not "
        "go on"
    )
    as_json: list[dict[str, Any]] = json.loads(tooldeck(home, sim, "logs", "--json").stdout)
    assert [(r["status"], r["process_gone"]) for r in as_json] == [("interrupted", True)]


def test_a_row_of_an_older_log_without_its_process_is_not_called_interrupted(
    tmp_path: Path,
) -> None:
    """A log written before version 5 does not name the process: such a run with no end is
    shown as "no end logged", never judged gone (nor running)."""
    path = tmp_path / "logs.db"
    connection = connect(path)
    connection.execute(
        "INSERT INTO runs (run_id, model, prompt, instructions, started_at)"
        " VALUES ('old-run', 'm', 'p', '', 1.0)"
    )
    connection.close()
    (run,) = list_runs(path)
    assert (run.status, run.process_gone, run.writer_pid) == ("no end logged", False, None)
