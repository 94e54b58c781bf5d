"""The documentation site builds strictly, and the first agents of Get started run.

``mkdocs build --strict`` fails on a broken link or anchor, a page missing from the
navigation, a snippet naming a missing file, or an API entry for a name that no longer
exists. Each first agent of the Get started page (and the README's) is run as a program
against a loopback server speaking its provider's API, and prints what the page shows.
"""

from __future__ import annotations

import importlib
import os
import pickle
import pkgutil
import re
import subprocess
import sys
import traceback
from pathlib import Path

import griffe
import pytest

import tooldeck
from _anthropic_server import anthropic_server, message_body, text, tool_use
from _gemini_server import call_part, gemini_server, response_body, text_part
from _loopback import Reply
from _openai_server import Reply as OpenAIReply
from _openai_server import call_item, chat_call, completion_body, message_item, running
from _openai_server import response_body as openai_response
from test_docs import page_blocks
from tooldeck import Agent, Approve, AssistantOutput, ScriptedModel, ToolCall, tool
from tooldeck.errors import CheckpointError, ToolDeckError

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = [
    "get_weather {'city': 'Paris'} -> It is 18 degrees and sunny in Paris.",
    "It is 18 degrees and sunny in Paris.",
]
"""What each first agent prints (the text block under the OpenAI one on the page)."""


