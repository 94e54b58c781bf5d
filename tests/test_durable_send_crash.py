"""``DurableAgent.send`` the way it fails in the field: the worker running a durable run is
SIGKILLed after a message sent from another process joined the run, and the run is recovered
in a new process; the recovered conversation and the next request to the model hold each
message exactly once, in its place. Real processes (tests/_durable_send_app.py), the
provider simulator (fresh call ids), and DBOS on SQLite and on PostgreSQL (the suite's own
server)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _durable_harness import DurableApp
from helpers import said
from tooldeck.testing import ProviderSimulator, call, fail, reply

APP = Path(__file__).with_name("_durable_send_app.py")
PROMPT = "Survey the bays."


class SendApp(DurableApp):
    """The processes of one test: workers and senders on one system database."""

    def __init__(self, root: Path, sim: ProviderSimulator, db: str | None, schema: str | None):
        super().__init__(root, db, schema)
        self.root, self.sim = root, sim

    def command(self, mode: str) -> list[str]:
        argv = [sys.executable, str(APP), mode, "--db", self.db, "--log", str(self.log)]
        return [*argv, "--base-url", self.sim.base_url]

    def send(self, run_id: str, text: str) -> Any:
        """What a process that sends ``text`` to the run read."""
        return self.output(self.spawn("send", executor="sender", run_id=run_id, text=text))

    def release(self, bay: str) -> None:
        (self.root / f"go-{bay}").touch()

    def worker(self, mode: str, run_id: str) -> subprocess.Popen[str]:
        return self.spawn(mode, executor="worker-1", run_id=run_id)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> tuple[str | None, str | None]:
    """Where DBOS keeps the runs: (system database URL, schema); None: SQLite in tmp_path."""
    if request.param == "sqlite":
        return None, None
    return request.getfixturevalue("postgres_server"), f"dbos_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def apps(
    tmp_path: Path, store: tuple[str | None, str | None]
) -> Iterator[Callable[[ProviderSimulator], SendApp]]:
    """Makes the test's SendApp for its simulator; its processes end with the test."""
    made: list[SendApp] = []

    def make(sim: ProviderSimulator) -> SendApp:
        made.append(SendApp(tmp_path, sim, *store))
        return made[-1]

    yield make
    for app in made:
        app.close()


def test_killed_while_the_request_holding_a_sent_message_is_out_it_is_asked_again_with_it_once(
    provider: Any, apps: Callable[[ProviderSimulator], SendApp]
) -> None:
    sim = provider([call("survey", {"bay": "north"}), fail.hang(), reply("North: calm.")])
    app = apps(sim)
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    worker = app.worker("run", run_id)
    app.wait_until(lambda: app.logged("start survey north"), "the survey started")
    assert app.send(run_id, "Keep it brief.") == {"sent": True}
    app.release("north")
    app.wait_until(lambda: len(sim.requests) >= 2, "the request holding the message")
    app.kill(worker)  # the message joined; the request that holds it has no answer

    result = app.output(app.worker("serve", run_id))

    conversation = [
        ("user", PROMPT),
        ("assistant", "survey"),
        ("tool", "bay north: calm"),
        ("user", "Keep it brief."),
    ]
    assert len(sim.requests) == 3
    assert said(sim.requests[1]) == said(sim.requests[2]) == conversation
    assert result["answer"] == "North: calm."
    assert result["messages"] == [
        ["user", PROMPT],
        ["assistant", ""],
        ["tool", "bay north: calm"],
        ["user", "Keep it brief."],
        ["assistant", "North: calm."],
    ]
    assert app.counts()["start survey north"] == 1  # its step recorded: not run again


def test_a_recovered_run_joins_a_message_from_its_record_and_one_sent_while_it_was_down_after(
    provider: Any, apps: Callable[[ProviderSimulator], SendApp]
) -> None:
    turns = [call("survey", {"bay": "north"}), call("survey", {"bay": "south"})]
    sim = provider([*turns, reply("Both calm; west next.")])
    app = apps(sim)
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    worker = app.worker("run", run_id)
    app.wait_until(lambda: app.logged("start survey north"), "the first survey started")
    assert app.send(run_id, "Keep it brief.") == {"sent": True}
    app.release("north")
    app.wait_until(lambda: app.logged("start survey south"), "the second survey started")
    app.kill(worker)  # the message joined and its request's turn is recorded
    assert app.send(run_id, "And the west bay?") == {"sent": True}  # no process runs it
    app.release("south")

    result = app.output(app.worker("serve", run_id))

    first = [("user", PROMPT), ("assistant", "survey"), ("tool", "bay north: calm")]
    assert len(sim.requests) == 3  # the first two turns were read back, not asked again
    assert said(sim.requests[1]) == [*first, ("user", "Keep it brief.")]
    assert said(sim.requests[2]) == [
        *first,
        ("user", "Keep it brief."),
        ("assistant", "survey"),
        ("tool", "bay south: calm"),
        ("user", "And the west bay?"),
    ]
    assert [m for m in result["messages"] if m[0] == "user"] == [
        ["user", PROMPT],
        ["user", "Keep it brief."],
        ["user", "And the west bay?"],
    ]
    assert result["messages"][-1] == ["assistant", "Both calm; west next."]
    ids = sim.call_ids
    assert app.steps(run_id) == [  # the messages took no step of their own
        "harbour.model",
        f"harbour.tool:survey:{ids[0]}",
        "harbour.model",
        f"harbour.tool:survey:{ids[1]}",
        "harbour.model",
    ]
    counts = app.counts()
    assert (counts["start survey north"], counts["start survey south"]) == (1, 2)

    assert app.send(run_id, "Anything else?") == {
        "sent": False,
        "refused": f"cannot send a message to durable run {run_id!r}: it has ended "
        "(status SUCCESS); it was not added",
    }
