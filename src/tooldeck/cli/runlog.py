"""The command line's runs go to the run log (``tooldeck logs``) unless ``--no-log``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tooldeck.run.agent import Agent


@contextmanager
def logging_runs(agent: Agent[Any, Any], off: bool) -> Iterator[None]:
    """Record the agent's runs in the run log while the block runs, unless ``off``.

    A log that cannot be opened or written costs a warning, never the run.
    """
    if off:
        yield
        return
    from tooldeck.runlog import RunLog, RunLogError

    try:
        log = RunLog()
    except RunLogError as error:
        _warn(f"this run is not logged: {error}")
        yield
        return
    agent.run_log = log
    try:
        yield
    finally:
        try:
            log.close()
        except RunLogError as error:
            _warn(str(error))


def _warn(text: str) -> None:
    print(f"tooldeck: warning: {' '.join(text.split())}", file=sys.stderr, flush=True)
