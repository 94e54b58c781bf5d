"""``tooldeck run`` as a script or a person uses it: what it prints and its exit status.

The model is the loopback OpenAI-compatible server (tests/_openai_server.py), reached with
``--base-url`` (no key needed there); times in the output are replaced by ``T``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks

SHOP_TOOLS = textwrap.dedent(
    '''
    from dataclasses import dataclass

    from tooldeck import RunContext, tool


    @dataclass
    class Shop:
        currency: str


    def open_shop() -> Shop:
        return Shop("EUR")


    def closed_shop() -> Shop:
        raise RuntimeError("the shop's database is down")


    PRICES = {"apple": 2}


    @tool
    def price(ctx: RunContext[Shop], item: str) -> str:
        """The price of an item."""
        return f"{PRICES[item]} {ctx.deps.currency}"


    @tool
    def double(number: int) -> int:
        """Twice the number."""
        return 2 * number
    '''
)
MODEL = ("--model", "openai-chat:gpt-test")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "shop.py").write_text(SHOP_TOOLS, encoding="utf-8")
    return tmp_path


def tooldeck(
    *args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
    )


def run(
    server: FakeOpenAI, cwd: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = ("run", *args, "--tools", "shop", *MODEL, "--base-url", server.url)
    return tooldeck(*base, cwd=cwd, stdin=stdin, env=env)


def timeless(text: str) -> str:
    return re.sub(r"\d+\.\d+ (s|ms)\b", r"T \1", text)


def answers(server: FakeOpenAI, *texts: str) -> None:
    server.reply(*(Reply(events=completion_chunks(completion_body(t))) for t in texts))


def calls(server: FakeOpenAI, name: str, arguments: str, then: str = "Done.") -> None:
    first = completion_body(None, [chat_call("call_1", name, arguments)])
    server.reply(Reply(events=completion_chunks(first)))
    answers(server, then)


def user_message(server: FakeOpenAI) -> str:
    (message,) = [m for m in server.bodies[0]["messages"] if m["role"] == "user"]
    return str(message["content"])


def tool_messages(server: FakeOpenAI) -> list[str]:
    return [m["content"] for m in server.bodies[1]["messages"] if m["role"] == "tool"]


def test_version() -> None:
    done = tooldeck("--version", cwd=Path.cwd())
    assert (done.returncode, done.stdout) == (0, "tooldeck 0.1.0\n")


def test_help_says_the_exit_statuses_and_the_environment_variables(workdir: Path) -> None:
    for command in (("--help",), ("run", "--help")):
        done = tooldeck(*command, cwd=workdir)
        assert done.returncode == 0
        assert "exit status:\n  0    the model answered\n  1    the run stopped" in done.stdout
        assert "  2    usage error: the arguments are wrong (nothing was run)" in done.stdout
        assert "  130  interrupted (Ctrl-C)" in done.stdout
        assert "OPENAI_API_KEY, OPENAI_BASE_URL" in done.stdout
        assert "ANTHROPIC_API_KEY" in done.stdout


def test_the_prompt_from_a_pipe(server: FakeOpenAI, workdir: Path) -> None:
    answers(server, "Hi.")
    done = run(server, workdir, "--no-display", stdin="What is here?\n")
    assert (done.returncode, done.stdout) == (0, "Hi.\n")
    assert user_message(server) == "What is here?"


def test_piped_text_comes_before_the_prompt(server: FakeOpenAI, workdir: Path) -> None:
    answers(server, "A list.")
    done = run(server, workdir, "Summarize this.", "--no-display", stdin="apples\npears\n")
    assert done.returncode == 0, done.stderr
    assert user_message(server) == "apples\npears\n\nSummarize this."


def test_a_dash_reads_the_prompt_from_stdin(server: FakeOpenAI, workdir: Path) -> None:
    answers(server, "Hi.")
    done = run(server, workdir, "-", "--no-display", stdin="Hello there")
    assert done.returncode == 0, done.stderr
    assert user_message(server) == "Hello there"


def test_an_empty_prompt_is_a_usage_error(server: FakeOpenAI, workdir: Path) -> None:
    done = run(server, workdir, stdin="  \n")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "tooldeck run: error: the prompt is empty: give it as an argument, or pipe it on stdin "
        "(see tooldeck run --help)\n"
    )
    assert server.requests == []


def test_no_display_prints_the_answer_alone_and_the_totals_on_stderr(
    server: FakeOpenAI, workdir: Path
) -> None:
    calls(server, "double", '{"number": 21}', then="It is 42.")
    done = run(server, workdir, "Double 21.", "--no-display")
    assert (done.returncode, done.stdout) == (0, "It is 42.\n")
    assert timeless(done.stderr) == (
        "T s total, T s in the model; 2 model turns, 1 tool call, "
        "40 input / 14 output tokens; stop: answer\n"
    )


def test_json_prints_the_run_for_scripts(server: FakeOpenAI, workdir: Path) -> None:
    calls(server, "double", '{"number": 21}', then="It is 42.")
    done = run(server, workdir, "Double 21.", "--json")
    assert (done.returncode, done.stderr) == (0, "")
    document = json.loads(done.stdout)
    assert document["run_id"]
    assert document["session"]  # every run is kept as a conversation (tooldeck run -c)
    (call,) = document["calls"]
    assert call["duration_s"] >= 0
    assert document["duration_s"] >= document["model_s"] >= 0
    for varying in (document, call):
        for key in ("run_id", "session", "duration_s", "model_s"):
            varying.pop(key, None)
    assert document == {
        "answer": "It is 42.",
        "stop_reason": "answer",
        "error": None,
        "model": "openai-chat:gpt-test",
        "agent": "agent",
        "calls": [
            {
                "id": "call_1",
                "name": "double",
                "arguments": {"number": 21},
                "ok": True,
                "output": "42",
                "error_code": None,
                "error": None,
            }
        ],
        "usage": {"input_tokens": 40, "output_tokens": 14, "requests": 2},
    }


def test_system_prompt_from_the_option_or_a_file(server: FakeOpenAI, workdir: Path) -> None:
    (workdir / "system.txt").write_text("Answer in French.\n", encoding="utf-8")
    answers(server, "Salut.", "Bonjour.")
    assert run(server, workdir, "Hi", "--system", "Be brief.", "--no-display").returncode == 0
    assert run(server, workdir, "Hi", "--instructions-file", "system.txt").returncode == 0
    firsts = [body["messages"][0] for body in server.bodies]
    assert firsts == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Answer in French.\n"},
    ]


def test_a_missing_instructions_file_or_both_options_are_usage_errors(
    server: FakeOpenAI, workdir: Path
) -> None:
    missing = run(server, workdir, "Hi", "--instructions-file", "nope.txt")
    assert (missing.returncode, missing.stderr) == (
        2,
        "tooldeck run: error: --instructions-file 'nope.txt': No such file or directory "
        "(see tooldeck run --help)\n",
    )
    both = run(server, workdir, "Hi", "-s", "x", "--instructions-file", "nope.txt")
    assert both.returncode == 2
    assert both.stderr == (
        "tooldeck run: error: argument --instructions-file: not allowed with argument "
        "-s/--system/--instructions (see tooldeck run --help)\n"
    )
    assert server.requests == []


def test_deps_are_built_by_the_factory(server: FakeOpenAI, workdir: Path) -> None:
    calls(server, "price", '{"item": "apple"}')
    done = run(server, workdir, "Price of an apple?", "--deps", "shop:open_shop")
    assert done.returncode == 0, done.stderr
    assert tool_messages(server) == ["2 EUR"]


def test_a_deps_factory_that_raises_is_one_line_and_a_traceback_with_v(
    server: FakeOpenAI, workdir: Path
) -> None:
    done = run(server, workdir, "Hi", "--deps", "shop:closed_shop")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "tooldeck: error: --deps 'shop:closed_shop' raised (shop.py, line 17): RuntimeError: "
        "the shop's database is down (-v shows the traceback)\n"
    )
    verbose = run(server, workdir, "Hi", "--deps", "shop:closed_shop", "-v")
    assert verbose.stderr.startswith("Traceback (most recent call last):\n")
    assert 'shop.py", line 17, in closed_shop\n' in verbose.stderr
    assert verbose.stderr.endswith("(-v shows the traceback)\n")
    not_callable = run(server, workdir, "Hi", "--deps", "shop:PRICES")
    assert not_callable.returncode == 2
    assert "error: --deps 'shop:PRICES' is a dict, not a factory" in not_callable.stderr
    assert server.requests == []


def test_a_tools_exception_shows_on_its_calls_line(server: FakeOpenAI, workdir: Path) -> None:
    calls(server, "price", '{"item": "pear"}')
    done = run(server, workdir, "Price of a pear?", "--deps", "shop:open_shop")
    assert done.returncode == 0, done.stderr
    assert timeless(done.stdout).splitlines()[4:7] == [
        '  → price(item="pear")',
        "  ✗ KeyError: 'pear'  (T ms)",
        "    the model read: error[tool_error]: the tool 'price' failed while running; try "
        "other arguments or another way",
    ]
    assert "Traceback" not in done.stdout


def test_verbose_shows_the_tools_traceback(server: FakeOpenAI, workdir: Path) -> None:
    calls(server, "price", '{"item": "pear"}')
    done = run(server, workdir, "Price of a pear?", "--deps", "shop:open_shop", "-v")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("    Traceback (most recent call last):")
    assert lines[start - 2].startswith("  ✗ KeyError: 'pear'  (")
    # The traceback starts in the tool (tooldeck's own frames left out) and ends before
    # the next line of the run.
    assert lines[start + 1 : start + 4] == [
        f'      File "{workdir / "shop.py"}", line 26, in price',
        '        return f"{PRICES[item]} {ctx.deps.currency}"',
        "                  ~~~~~~^^^^^^",
    ]
    assert lines[start + 4 :] == ["    KeyError: 'pear'", *lines[start + 5 :]]
    assert lines[start + 5 : start + 7] == ["  … Done.", lines[start + 6]]
    assert lines[start + 6].startswith("round 2: answer (")


def test_error_details_tells_the_model_the_exception(server: FakeOpenAI, workdir: Path) -> None:
    calls(server, "price", '{"item": "pear"}')
    done = run(server, workdir, "Pear?", "--deps", "shop:open_shop", "--error-details")
    assert done.returncode == 0, done.stderr
    assert tool_messages(server) == ["error[tool_error]: KeyError: 'pear'"]
    assert "  ✗ KeyError: 'pear'  (" in done.stdout
    assert "the model read" not in done.stdout


def loop_of_calls(server: FakeOpenAI, count: int) -> None:
    for index in range(count):
        body = completion_body(
            None, [chat_call(f"call_{index}", "double", f'{{"number": {index}}}')]
        )
        server.reply(Reply(events=completion_chunks(body)))


def test_a_run_stopped_at_a_limit_shows_its_totals_and_exits_1(
    server: FakeOpenAI, workdir: Path
) -> None:
    loop_of_calls(server, 2)
    done = run(server, workdir, "Keep doubling.", "--max-rounds", "2")
    assert done.returncode == 1
    assert timeless(done.stdout).splitlines()[-1] == (
        "T s total, T s in the model; 2 model turns, 2 tool calls, 40 input / 14 output "
        "tokens; stop: max_rounds"
    )
    assert done.stderr == (
        "tooldeck: error: the run stopped without an answer: the model asked for tools after 2 "
        "rounds (max_rounds=2)\n"
    )


def test_on_limit_final_answer_asks_for_an_answer_without_tools(
    server: FakeOpenAI, workdir: Path
) -> None:
    loop_of_calls(server, 2)
    answers(server, "The last number was 2.")
    done = run(server, workdir, "Keep doubling.", "--max-rounds", "2", "--on-limit", "final-answer")
    assert done.returncode == 0, done.stderr
    assert "answer: The last number was 2." in done.stdout
    assert "tools" not in server.bodies[2]


def test_a_stopped_run_as_json_says_why(server: FakeOpenAI, workdir: Path) -> None:
    loop_of_calls(server, 1)
    done = run(server, workdir, "Keep doubling.", "--max-rounds", "1", "--json")
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert (document["answer"], document["stop_reason"], len(document["calls"])) == (
        "",
        "max_rounds",
        1,
    )
    assert document["error"] == "the model asked for tools after 1 round (max_rounds=1)"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--max-rounds", "0"), "argument --max-rounds: must be at least 1, got 0"),
        (("--max-rounds", "two"), "argument --max-rounds: expected a whole number, got 'two'"),
        (
            ("--tool-choice", "doubel"),
            "--tool-choice 'doubel' is not auto, required, none or a tool of 'shop'; "
            "did you mean 'double'?",
        ),
        (("--approve", "prices"), "--approve 'prices' is no tool of 'shop'; did you mean 'price'?"),
        (
            ("--approve", "zzz"),
            "--approve 'zzz' is no tool of 'shop'; the tools are: double, price",
        ),
        (("--toolset", "web"), "--toolset: unknown toolset(s): 'web'; known: none"),
        (
            ("--on-limit", "answer"),
            "argument --on-limit: invalid choice: 'answer' (choose from 'raise', 'final-answer')",
        ),
    ],
)
def test_usage_errors_exit_2_before_the_model_is_asked(
    server: FakeOpenAI, workdir: Path, arguments: tuple[str, ...], message: str
) -> None:
    done = run(server, workdir, "Hi", *arguments)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tooldeck run: error: {message} (see tooldeck run --help)\n"
    assert server.requests == []


def test_no_stream_asks_for_whole_turns(server: FakeOpenAI, workdir: Path) -> None:
    server.reply(Reply(body=completion_body("Hi.")))
    done = run(server, workdir, "Hi", "--no-stream")
    assert done.returncode == 0, done.stderr
    assert "stream" not in server.bodies[0]
    assert "…" not in done.stdout
    assert "answer: Hi." in done.stdout


def test_api_key_env_names_the_variable_that_holds_the_key(
    server: FakeOpenAI, workdir: Path
) -> None:
    answers(server, "Hi.")
    env = {"SHOP_KEY": "sk-from-shop-key"}
    done = run(server, workdir, "Hi", "--api-key-env", "SHOP_KEY", "--no-display", env=env)
    assert done.returncode == 0, done.stderr
    headers = {key.lower(): value for key, value in server.requests[0].headers.items()}
    assert headers["authorization"] == "Bearer sk-from-shop-key"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ("--api-key-env", "UNSET_SHOP_KEY"),
            "--api-key-env UNSET_SHOP_KEY: the environment variable is not set",
        ),
        (
            ("--api-key-env", "sk-proj-abc123"),
            "--api-key-env takes the NAME of an environment variable that holds the key "
            "(e.g. --api-key-env MY_OPENAI_KEY), never the key itself",
        ),
        (
            ("--api-key", "sk-proj-abc123"),
            "a key is never given on the command line (the shell's history and the process "
            "list keep it): put it in an environment variable and name that with "
            "--api-key-env NAME",
        ),
    ],
)
def test_a_key_is_never_an_argument(
    server: FakeOpenAI, workdir: Path, arguments: tuple[str, ...], message: str
) -> None:
    done = run(server, workdir, "Hi", *arguments)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tooldeck run: error: {message} (see tooldeck run --help)\n"
    assert server.requests == []


def test_base_url_is_for_hosted_models(workdir: Path) -> None:
    done = tooldeck("run", "Hi", "--tools", "shop", "--base-url", "http://x/v1", cwd=workdir)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "tooldeck run: error: --base-url is for hosted models (openai, openai-chat, azure, "
        "anthropic, gemini), not 'local' (see tooldeck run --help)\n"
    )


def test_the_openai_base_url_variable_works_too(server: FakeOpenAI, workdir: Path) -> None:
    answers(server, "Hi.")
    done = tooldeck(
        "run", "Hi", "--tools", "shop", *MODEL, "--no-display",
        cwd=workdir, env={"OPENAI_BASE_URL": server.url},
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "Hi.\n")
