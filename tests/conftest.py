"""Fixtures shared by the tests: the OpenAI loopback server (JSON or SSE replies), the
provider simulator (``provider``), the session stores, a TOOLDECK_HOME of their own, and DBOS launched in the test process for the
durable-run tests."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import _browser
import _pty
from _durable_harness import launched_dbos
from _openai_server import FakeOpenAI, running
from _postgres import postgres_dsn, postgres_server
from _stores import Store

if TYPE_CHECKING:
    from tooldeck.testing import ProviderSimulator

# A suite started in the background by a shell without job control (`cmd &` in a script,
# some CI runners) inherits SIGINT ignored, and so would every command a test starts: Python
# keeps an ignored SIGINT, and Ctrl-C typed at a test's terminal would do nothing. The tests
# stand for a person at a terminal, where Ctrl-C interrupts: restore it for what they start.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

__all__ = ["launched_dbos", "postgres_dsn", "postgres_server"]  # fixtures defined elsewhere


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with running() as fake:
        yield fake


@pytest.fixture
def provider() -> Iterator[Callable[..., ProviderSimulator]]:
    """Start provider simulators: ``sim = provider([call(...), reply(...)], rules=...)``
    (ProviderSimulator's arguments). Each stops when the test ends, and a request that found
    no step left fails the test there (pass ``strict=False`` to allow it)."""
    from tooldeck.testing import ProviderSimulator

    started: list[ProviderSimulator] = []

    def start(*args: Any, **options: Any) -> ProviderSimulator:
        simulator = ProviderSimulator(*args, **options)
        simulator.start()
        started.append(simulator)
        return simulator

    yield start
    for simulator in started:
        simulator.stop()
    for simulator in started:
        if simulator.strict:
            simulator.check()


@pytest.fixture(autouse=True)
def _no_terminal_left_running() -> Iterator[None]:
    """A pty test that fails between ``expect`` calls leaves its command running: end it."""
    yield
    _pty.kill_leftovers()


@pytest.fixture(params=[False, True], ids=["json", "sse"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(autouse=True, scope="session")
def _tooldeck_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``tooldeck run`` and ``chat`` keep conversations and log runs: keep the tests' out of
    the user's data directory (subprocesses inherit the variable)."""
    previous = os.environ.get("TOOLDECK_HOME")
    os.environ["TOOLDECK_HOME"] = str(tmp_path_factory.mktemp("tooldeck_home"))
    yield
    if previous is None:
        del os.environ["TOOLDECK_HOME"]
    else:
        os.environ["TOOLDECK_HOME"] = previous


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An empty database of each kind: every session behaviour runs against both."""
    if request.param == "sqlite":
        made = Store("sqlite", str(tmp_path / "sessions.db"))
    else:
        made = Store("postgres", request.getfixturevalue("postgres_dsn"))
    yield made
    await made.aclose()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the folder of the web app's screenshots, when browser tests saved some."""
    if _browser.SAVED:
        folder = _browser.SAVED[0].parent
        terminalreporter.write_line(f"screenshots of the web app: {folder}")


@pytest.fixture
def sim_env(monkeypatch: pytest.MonkeyPatch) -> Callable[[ProviderSimulator], None]:
    """Point the models a ``tooldeck web`` process makes (the module's too) at ``sim``."""

    def point(sim: ProviderSimulator) -> None:
        for name, value in sim.env.items():
            monkeypatch.setenv(name, value)

    return point
