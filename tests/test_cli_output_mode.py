"""``tooldeck run --output-mode``: how a typed answer is asked for, chosen at the command line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from _openai_server import (
    FakeOpenAI,
    Reply,
    completion_body,
    completion_chunks,
    error_reply,
    running,
)

REPORT = textwrap.dedent(
    '''
    from pydantic import BaseModel

    from tooldeck import tool


    @tool
    def count_files() -> int:
        """Count the files."""
        return 3


    class Report(BaseModel):
        files: int
    '''
)


@pytest.fixture
def model_server() -> Iterator[FakeOpenAI]:
    with running() as server:
        yield server


def run(server: FakeOpenAI, workdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    (workdir / "report_tools.py").write_text(REPORT, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    env |= {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"}
    command = [
        sys.executable, "-m", "tooldeck.cli", "run", "Count.", "--tools", "report_tools",
        "--model", "openai-chat:gpt-test", "--no-log", *extra,
    ]  # fmt: skip
    return subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
        timeout=120,
        check=False,
    )


def test_output_mode_prompted_sends_the_schema_in_the_instructions(
    model_server: FakeOpenAI, tmp_path: Path
) -> None:
    body = completion_body('The count:\n```json\n{"files": 3}\n```')
    model_server.reply(Reply(events=completion_chunks(body)))
    done = run(
        model_server, tmp_path, "--output-schema", "report_tools:Report", "--output-mode",
        "prompted", "--no-display",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{\n  "files": 3\n}\n'
    (sent,) = model_server.bodies
    assert "response_format" not in sent
    system = sent["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("When you give your final answer, reply with only one")


def test_output_mode_needs_an_output_schema(model_server: FakeOpenAI, tmp_path: Path) -> None:
    done = run(model_server, tmp_path, "--output-mode", "tool")
    assert done.returncode == 2
    assert done.stderr == (
        "tooldeck run: error: --output-mode tool applies to a typed answer: give "
        "--output-schema MODULE:TYPE too (see tooldeck run --help)\n"
    )
    assert model_server.bodies == []


def test_a_server_refusing_the_forced_final_answer_call_is_told_of_output_mode_prompted(
    model_server: FakeOpenAI, tmp_path: Path
) -> None:
    refusal = error_reply(500, "tool_choice 'required' is not supported", "server_error")
    model_server.reply(refusal, refusal, refusal)  # the SDK's own retries too
    done = run(
        model_server, tmp_path, "--output-schema", "report_tools:Report", "--output-mode",
        "tool", "--no-display",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith(
        "the server may refuse the forced call of the final_answer tool that asks for the "
        "typed answer: run again with --output-mode prompted"
    ), done.stderr
    assert model_server.bodies[0]["tool_choice"] == "required"
