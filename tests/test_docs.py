"""The documentation runs: every python block of the README and the site, and the docstring examples.

A block is run as a fresh module from the repository's root; a block that defines
``test_*`` functions (the Get started page's first test) has them called too. Programs that
need a provider keep their work under ``if __name__ == "__main__":`` and are run against
loopback servers by tests/test_site.py. A ``--8<-- "path"`` line inside a block is the
site's snippet include: the block holds that file, and so does what is run here.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

import tooldeck

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"^```(?:python|py)([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
FOREIGN = ("OpenAI Agents SDK", "Pydantic AI", "llm")
"""The libraries the migration pages compare with: their side is shown, not run."""
_RUN = ("", 'title="tooldeck"')
_SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)


def pages() -> list[Path]:
    """The README and every page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def page_name(page: Path) -> str:
    return page.name if page == README else page.relative_to(DOCS).as_posix()


def page_text(page: Path) -> str:
    """The page's markdown with snippet includes replaced by the files they name."""
    text = page.read_text(encoding="utf-8")
    return _SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8").rstrip(), text)


def _fenced(name: str) -> list[tuple[str, str]]:
    """Each python block of a page with what follows its language (``title="..."``)."""
    page = README if name == README.name else DOCS / name
    return [(attributes.strip(), source) for attributes, source in _BLOCK.findall(page_text(page))]


def page_blocks(name: str) -> list[str]:
    """The python blocks of one page that run: ``"README.md"`` or a path under docs/."""
    return [source for attributes, source in _fenced(name) if attributes in _RUN]


def foreign_blocks(name: str) -> list[tuple[str, str]]:
    """Another library's code on a migration page: (its title, its source)."""
    titled = [
        (attributes, source) for attributes, source in _fenced(name) if attributes not in _RUN
    ]
    return [(attributes.removeprefix("title=").strip('"'), source) for attributes, source in titled]


def readme_blocks() -> list[str]:
    return page_blocks(README.name)


def _examples() -> list[tuple[str, int]]:
    return [
        (page_name(page), i) for page in pages() for i in range(len(page_blocks(page_name(page))))
    ]


def test_the_documentation_has_python_examples() -> None:
    assert len(readme_blocks()) >= 1
    assert len(_examples()) >= 40


@pytest.mark.parametrize(("page", "index"), _examples(), ids=lambda v: str(v))
def test_example_runs(page: str, index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # examples name files from the repository's root
    source = page_blocks(page)[index]
    filename = f"{page} block {index + 1}"
    module = types.ModuleType(f"docs_example_{index}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # as an imported module is
    with warnings.catch_warnings():  # an example must not use a name kept for old code
        warnings.filterwarnings("error", category=DeprecationWarning, module=module.__name__)
        exec(compile(source, filename, "exec"), module.__dict__)
    for name, value in list(module.__dict__.items()):
        code = getattr(value, "__code__", None)
        if name.startswith("test_") and code is not None and code.co_filename == filename:
            value()


def test_a_test_defined_in_an_example_is_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner above calls a block's test functions: a failing one fails its example."""
    (first_test,) = [b for b in page_blocks("get-started.md") if "def test_" in b]
    broken = first_test.replace('"18 and sunny."', '"something else"', 1)
    monkeypatch.setattr(sys.modules[__name__], "page_blocks", lambda page: [broken])
    with pytest.raises(AssertionError):
        test_example_runs("get-started.md", 0, monkeypatch)


@pytest.mark.parametrize("page", [page_name(page) for page in pages()])
def test_only_another_librarys_code_is_left_unrun(page: str) -> None:
    """A titled block is not run, so only another library's code on a migration page may
    carry a title; it must still compile, and sit beside tooldeck's code that runs."""
    for title, source in foreign_blocks(page):
        assert title in FOREIGN, f"{page}: a python block titled {title!r} would not be run"
        assert page.startswith("migrating/"), f"{page}: {title!r} code outside the migration pages"
        compile(source, f"{page} ({title})", "exec")
    if foreign_blocks(page):
        assert len(page_blocks(page)) >= len(foreign_blocks(page))


def _quick_start_commands(text: str) -> list[str]:
    bash = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert bash is not None
    return [line for line in bash.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_quick_start_has_exactly_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    quick_start = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = _quick_start_commands(quick_start)
    assert len(commands) == 2
    assert commands[0].endswith("tooldeck demo")
    assert commands[1].endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci
    started = (DOCS / "get-started.md").read_text(encoding="utf-8")
    assert _quick_start_commands(started) == commands


def _nav_pages() -> list[str]:
    """The pages of the site's navigation outside the API reference (mkdocs.yml ``nav``)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    listed = re.findall(r"^\s+- (?:[^\n]*: )?([\w/.-]+\.md)$", nav, re.MULTILINE)
    return [page for page in listed if not page.startswith("api/") and page != "index.md"]


def test_the_docs_index_and_the_readme_link_every_page_of_the_navigation() -> None:
    pages = _nav_pages()
    assert {"run-control.md", "guardrails.md", "web.md", "testing.md"} <= set(pages)
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8").split("\n## Documentation", 1)[1]
    readme = readme.split("\n## ", 1)[0]
    missing_index = [page for page in pages if f"]({page})" not in index]
    missing_readme = [page for page in pages if f"](docs/{page})" not in readme]
    assert missing_index == [], f"docs/index.md's table does not link {missing_index}"
    assert missing_readme == [], f"README's Documentation list does not link {missing_readme}"


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
        "'httpx2', 'anyio', 'a2a')))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert output == "[]"


def test_console_blocks_are_only_where_a_test_runs_them() -> None:
    """A ``console`` block promises its commands run as shown: tests/test_cli_readme.py runs
    those of the README and docs/cli.md; a transcript that cannot run (a server, the local
    model, a terminal dialogue) is a ``text`` block."""
    from test_cli_readme import PAGES

    holding = [page for page in pages() if "```console\n" in page.read_text(encoding="utf-8")]
    assert set(holding) <= set(PAGES)
