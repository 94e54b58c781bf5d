"""Case files are untrusted input: an alias bomb, deep nesting, bytes that are not UTF-8, a
regular expression that does not compile are each refused at once with a ``CaseFileError``
naming the file, the line and the field, through the library and at ``tooldeck eval`` (one
line, exit status 2, no traceback); JSON Schema's boolean schemas are taken."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tooldeck import AssistantOutput, ScriptedModel, ToolCall
from tooldeck.eval import CaseFileError, load_case_file, run_eval

HEAD = "- prompt: hi\n  tools: tooldeck.cli.demo\n  expect: no call\n"


def laughs() -> str:
    """A case whose field ``x`` is a 'billion laughs': 9 aliases a level, 9 levels."""
    lines = ['  x:\n    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"    {name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n")
    return HEAD + "".join(lines)


DEEP = HEAD + "  x: " + "[" * 5000 + "]" * 5000 + "\n"

HOSTILE: list[tuple[str, str | bytes, int, str, str]] = [
    (
        "laughs.yaml",
        laughs(),
        10,
        "x.f[0]",
        "the aliases (*name) stand for more than 100,000 nodes in all",
    ),
    (
        "self.yaml",
        HEAD + "  x: &loop [1, *loop]\n",
        4,
        "x[1]",
        "an alias inside its own anchor (a structure that holds itself)",
    ),
    ("deep.yaml", DEEP, 4, "x[0][0][0][0][0][0][0]...", "nested more than 100 levels deep"),
    (
        "deep.jsonl",
        json.dumps({"prompt": "hi", "tools": "tooldeck.cli.demo", "expect": "no call"})
        + "\n"
        + '{"prompt": "hi", "x": '
        + "[" * 100_000
        + "]" * 100_000
        + "}\n",
        2,
        "",
        "nested more than 100 levels deep",
    ),
    (
        "deepish.jsonl",
        '{"prompt": "hi", "x": ' + "[" * 150 + "]" * 150 + "}\n",
        1,
        "x[0][0][0][0][0][0][0]...",
        "nested more than 100 levels deep",
    ),
    (
        "latin1.yaml",
        "- prompt: hi\n  system: Réponds en français.\n".encode("latin-1"),
        2,
        "",
        "not UTF-8 text: byte 0xe9 at column 12 (invalid continuation byte); save the file as "
        "UTF-8",
    ),
    (
        "latin1.jsonl",
        '{"prompt": "caf\u00e9"}\n'.encode("latin-1"),
        1,
        "",
        "not UTF-8 text: byte 0xe9 at column 16",
    ),
    (
        "regex.yaml",
        '- prompt: hi\n  tools: tooldeck.cli.demo\n  expect:\n    answer: {matches: "(["}\n',
        4,
        "expect.answer.matches",
        "'([' is not a regular expression (Python's re): unterminated character set at position 1",
    ),
]


def written(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "content", "line", "field", "problem"), HOSTILE, ids=[h[0] for h in HOSTILE]
)
def test_a_hostile_case_file_is_refused_at_once_naming_line_and_field(
    tmp_path: Path, name: str, content: str | bytes, line: int, field: str, problem: str
) -> None:
    path = written(tmp_path, name, content)
    started = time.monotonic()
    with pytest.raises(CaseFileError) as refused:
        load_case_file(path)
    assert time.monotonic() - started < 10  # unbounded, the laughs took minutes
    error = refused.value
    assert (error.path, error.line, error.field) == (str(path), line, field)
    assert error.problem.startswith(problem), error.problem
    assert str(error).startswith(f"{path}, line {line}")


@pytest.mark.parametrize(
    ("name", "content", "line", "field", "problem"), HOSTILE, ids=[h[0] for h in HOSTILE]
)
def test_tooldeck_eval_says_it_in_one_line_with_status_2(
    tmp_path: Path, name: str, content: str | bytes, line: int, field: str, problem: str
) -> None:
    written(tmp_path, name, content)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    done = subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", "eval", name, "--model", "openai-chat:m"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    spot = f", field {field!r}" if field else ""
    assert done.stderr.startswith(f"tooldeck eval: error: {name}, line {line}{spot}: {problem}")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


BOOLEAN_SCHEMAS = """\
- id: note
  prompt: Save a note saying hello, tagged anything.
  tools:
    - name: save_note
      description: Save a note.
      parameters:
        type: object
        properties:
          text: {type: string}
          tag: true
          owner: false
        required: [text]
  expect:
    calls:
      - save_note: {text: [hello], tag: [7, ""]}
"""


async def test_boolean_property_schemas_are_taken_and_scored(tmp_path: Path) -> None:
    (case,) = load_case_file(written(tmp_path, "notes.yaml", BOOLEAN_SCHEMAS))
    (tool,) = case.tools
    assert tool.spec.parameters["properties"]["tag"] is True
    assert tool.spec.parameters["properties"]["owner"] is False

    def saving(**arguments: object) -> AssistantOutput:
        call = ToolCall(id="c1", name="save_note", arguments=arguments)
        return AssistantOutput(tool_calls=(call,))

    model = ScriptedModel(
        [saving(text="hello", tag=7), saving(text="hello", owner="me"), saving(text="hello")]
    )
    reports = [await run_eval([case], {"m": model}) for _ in range(3)]
    verdicts = [(r.results[0].correct, r.results[0].reason) for r in reports]
    assert verdicts[0] == (True, "")
    assert verdicts[1][0] is False
    assert "owner" in verdicts[1][1]
    assert verdicts[2] == (True, "")
