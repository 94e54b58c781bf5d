"""A DurableAgent used before DBOS is launched in its process says what to do (this module
launches no DBOS)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbos import DBOS

from helpers import answer
from tooldeck import Agent, Approve, ScriptedModel
from tooldeck.durable import DurableAgent

NOT_LAUNCHED = (
    r"DurableAgent 'early' runs on DBOS, which is not launched in this process \(DBOS Error: "
    r"{reason}\): create DBOS\(config=...\), declare every DurableAgent, then call DBOS.launch\(\)"
)
LATE = r"[^)]* accessed before DBOS was launched"


async def test_running_starting_or_resuming_before_dbos_is_launched_says_what_to_do(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([answer("hi")])
    durable = DurableAgent(Agent(model), name="early")
    not_created = NOT_LAUNCHED.format(reason="No DBOS was created yet")
    with pytest.raises(RuntimeError, match=not_created):
        await durable.run("Hello.")

    DBOS(config={"name": "tooldeck-early", "system_database_url": f"sqlite:///{tmp_path}/s.db"})
    try:
        with pytest.raises(RuntimeError, match=NOT_LAUNCHED.format(reason=LATE)):
            await durable.run("Hello.")
        with pytest.raises(RuntimeError, match=NOT_LAUNCHED.format(reason=LATE)):
            durable.start("Hello.", queue="runs")
        with pytest.raises(RuntimeError, match=NOT_LAUNCHED.format(reason=LATE)):
            await durable.resume("some-run", {"c1": Approve()})
    finally:
        DBOS.destroy()
    assert model.requests == []
