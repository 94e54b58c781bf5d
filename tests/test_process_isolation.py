"""A sync tool's timeout says what really happened: a worker thread cannot be stopped, so the
model reads that the call may still complete; ``isolation="process"`` runs the tool in a
worker process that the timeout kills, so its side effects never land."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import (
    Agent,
    FunctionTool,
    Limits,
    RunContext,
    ScriptedModel,
    ToolDefinitionError,
    tool,
)
from tooldeck.errors import LimitExceeded


def run(
    function_tool: FunctionTool[..., Any],
    arguments: dict[str, Any] | None = None,
    *,
    include_error_details: bool = False,
) -> list[str]:
    """What the model read after calling ``function_tool`` once."""
    model = ScriptedModel([calls(call(function_tool.name, **(arguments or {}))), answer("done")])
    agent = Agent(model, [function_tool], include_error_details=include_error_details)
    return tool_messages(agent.run_sync("go").messages)


def test_a_thread_tool_past_its_timeout_may_still_complete_and_the_model_is_told() -> None:
    invoices: list[str] = []
    finished = threading.Event()

    @tool(timeout=0.1)
    def create_invoice(customer: str) -> str:
        """Create an invoice."""
        time.sleep(0.5)
        invoices.append(customer)
        finished.set()
        return "created"

    (text,) = run(create_invoice, {"customer": "ada"})
    assert text == (
        "error[tool_timeout]: 'create_invoice' did not finish within 0.1 s and may still "
        "complete in the background: check whether it took effect before calling it again, "
        "do not retry it blindly"
    )
    assert finished.wait(10)
    assert invoices == ["ada"]  # what the model was told could happen, did


def test_a_process_tool_past_its_timeout_is_killed_and_its_side_effect_never_lands(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "invoice.txt"

    @tool(timeout=0.5, isolation="process")
    def create_invoice(customer: str) -> str:
        """Create an invoice."""
        time.sleep(2)
        marker.write_text(customer)
        return "created"

    (text,) = run(create_invoice, {"customer": "ada"})
    assert text == (
        "error[tool_timeout]: 'create_invoice' did not finish within 0.5 s and was stopped "
        "(its process was killed); try smaller inputs or another approach"
    )
    time.sleep(3)  # longer than the tool would have needed
    assert not marker.exists()


def test_the_run_time_limit_kills_a_process_tool_too(tmp_path: Path) -> None:
    marker = tmp_path / "done"

    @tool(isolation="process")
    def slow() -> str:
        """Work slowly."""
        time.sleep(2)
        marker.touch()
        return "done"

    model = ScriptedModel([calls(call("slow")), answer("never")])
    agent = Agent(model, [slow], limits=Limits(max_duration_s=0.5))
    with pytest.raises(LimitExceeded) as stop:
        agent.run_sync("go")
    assert stop.value.result is not None
    assert tool_messages(stop.value.result.messages) == [
        "error[tool_timeout]: not finished: the run reached its time limit (max_duration_s=0.5)"
    ]
    time.sleep(3)
    assert not marker.exists()


def test_a_process_tool_returns_its_value_and_reads_deps_and_context() -> None:
    parent = os.getpid()

    @tool(timeout=30, isolation="process")
    def where(ctx: RunContext[dict[str, int]], label: str) -> dict[str, object]:
        """Say where this runs."""
        return {"label": label, "in_child": os.getpid() != parent, "deps": ctx.deps}

    model = ScriptedModel([calls(call("where", label="x")), answer("done")])
    result = Agent(model, [where]).run_sync("go", deps={"n": 1})
    assert tool_messages(result.messages) == ['{"label":"x","in_child":true,"deps":{"n":1}}']


def test_a_process_tool_failure_reaches_the_model_as_a_tool_error() -> None:
    @tool(isolation="process")
    def fail() -> str:
        """Fail."""
        raise ValueError("no such customer")

    @tool(isolation="process")
    def unsendable() -> object:
        """Return something that cannot leave the process."""
        return threading.Lock()

    @tool(isolation="process")
    def vanish() -> str:
        """Exit without answering."""
        os._exit(3)

    assert run(fail, include_error_details=True) == [
        "error[tool_error]: ValueError: no such customer"
    ]
    (text,) = run(unsendable, include_error_details=True)
    assert text.startswith(
        "error[tool_error]: ToolProcessError: the tool's return value cannot be sent back: "
    )
    assert run(vanish, include_error_details=True) == [
        "error[tool_error]: ToolProcessError: the tool's process ended without a result "
        "(exit code 3)"
    ]


def test_process_isolation_is_refused_where_it_cannot_apply() -> None:
    with pytest.raises(
        ToolDefinitionError, match=r"isolation must be 'thread' or 'process', got 'fork'"
    ):

        @tool(isolation="fork")  # type: ignore[call-overload]
        def a() -> None:
            """A."""

    with pytest.raises(ToolDefinitionError, match=r"cannot apply to an async function"):

        @tool(isolation="process")
        async def b() -> None:
            """B."""

    with pytest.raises(ToolDefinitionError, match=r"cannot apply to inline=True"):

        @tool(isolation="process", inline=True)
        def c() -> None:
            """C."""
