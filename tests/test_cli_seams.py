"""``tooldeck run`` where its options meet: a tool choice and a typed answer, the library's
errors worded for the command line, bounds on tokens and time, a run without tools.

The model is the loopback OpenAI-compatible server (tests/_openai_server.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TOOLS = textwrap.dedent(
    '''
    from pydantic import BaseModel

    from tooldeck import tool


    class City(BaseModel):
        name: str


    @tool
    def double(number: int) -> int:
        """Twice the number."""
        return 2 * number
    '''
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


def tooldeck(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**env, "TOOLDECK_HOME": str(cwd / "home")},
        timeout=120,
        check=False,
    )


def test_tool_choice_none_with_a_typed_answer_is_a_usage_error(workdir: Path) -> None:
    refused = tooldeck(
        workdir, "run", "Capital of Norway?", "-t", "tools.py", "--output-schema",
        "tools.py:City", "--tool-choice", "none", "--model", "anthropic:claude-test",
        "--base-url", "http://127.0.0.1:9",
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr == (
        "tooldeck run: error: --tool-choice none cannot give the typed answer --output-schema "
        "asks for: anthropic:claude-test is asked for it with the final_answer tool, which "
        "'none' forbids it to call; leave --tool-choice out (auto), or use a model with "
        "structured output (openai:..., openai-chat:...) (see tooldeck run --help)\n"
    )


def test_the_help_says_what_a_tool_choice_applies_to(workdir: Path) -> None:
    shown = " ".join(tooldeck(workdir, "run", "--help").stdout.split())
    assert (
        "auto (the default) or none (no tool calls): every model request; required (must "
        "call a tool) or a tool's name: the run's first request only, auto after it"
    ) in shown
