"""The documentation runs: README python blocks and docstring examples are executed."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tooldeck

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def readme_blocks() -> list[str]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


def test_readme_has_python_examples() -> None:
    assert len(readme_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_readme_example_runs(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(README.parent)  # examples name files from the repository's root
    source = readme_blocks()[index]
    namespace: dict[str, object] = {"__name__": f"readme_example_{index}"}
    exec(compile(source, f"README.md block {index + 1}", "exec"), namespace)


def test_readme_quick_start_has_exactly_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    quick_start = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    bash = re.search(r"```bash\n(.*?)```", quick_start, re.DOTALL)
    assert bash is not None
    commands = [line for line in bash.group(1).splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[0].endswith("tooldeck demo")
    assert commands[1].endswith("python -m pytest")
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci


def _modules() -> list[str]:
    names = [tooldeck.__name__]
    for info in pkgutil.walk_packages(tooldeck.__path__, prefix="tooldeck."):
        names.append(info.name)
    return names


def _modules_with_examples() -> list[str]:
    """The modules whose source holds ``>>>`` examples."""
    return [name for name in _modules() if ">>>" in Path(_source_file(name)).read_text("utf-8")]


def _source_file(name: str) -> str:
    spec = importlib.util.find_spec(name)
    assert spec is not None
    assert spec.origin is not None
    return spec.origin


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    failures, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert attempted > 0, f"{name} has '>>>' examples that doctest did not find and run"
    assert failures == 0


def test_the_entry_points_have_examples_that_run() -> None:
    documented = set(_modules_with_examples())
    assert {
        "tooldeck.run.agent",
        "tooldeck.tools.function",
        "tooldeck.tools.registry",
    } <= documented


def test_import_does_not_load_provider_sdks() -> None:
    code = (
        "import sys, tooldeck; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'llama_cpp', 'httpx', 'griffe', 'jsonschema', 'rich', 'mcp', 'mcp_types', "
        "'httpx2', 'anyio')))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert output == "[]"
