"""The ``tooldeck`` command, run as a subprocess: what it prints and its exit status."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from tooldeck import AssistantOutput, ModelSettings, ToolCall
from tooldeck.cli.display import Console, RunDisplay
from tooldeck.run.events import ModelRequest, ModelResponse, TextDelta, ToolCallDelta

TOOLS_MODULE = textwrap.dedent(
    '''
    from tooldeck import ToolRegistry, tool


    @tool(toolsets=["text"])
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()


    @tool(toolsets=["math"])
    def double(number: int) -> int:
        """Twice the number."""
        return 2 * number


    only_math = ToolRegistry([double])
    not_tools = 42
    '''
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "my_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    return tmp_path


def tooldeck(
    *args: str, cwd: Path | None = None, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("OPENAI")},
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 1, done
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tooldeck: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


def test_no_command_prints_help() -> None:
    done = tooldeck()
    assert done.returncode == 0
    assert "usage: tooldeck" in done.stdout
    for command in ("demo", "run", "tools"):
        assert command in done.stdout


def test_tools_prints_the_specs_the_model_sees(workdir: Path) -> None:
    done = tooldeck("tools", "my_tools", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert "shout\n  Say it louder." in done.stdout
    assert '"number": {' in done.stdout
    assert '"additionalProperties": false' in done.stdout


def test_tools_as_json_from_a_registry_attribute_and_a_toolset(workdir: Path) -> None:
    done = tooldeck("tools", "my_tools:only_math", "--json", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert [spec["name"] for spec in json.loads(done.stdout)] == ["double"]
    done = tooldeck("tools", "my_tools", "--toolset", "text", "--json", cwd=workdir)
    assert [spec["name"] for spec in json.loads(done.stdout)] == ["shout"]


def test_tools_of_the_demo_module() -> None:
    done = tooldeck("tools", "tooldeck.cli.demo", "--json")
    specs = json.loads(done.stdout)
    assert [spec["name"] for spec in specs] == ["add_numbers", "get_weather"]
    assert specs[1]["parameters"]["properties"]["unit"]["anyOf"][0]["enum"] == [
        "celsius",
        "fahrenheit",
    ]


def test_a_module_that_does_not_import_is_one_line() -> None:
    done = tooldeck("tools", "no_such_package.tools")
    assert_one_line_error(done, "cannot import 'no_such_package.tools'")


def test_an_attribute_that_is_missing_or_not_tools_is_one_line(workdir: Path) -> None:
    assert_one_line_error(
        tooldeck("tools", "my_tools:nothing", cwd=workdir), "no attribute 'nothing'"
    )
    assert_one_line_error(tooldeck("tools", "my_tools:not_tools", cwd=workdir), "is a int")


def test_an_unknown_toolset_is_a_usage_error(workdir: Path) -> None:
    done = tooldeck("tools", "my_tools", "--toolset", "web", cwd=workdir)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "tooldeck tools: error: --toolset: unknown toolset(s): 'web'; known: math, text "
        "(see tooldeck tools --help)\n"
    )


def test_a_missing_model_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "model.gguf"
    done = tooldeck("run", "Hi", "--tools", "tooldeck.cli.demo", "--model", f"local:{missing}")
    assert_one_line_error(done, f"no GGUF model file at '{missing}'")


def test_a_hosted_model_without_a_key_is_one_line() -> None:
    done = tooldeck("run", "Hi", "--tools", "tooldeck.cli.demo", "--model", "openai:gpt-4.1-mini")
    assert_one_line_error(done)
    assert done.stderr == (
        "tooldeck: error: no API key for 'openai:gpt-4.1-mini': set OPENAI_API_KEY, or name the "
        "variable that holds it with --api-key-env NAME; for a compatible server give "
        "--base-url URL\n"
    )


def test_an_unknown_model_string_is_one_line() -> None:
    done = tooldeck("run", "Hi", "--tools", "tooldeck.cli.demo", "--model", "llama:7b")
    assert_one_line_error(done, "unknown model 'llama:7b'")


def test_run_picks_toolsets_only_of_tools() -> None:
    done = tooldeck("run", "Hi", "--toolset", "math")
    assert done.returncode == 2
    assert "--toolset picks tools of --tools: give -t/--tools too" in done.stderr


@pytest.mark.slow
def test_demo_shows_each_call_its_result_the_answer_and_timing() -> None:
    done = tooldeck("demo", "What is 17 plus 25?", timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tooldeck demo on local:gemma-3-270m-q4_k_m.gguf" in out
    assert "user: What is 17 plus 25?" in out
    assert "→ add_numbers(left=17, right=25)" in out
    assert "← 42  (" in out
    assert "\nanswer: " in out
    assert " s total, " in out
    assert "stop: answer" in out
    assert done.stderr == ""  # llama.cpp's loading chatter is silenced


@pytest.mark.slow
def test_run_a_prompt_on_tools_from_a_module(workdir: Path) -> None:
    done = tooldeck(
        "run",
        "Double the number 21.",
        "--tools",
        "my_tools",
        "--toolset",
        "math",
        "--tool-choice",
        "required",
        "--max-rounds",
        "3",
        cwd=workdir,
        timeout=300,
    )
    # After the forced first call a 270M model may keep calling until max_rounds; either way
    # the call shows, and a stop without an answer is one line on stderr.
    assert "→ double(number=21)" in done.stdout
    assert "← 42" in done.stdout
    if done.returncode == 0:
        assert "\nanswer: " in done.stdout
    else:
        assert_one_line_error(
            subprocess.CompletedProcess(done.args, done.returncode, "", done.stderr),
            "the run stopped without an answer",
        )


def test_run_shows_the_text_and_arguments_as_the_model_writes_them(
    workdir: Path, server: FakeOpenAI
) -> None:
    first = completion_body("Doubling it.", [chat_call("call_1", "double", '{"number":21}')])
    server.reply(
        Reply(events=completion_chunks(first)),
        Reply(events=completion_chunks(completion_body("It is 42."))),
    )
    model = ("--model", "openai-chat:gpt-4.1-mini", "--toolset", "math")
    openai = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"}

    done = tooldeck(
        "run", "Double 21.", "--tools", "my_tools", *model, cwd=workdir, env=openai, timeout=180
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # Not a terminal: the pieces are written as they come, one line per text or call.
    assert lines[1:5] == [
        "user: Double 21.",
        "  … Doubling it.",
        '  … double {"number":21}',
        lines[4],
    ]
    assert lines[4].startswith("round 1: 1 tool call (")
    assert lines[5:8] == ["  → double(number=21)", lines[6], "  … It is 42."]
    assert lines[6].startswith("  ← 42  (")
    assert lines[8].startswith("round 2: answer (")
    assert lines[9] == "answer: It is 42."
    assert all(body["stream"] is True for body in server.bodies)


def test_on_a_terminal_the_writing_shows_in_a_region_that_gives_way_to_the_lines() -> None:
    screen = io.StringIO()
    display = RunDisplay(Console(screen, terminal=True), "openai:gpt-4.1-mini")
    call = ToolCall(id="c1", name="double", arguments={"number": 21})

    for event in (
        ModelRequest(1, 1, ModelSettings()),
        TextDelta(1, "Doubling "),
        TextDelta(1, "it."),
        ToolCallDelta(1, 0, "c1", "double", '{"number":'),
        ToolCallDelta(1, 0, "c1", "double", "21}"),
        ModelResponse(1, AssistantOutput(content="Doubling it.", tool_calls=(call,))),
    ):
        display.show(event)
    display.close()

    written = screen.getvalue()
    region = written.index("  … Doubling it.")  # the live region's last drawing
    assert written.index('  … double {"number":21}') > region
    erased = written.index("\x1b[2K", region)  # the region erases itself when the turn is whole
    assert erased < written.index("round 1: 1 tool call (")


BORROWING_MODULE = textwrap.dedent(
    '''
    from tooldeck import tool
    from tooldeck.cli.demo import add_numbers


    @tool
    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"
    '''
)


def names(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [spec["name"] for spec in json.loads(done.stdout)]


def test_tools_from_a_file_path(workdir: Path) -> None:
    (workdir / "sub").mkdir()
    (workdir / "sub" / "more_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    assert names(tooldeck("tools", "./my_tools.py", "--json", cwd=workdir)) == ["shout", "double"]
    assert names(tooldeck("tools", "my_tools.py:only_math", "--json", cwd=workdir)) == ["double"]
    nested = tooldeck("tools", "sub/more_tools.py", "--json", cwd=workdir)
    assert names(nested) == ["shout", "double"]
    assert_one_line_error(tooldeck("tools", "nope.py", cwd=workdir), "no such file: 'nope.py'")


def test_only_the_tools_a_module_defines_not_those_it_imports(workdir: Path) -> None:
    (workdir / "borrowing.py").write_text(BORROWING_MODULE, encoding="utf-8")
    assert names(tooldeck("tools", "borrowing", "--json", cwd=workdir)) == ["greet"]
    exported = BORROWING_MODULE + '\n__all__ = ["add_numbers", "greet"]\n'
    (workdir / "exporting.py").write_text(exported, encoding="utf-8")
    assert names(tooldeck("tools", "exporting", "--json", cwd=workdir)) == ["add_numbers", "greet"]


@pytest.mark.parametrize("target", ["broken", "broken.py", "./broken.py"])
def test_a_module_that_raises_at_import_names_the_file_and_line(workdir: Path, target: str) -> None:
    (workdir / "broken.py").write_text('from tooldeck import tool\n\nCITY = {}["Oslo"]\n')
    done = tooldeck("tools", target, cwd=workdir)
    assert done.stderr == (
        f"tooldeck: error: cannot import {target!r} (broken.py, line 3): KeyError: 'Oslo' "
        "(-v shows the traceback)\n"
    )
    assert done.returncode == 1


def test_a_syntax_error_names_the_file_and_line(workdir: Path) -> None:
    (workdir / "typo.py").write_text("def f(:\n    pass\n")
    done = tooldeck("run", "Hi", "--tools", "typo.py", cwd=workdir)
    assert done.returncode == 1
    assert done.stderr == (
        "tooldeck: error: cannot import 'typo.py' (typo.py, line 1): SyntaxError: invalid "
        "syntax (-v shows the traceback)\n"
    )


def test_the_line_is_in_the_persons_code_and_v_shows_the_traceback(workdir: Path) -> None:
    (workdir / "helper.py").write_text("import json\n\nCONFIG = json.loads('{oops')\n")
    (workdir / "uses_helper.py").write_text("import helper\n")
    done = tooldeck("tools", "uses_helper", cwd=workdir)
    assert done.stderr.startswith(
        "tooldeck: error: cannot import 'uses_helper' (helper.py, line 3): JSONDecodeError: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    verbose = tooldeck("tools", "uses_helper", "-v", cwd=workdir)
    assert verbose.returncode == 1
    assert verbose.stderr.startswith("Traceback (most recent call last):\n")
    assert 'helper.py", line 3, in <module>\n' in verbose.stderr
    assert verbose.stderr.splitlines()[-1] == done.stderr.strip()


def test_a_missing_dependency_of_the_module_names_where_it_is_imported(workdir: Path) -> None:
    (workdir / "needs.py").write_text("import not_installed_anywhere\n")
    done = tooldeck("tools", "needs", cwd=workdir)
    assert done.stderr == (
        "tooldeck: error: cannot import 'needs' (needs.py, line 1): ModuleNotFoundError: No "
        "module named 'not_installed_anywhere' (-v shows the traceback)\n"
    )
