"""The command line page (docs/cli.md) and the README run: every ``console`` block, command by command.

Each ``$ command`` is run by the shell from the repository's root, with stderr shown after
stdout as a terminal shows it; what it prints must be what the page shows, times and run
ids aside. The model is the loopback OpenAI-compatible server (``OPENAI_BASE_URL``), which
answers each prompt as scripted in ``SCRIPTS``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "docs" / "cli.md", ROOT / "README.md")
_CONSOLE = re.compile(r"^```console\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _turn(text: str | None, *calls: tuple[str, str]) -> dict[str, Any]:
    tool_calls = [chat_call(f"call_{i}", name, args) for i, (name, args) in enumerate(calls)]
    return completion_body(text, tool_calls or None)


SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "What do 3 apples cost in dollars?": [
        _turn("Pricing.", ("price", '{"item": "apple", "quantity": 3}')),
        _turn(None, ("convert", '{"euros": 1.5, "to": "USD"}')),
        _turn("3 apples cost $1.65."),
    ],
    "What does a pear cost?": [
        _turn(None, ("price", '{"item": "pear"}')),
        _turn("The shop does not sell pears."),
    ],
    "How much is a loaf of bread?": [
        _turn(None, ("price", '{"item": "bread"}')),
        _turn("A loaf of bread costs 2.40 euros."),
    ],
    "My budget is 2 euros.": [_turn("Noted: 2 euros.")],
    "How many apples can I buy?": [
        _turn(None, ("price", '{"item": "apple"}')),
        _turn("4 apples, at 0.50 euros each."),
    ],
    "Price everything.": [
        _turn(None, ("price", '{"item": "apple"}')),
        _turn(None, ("price", '{"item": "bread"}')),
    ],
}
"""The model's turns for each prompt of the page (the prompt is found in the command)."""


def commands() -> list[tuple[str, str]]:
    """Every ``$ command`` of the pages' console blocks, with the output shown under it."""
    found: list[tuple[str, str]] = []
    blocks = [block for page in PAGES for block in _CONSOLE.findall(page.read_text("utf-8"))]
    for block in blocks:
        for chunk in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
            command, _, output = chunk.partition("\n")
            found.append((command, output))
    return found


def normalized(text: str) -> str:
    text = re.sub(r"\d+\.\d+ (s|ms)\b", r"T \1", text)
    text = re.sub(r'"(duration_s|model_s)": [0-9.e-]+', r'"\1": T', text)
    return re.sub(r'"(run_id|session)": "[^"]*"', r'"\1": "ID"', text)


def test_the_page_has_console_examples() -> None:
    assert len(commands()) >= 8


@pytest.mark.parametrize(("command", "expected"), commands(), ids=lambda v: v[:60])
def test_documented_command(server: FakeOpenAI, command: str, expected: str) -> None:
    streamed = "--no-stream" not in command
    for prompt, turns in SCRIPTS.items():
        if prompt in command:
            for turn in turns:
                server.reply(
                    Reply(events=completion_chunks(turn)) if streamed else Reply(body=turn)
                )
    providers = ("OPENAI", "ANTHROPIC", "GEMINI", "GOOGLE")
    env = {key: value for key, value in os.environ.items() if not key.startswith(providers)}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": server.url,
        "COLUMNS": "200",
    }
    done = subprocess.run(
        ["bash", "-c", command],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert normalized(done.stdout + done.stderr) == normalized(expected)
