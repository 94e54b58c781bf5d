"""The code stays as the team agreed: ruff (lint and format) and mypy --strict are clean."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_tool_is_clean(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


PACKAGE = ROOT / "src" / "tooldeck"
MAX_MODULE_LINES = 400
"""Lines of code a module may have (``code_lines``: docstrings, comments and blank lines are
not counted): a guide to split by responsibility, never a reason to cut one idea in two."""
MAX_FUNCTION_LINES = 60
"""A function's lines from ``def`` to its end, its docstring excluded (decorators too)."""


def function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    assert node.end_lineno is not None
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        assert first.end_lineno is not None
        lines -= first.end_lineno - first.lineno + 1
    return lines


def code_lines(text: str) -> int:
    """A module's lines of code: its docstrings (of the module, classes, functions and
    fields), comments and blank lines left out — what a reader must hold, not what explains it."""
    tree = ast.parse(text)
    explained: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in body:
            if (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                assert statement.end_lineno is not None
                explained.update(range(statement.lineno, statement.end_lineno + 1))
    return sum(
        1
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.strip().startswith("#") and number not in explained
    )


def kept_whole(text: str) -> bool:
    """Whether a module's docstring says why it is one idea kept whole (``Kept whole:``
    and a reason): the size is a guide, and a file is never split just to meet it."""
    docstring = ast.get_docstring(ast.parse(text)) or ""
    _, said, why = docstring.partition("Kept whole:")
    return bool(said) and len(why.strip()) >= 40


def test_no_module_or_function_is_too_long_to_read_at_once() -> None:
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT)
        if code_lines(text) > MAX_MODULE_LINES and not kept_whole(text):
            too_long.append(f"{where}: {code_lines(text)} lines of code")
        for node in ast.walk(ast.parse(text)):
            is_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if is_function and function_lines(node) > MAX_FUNCTION_LINES:
                too_long.append(f"{where}:{node.lineno} {node.name}: {function_lines(node)}")
    assert too_long == []


def test_the_length_rule_counts_a_function_without_its_docstring() -> None:
    source = 'def f():\n    """Doc\n    string."""\n    a = 1\n    return a\n'
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.FunctionDef)
    assert function_lines(node) == 3


def test_the_module_rule_counts_code_without_its_explanations() -> None:
    source = '"""Module\ndoc."""\n\n# why\nX = 1\n"""X\'s doc."""\n\n\ndef f():\n    """Doc."""\n    return X\n'
    assert code_lines(source) == 3


def test_a_long_module_may_be_kept_whole_only_with_its_reason() -> None:
    reason = "the loop is one idea: its steps read in order, split they would not"
    assert kept_whole(f'"""The loop.\n\nKept whole: {reason}."""\nX = 1\n')
    assert not kept_whole('"""The loop.\n\nKept whole: yes."""\n')
    assert not kept_whole('"""The loop."""\n')
