"""``run_agent``: the original entry point, one prompt run synchronously (a wrapper over
``Agent``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tooldeck.models.base import Model
from tooldeck.results import RunResult
from tooldeck.run.agent import Agent
from tooldeck.run.policy import Limits
from tooldeck.tools.registry import ToolsLike


def run_agent(
    prompt: str,
    model: Model | str,
    tool_view: ToolsLike | None = None,
    max_rounds: int | None = None,
    **options: Any,
) -> RunResult[Any]:
    """Run one prompt synchronously: the original entry point, a wrapper over ``Agent``.

    ``options`` are Agent's keyword options (``instructions=``, ``limits=``, ...).
    ``max_rounds``, when given, overrides the one in ``limits``; by default the run has
    ``Limits().max_rounds`` (10) rounds, like an ``Agent``. A run that pauses returns its
    result (``stop_reason == "paused"``); go on with
    ``Agent(...).resume_sync(result.checkpoint, ...)``.
    """
    limits = options.pop("limits", None) or Limits()
    if max_rounds is not None:
        limits = replace(limits, max_rounds=max_rounds)
    agent: Agent[Any, Any] = Agent(model, tool_view, limits=limits, **options)
    return agent.run_sync(prompt)