def build_site(site_dir: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` into ``site_dir``, from the repository's root."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2.0
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The site built once for this module's tests: its folder, and how the build went."""
    site = tmp_path_factory.mktemp("built") / "site"
    return site, build_site(site)


def test_the_site_builds_strictly(built: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, process = built
    assert process.returncode == 0, process.stderr
    assert "WARNING" not in process.stderr
    assert (site / "index.html").is_file()
    assert (site / "get-started.html").is_file()  # files, not folders: it opens from disk
    assert (site / "search" / "search_index.js").is_file()  # search without a server


def api_anchors(site: Path) -> set[str]:
    """The ids of the API reference's entries: ``tooldeck.run.agent.Agent``, ..."""
    pages = (site / "api").glob("*.html")
    return {
        anchor
        for page in pages
        for anchor in re.findall(r'id="(tooldeck[^"]*)"', page.read_text("utf-8"))
    }


def test_every_front_door_name_is_in_the_api_reference(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    anchors = api_anchors(built[0])
    homes = {name: f"{module}.{name}" for name, module in tooldeck._EXPORTS.items()}
    assert set(homes) == set(tooldeck.__all__)
    assert [name for name, home in homes.items() if home not in anchors] == []


def _public_modules() -> list[str]:
    found = [info.name for info in pkgutil.walk_packages(tooldeck.__path__, prefix="tooldeck.")]
    return [name for name in found if "._" not in name]


def test_every_exported_name_is_in_the_api_reference(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """What a package lists in ``__all__`` is documented under that package's name (the
    command line's modules excepted: the command line page documents it)."""
    anchors = api_anchors(built[0])
    missing = []
    for name in _public_modules():
        if name.startswith("tooldeck.cli"):
            continue
        exported = getattr(importlib.import_module(name), "__all__", [])
        missing += [f"{name}.{export}" for export in exported if f"{name}.{export}" not in anchors]
    assert missing == []


NO_DOCSTRING = {
    "tooldeck.run.agent_tool.AgentInput": "pydantic would show a docstring to the model",
}
"""Public names without a docstring, and why."""


def _undocumented(obj: griffe.Object) -> list[str]:
    missing = []
    for name, member in obj.members.items():
        if (
            name.startswith("_")
            or member.is_alias
            or not (member.is_module or member.is_class or member.is_function)
        ):
            continue
        assert isinstance(member, griffe.Object)
        if member.docstring is None and member.path not in NO_DOCSTRING:
            missing.append(member.path)
        if member.is_module or member.is_class:
            missing += _undocumented(member)
    return missing


def test_every_public_name_has_a_docstring() -> None:
    """Every module, class, function and method whose name does not start with ``_``."""
    package = griffe.load("tooldeck", search_paths=[str(ROOT / "src")], resolve_aliases=False)
    assert isinstance(package, griffe.Module)
    assert _undocumented(package) == []


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """--strict is what makes a broken link fail; checked on a copy of the docs."""
    config = (ROOT / "mkdocs.yml").read_text("utf-8")
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    page = docs / "concepts.md"
    page.write_text(page.read_text("utf-8") + "\nSee [the gone page](gone.md).\n", "utf-8")
    (tmp_path / "mkdocs.yml").write_text(
        config.replace("docs_dir: docs", f"docs_dir: {docs}").replace(
            'base_path: ["."]', f'base_path: ["{ROOT}"]'
        ),
        "utf-8",
    )
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode != 0
    assert "gone.md" in built.stderr


def first_agent(page: str, marker: str) -> str:
    (block,) = [b for b in page_blocks(page) if marker in b and "def main()" in b]
    return block


def run_program(source: str, name: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    exec(compile(source, name, "exec"), {"__name__": "__main__"})
    return capsys.readouterr().out.splitlines()


def test_the_readme_agent_is_the_get_started_one() -> None:
    (readme,) = [b for b in page_blocks("README.md") if "def main()" in b]
    assert readme == first_agent("get-started.md", '"openai:')


@pytest.mark.parametrize("page", ["README.md", "get-started.md"])
def test_the_first_agent_on_openai(
    page: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with running() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        call = call_item("call_1", "get_weather", '{"city": "Paris"}')
        server.reply(OpenAIReply(body=openai_response([call])))
        server.reply(OpenAIReply(body=openai_response([message_item(EXPECTED[1])])))
        printed = run_program(first_agent(page, '"openai:'), page, capsys)
    assert printed == EXPECTED
    assert server.requests[0].path == "/v1/responses"
    assert server.bodies[0]["model"] == "gpt-4.1-mini"
    assert server.bodies[1]["input"][-1]["output"] == EXPECTED[0].split(" -> ")[1]


def test_the_first_agent_on_anthropic(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with anthropic_server() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root)
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        server.reply(
            Reply(body=message_body([tool_use("toolu_1", "get_weather", {"city": "Paris"})]))
        )
        server.reply(Reply(body=message_body([text(EXPECTED[1])])))
        printed = run_program(first_agent("get-started.md", '"anthropic:'), "anthropic", capsys)
    assert printed == EXPECTED
    assert server.bodies[0]["model"] == "claude-sonnet-4-5"
    assert server.bodies[0]["system"] == "Be brief."


def test_the_first_agent_on_gemini(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with gemini_server() as server:
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.setenv("GEMINI_API_KEY", "AIza-docs")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.root)
        server.reply(Reply(body=response_body([call_part("get_weather", {"city": "Paris"})])))
        server.reply(Reply(body=response_body([text_part(EXPECTED[1])])))
        printed = run_program(first_agent("get-started.md", '"gemini:'), "gemini", capsys)
    assert printed == EXPECTED
    assert "gemini-2.5-flash:generateContent" in server.requests[0].path


def test_the_first_agent_on_a_local_server(capsys: pytest.CaptureFixture[str]) -> None:
    source = first_agent("get-started.md", "OpenAIChatModel(")
    with running() as server:
        call = chat_call("call_1", "get_weather", '{"city": "Paris"}')
        server.reply(OpenAIReply(body=completion_body(None, [call])))
        server.reply(OpenAIReply(body=completion_body(EXPECTED[1])))
        local = source.replace("http://127.0.0.1:8000/v1", server.url)
        assert local != source  # the page's address, pointed at this test's server
        printed = run_program(local, "local server", capsys)
    assert printed == EXPECTED
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.bodies[0]["model"] == "qwen2.5-7b"


@pytest.mark.parametrize("page", ["openai-agents.md", "pydantic-ai.md", "llm.md"])
def test_the_same_agent_of_each_migration_page_runs(
    page: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """tooldeck's side of "The same agent" is a whole program: run against the loopback."""
    source = page_blocks(f"migrating/{page}")[0]
    assert "def main()" in source
    with running() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        call = call_item("call_1", "get_weather", '{"city": "Paris"}')
        server.reply(OpenAIReply(body=openai_response([call])))
        server.reply(OpenAIReply(body=openai_response([message_item(EXPECTED[1])])))
        printed = run_program(source, page, capsys)
    assert printed == [EXPECTED[1]]
    assert server.bodies[1]["input"][-1]["output"] == EXPECTED[1]


def _error_classes() -> list[type[ToolDeckError]]:
    for name in _public_modules():
        importlib.import_module(name)  # every error class defined, wherever it lives
    found, pending = [], [ToolDeckError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending += cls.__subclasses__()
    return found


def test_every_documented_error_links_a_page_and_anchor_that_exist(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    site = built[0]
    linked = {cls.__name__: cls.docs for cls in _error_classes() if cls.docs is not None}
    assert {"CheckpointError", "SessionConflict", "ModelNotConfigured"} <= set(linked)
    for name, docs in linked.items():
        page, _, anchor = docs.partition("#")
        html = site / page.replace(".md", ".html")
        assert html.is_file(), f"{name}.docs names {page!r}, which is not a page"
        if anchor:
            assert f'id="{anchor}"' in html.read_text("utf-8"), f"{name}.docs: no #{anchor}"


def test_an_error_shows_its_page_under_its_traceback() -> None:
    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    calling = ToolCall(id="d1", name="delete_file", arguments={"path": "a.txt"})
    agent = Agent(ScriptedModel([AssistantOutput(tool_calls=(calling,))]), [delete_file])
    paused = agent.run_sync("Delete a.txt.")
    with pytest.raises(CheckpointError) as refused:
        agent.resume_sync(paused.checkpoint, {"nope": Approve()})  # not a pending call

    shown = "".join(traceback.format_exception(refused.value))
    assert "see the documentation: docs/human-in-the-loop.md#binding" in shown
    assert "docs/" not in str(refused.value)  # the message itself is unchanged
    assert pickle.loads(pickle.dumps(refused.value)).__notes__ == refused.value.__notes__
