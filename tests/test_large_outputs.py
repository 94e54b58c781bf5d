"""Outputs too large for the context: ``@tool(max_output_chars=N, large_output=...)`` and the
agent-wide default; "store" gives the head, the size and a handle for ``read_output``; the
trace and the run log keep the whole output."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import answer, call, calls, tool_messages
from tooldeck import Agent, Approve, ScriptedModel, tool
from tooldeck.errors import ToolDefinitionError
from tooldeck.runlog import RunLog

PAGE = "".join(f"line {n:03d}\n" for n in range(100))  # 900 characters


@tool
def fetch_page(url: str) -> str:
    """Fetch a page."""
    return PAGE


@tool(max_output_chars=20)
def fetch_short(url: str) -> str:
    """Fetch a page, truncated."""
    return PAGE


@tool(max_output_chars=20, large_output="error")
def fetch_strict(url: str) -> str:
    """Fetch a page, or fail."""
    return PAGE


def test_a_long_output_is_truncated_and_the_whole_is_kept(tmp_path: Path) -> None:
    model = ScriptedModel([calls(call("fetch_short", url="x")), answer("ok")])
    with RunLog(tmp_path / "logs.db") as log:
        result = Agent(model, [fetch_short], run_log=log).run_sync("Read")
        (logged,) = log.run(result.run_id).calls

    assert tool_messages(result.messages) == [
        "line 000\nline 001\nli\n[output truncated: 20 of 900 characters shown]"
    ]
    assert result.tool_trace[0].full_output == PAGE
    assert logged.result == tool_messages(result.messages)[0]
    assert logged.full_output == PAGE


def test_large_output_error_answers_output_too_large() -> None:
    model = ScriptedModel([calls(call("fetch_strict", url="x")), answer("ok")])
    result = Agent(model, [fetch_strict]).run_sync("Read")
    assert tool_messages(result.messages) == [
        "error[output_too_large]: the output of 'fetch_strict' was 900 characters, over its "
        "limit of 20 (max_output_chars); ask for less"
    ]


def test_a_stored_output_is_read_further_with_read_output() -> None:
    model = ScriptedModel(
        [
            calls(call("fetch_page", "c1", url="x")),
            calls(call("read_output", "c2", handle="c1", offset=891, length=50)),
            calls(call("read_output", "c3", handle="c9")),
            answer("ok"),
        ]
    )
    agent = Agent(model, [fetch_page], max_output_chars=30, large_output="store")

    result = agent.run_sync("Read")

    assert "read_output" in model.requests[0].tool_names
    stored, tail, unknown = tool_messages(result.messages)
    assert stored == (
        "line 000\nline 001\nline 002\nlin\n[output stored: 900 characters, the first 30 "
        "shown; read more with read_output(handle='c1', offset=30, length=...)]"
    )
    assert tail == "line 099\n\n[characters 891-900 of 900: the end]"
    assert unknown == (
        "error[tool_error]: no stored output 'c9' in this run (stored: 'c1'); outputs are "
        "kept for the run that made them"
    )


def test_a_tools_own_limit_wins_over_the_agents_and_short_outputs_pass() -> None:
    model = ScriptedModel(
        [calls(call("fetch_short", "c1", url="x"), call("fetch_page", "c2", url="y")), answer("ok")]
    )
    result = Agent(model, [fetch_short, fetch_page], max_output_chars=1000).run_sync("Read")
    short, whole = tool_messages(result.messages)
    assert short.endswith("[output truncated: 20 of 900 characters shown]")
    assert whole == PAGE
    assert result.tool_trace[1].full_output is None
    assert "read_output" not in model.requests[0].tool_names


def test_stored_outputs_are_still_readable_after_a_pause() -> None:
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish."""
        return "published"

    model = ScriptedModel(
        [
            calls(call("fetch_page", "c1", url="x"), call("publish", "c2", text="t")),
            calls(call("read_output", "c3", handle="c1", offset=0, length=8)),
            answer("ok"),
        ]
    )
    agent = Agent(model, [fetch_page, publish], max_output_chars=30, large_output="store")
    paused = agent.run_sync("Go")
    assert paused.checkpoint is not None

    done = agent.resume_sync(paused.checkpoint.to_json(), {"c2": Approve()})

    assert tool_messages(done.messages)[-1] == "line 000\n[characters 0-8 of 900; next: offset=8]"


def test_bad_output_limits_are_refused() -> None:
    def f() -> str:
        """F."""
        return ""

    with pytest.raises(ToolDefinitionError, match="large_output must be 'truncate', 'store'"):
        tool(large_output="zip")(f)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="max_output_chars must be at least 1, got 0"):
        Agent(ScriptedModel([]), max_output_chars=0)
