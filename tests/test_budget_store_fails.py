"""A shared budget's store that fails never loses a response: a SQLite budget file locked
by another process past ``busy_timeout_s`` when a response arrives stops the run with a
``SessionError`` whose ``.result`` keeps the run, that response and its usage included; the
budget owes that spend and counts it once the store comes back."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tooldeck import Agent, ModelSettings
from tooldeck.errors import SessionError
from tooldeck.models import ModelPrices
from tooldeck.sessions import SQLiteBudget
from tooldeck.testing import ProviderSimulator, SimRequest, reply
from tooldeck.testing import Step as SimStep

Provider = Callable[..., ProviderSimulator]
PRICES = ModelSettings(prices=ModelPrices(input_per_million=1.0, output_per_million=1.0))

_LOCKER = textwrap.dedent(
    """
    import sqlite3, sys
    connection = sqlite3.connect(sys.argv[1], isolation_level=None)
    connection.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.readline()  # held until the test says
    connection.execute("ROLLBACK")
    """
)


@pytest.fixture
def lockers() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes that hold a database locked; each is let go and waited for at the end."""
    held: list[subprocess.Popen[str]] = []
    yield held
    for locker in held:
        if locker.poll() is None:
            locker.communicate("\n", timeout=30)


def test_a_budget_locked_when_a_response_arrives_keeps_it_and_counts_it_later(
    provider: Provider, tmp_path: Path, lockers: list[subprocess.Popen[str]]
) -> None:
    path = tmp_path / "budgets.db"
    budget = SQLiteBudget(path, "shop", max_cost_usd=5.0, busy_timeout_s=0.2)

    def locked_then_answered(request: SimRequest) -> SimStep:
        locker = subprocess.Popen(
            [sys.executable, "-c", _LOCKER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        lockers.append(locker)
        assert locker.stdout is not None
        assert locker.stdout.readline() == "locked\n"
        return reply("Your order A1 is paid.")

    sim = provider([locked_then_answered])
    agent = Agent(sim.model(), settings=PRICES)

    with pytest.raises(SessionError) as raised:
        agent.run_sync("Is my order A1 paid?", budget=budget)

    assert "database is locked" in str(raised.value)
    assert "budget 'shop' in SQLite database" in str(raised.value)
    notes = getattr(raised.value, "__notes__", [])
    assert any("its shared budget could not be read or counted" in note for note in notes)
    result = raised.value.result
    assert result is not None
    assert result.stop_reason == "session_error"
    assert result.messages[-1].content == "Your order A1 is paid."  # the response is kept
    assert result.usage.requests == 1
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0
    assert result.usage.cost_usd is not None
    assert result.usage.cost_usd > 0
    assert len(sim.requests) == 1
    for locker in lockers:
        locker.communicate("\n", timeout=30)
    first = result.usage
    assert budget.spent.total_tokens == first.input_tokens + first.output_tokens  # owed

    sim.add(reply("Yes, it is."))
    again = agent.run_sync("And is it shipped?", budget=budget)  # the store is back

    assert again.answer == "Yes, it is."
    stored = SQLiteBudget(path, "shop", max_cost_usd=5.0)  # what another process reads
    tokens = sum(u.input_tokens + u.output_tokens for u in (first, again.usage))
    assert (stored.spent.requests, stored.spent.total_tokens) == (2, tokens)
    assert stored.spent.cost_usd == pytest.approx(
        (first.cost_usd or 0) + (again.usage.cost_usd or 0)
    )
    for kept in (budget, stored):
        kept.close()
