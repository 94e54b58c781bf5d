"""``tooldeck run`` where its options meet: a tool choice and a typed answer, the library's
errors worded for the command line, bounds on tokens and time, a run without tools.

The model is the loopback OpenAI-compatible server (tests/_openai_server.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks

TOOLS = textwrap.dedent(
    '''
    import os
    from pathlib import Path

    from pydantic import BaseModel

    from tooldeck import Message, tool
    from tooldeck.sessions import SQLiteSession, StoredRun


    class City(BaseModel):
        name: str


    @tool
    def double(number: int) -> int:
        """Twice the number."""
        return 2 * number


    HELD = []


    @tool
    def lock() -> str:
        """Hold the conversations' database locked until the command ends."""
        import sqlite3

        database = Path(os.environ["TOOLDECK_HOME"]) / "sessions.db"
        held = sqlite3.connect(database, isolation_level=None)
        held.execute("BEGIN EXCLUSIVE")
        HELD.append(held)
        return "locked"


    @tool
    async def meddle() -> str:
        """Write to conversation s1 from elsewhere, while the run runs."""
        session = SQLiteSession(Path(os.environ["TOOLDECK_HOME"]) / "sessions.db", "s1")
        stored = StoredRun("elsewhere", messages=(Message.user("Elsewhere."),))
        await session.append(stored, after=0)
        return "done"
    '''
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


MODEL = ("--model", "openai-chat:gpt-test")


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


@pytest.mark.parametrize("form", ["--no-display", "--json", "--display"])
def test_an_answer_another_run_overtook_is_shown_and_said_not_kept(
    server: FakeOpenAI, workdir: Path, form: str
) -> None:
    call = completion_body(None, [chat_call("call_1", "meddle", "{}")])
    server.reply(Reply(events=completion_chunks(call)))
    server.reply(Reply(events=completion_chunks(completion_body("Done."))))
    shown_form = () if form == "--display" else (form,)
    ran = tooldeck(
        workdir, "run", "Meddle.", "-t", "tools.py", *MODEL, "--base-url", server.url,
        "--session", "s1", *shown_form,
    )  # fmt: skip
    message = (
        "the answer above was not kept in conversation 's1': another run changed the "
        "conversation while this one ran. Run the prompt again (--session s1) to go on from "
        "the conversation as it is now"
    )
    assert ran.returncode == 1
    assert ran.stderr.endswith(f"tooldeck: error: {message}\n")
    assert ".result" not in ran.stderr
    if form == "--json":
        document = json.loads(ran.stdout)
        assert (document["answer"], document["error"]) == ("Done.", message)
    elif form == "--no-display":
        assert ran.stdout == "Done.\n"
    else:
        assert "answer: Done." in ran.stdout


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (Reply(body={"error": {"message": "Automatic streaming tool choice is not supported"}}),
         " (it said: Automatic streaming tool choice is not supported)"),
        (Reply(events=[(None, "[DONE]")]), ""),
    ],
    ids=["error-body", "empty-stream"],
)  # fmt: skip
def test_a_server_that_does_not_stream_is_told_to_run_with_no_stream(
    server: FakeOpenAI, workdir: Path, reply: Reply, said: str
) -> None:
    server.reply(reply)
    ran = tooldeck(
        workdir, "run", "Hi.", "-t", "tools.py", *MODEL, "--base-url", server.url, "--no-display"
    )
    assert ran.returncode == 1
    assert ran.stderr.endswith(
        "tooldeck: error: the run stopped without an answer: openai-chat:gpt-test did not "
        f"stream its answer{said}; the server may not stream this request: run again with "
        "--no-stream\n"
    )
    assert "stream=False" not in ran.stderr


def test_max_tokens_bounds_every_request(server: FakeOpenAI, workdir: Path) -> None:
    call = completion_body(None, [chat_call("call_1", "double", '{"number": 2}')])
    server.reply(Reply(events=completion_chunks(call)))
    server.reply(Reply(events=completion_chunks(completion_body("4."))))
    ran = tooldeck(
        workdir, "run", "Double 2.", "-t", "tools.py", *MODEL, "--base-url", server.url,
        "--no-display", "--max-tokens", "50",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert [body["max_tokens"] for body in server.bodies] == [50, 50]


def test_timeout_stops_a_run_that_takes_too_long(server: FakeOpenAI, workdir: Path) -> None:
    held = completion_chunks(completion_body("A long story."))
    server.reply(Reply(events=held, hold_after=1))
    ran = tooldeck(
        workdir, "run", "Tell me a story.", "-t", "tools.py", *MODEL, "--base-url", server.url,
        "--no-display", "--timeout", "1.5",
    )  # fmt: skip
    assert ran.returncode == 1
    assert ran.stdout == ""
    assert "stop: max_duration_s" in ran.stderr
    assert ran.stderr.endswith(
        "tooldeck: error: the run stopped without an answer: it took longer than --timeout 1.5 s\n"
    )
    assert server.client_left.wait(30)


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--timeout", "0", "must be a number of seconds above 0, got '0'"),
        ("--timeout", "soon", "expected seconds, e.g. 90, got 'soon'"),
        ("--max-tokens", "0", "must be at least 1, got 0"),
    ],
)
def test_bounds_that_are_no_bounds_are_usage_errors(
    workdir: Path, option: str, value: str, said: str
) -> None:
    refused = tooldeck(workdir, "run", "Hi.", "-t", "tools.py", option, value)
    assert refused.returncode == 2
    assert f"argument {option}: {said}" in refused.stderr


def test_a_prompt_runs_without_tools(server: FakeOpenAI, workdir: Path) -> None:
    server.reply(Reply(events=completion_chunks(completion_body("Hello."))))
    ran = tooldeck(workdir, "run", "Hi.", *MODEL, "--base-url", server.url, "--no-display")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "Hello.\n"
    assert "tools" not in server.bodies[0]


def test_a_typed_answer_without_tools(server: FakeOpenAI, workdir: Path) -> None:
    server.reply(Reply(events=completion_chunks(completion_body('{"name": "Oslo"}'))))
    ran = tooldeck(
        workdir, "run", "Capital of Norway?", "--output-schema", "tools.py:City", *MODEL,
        "--base-url", server.url, "--json",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["output"] == {"name": "Oslo"}
    assert server.bodies[0]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--approve", "double"), "--approve 'double': there are no tools without -t/--tools"),
        (("--toolset", "math"), "--toolset picks tools of --tools: give -t/--tools too"),
        (("--tool-choice", "required"), "--tool-choice required needs tools to call"),
        (
            ("--tool-choice", "double"),
            "--tool-choice 'double' is not auto, required, none or a tool (there are none "
            "without -t)",
        ),
    ],
)
def test_options_about_tools_without_tools_are_usage_errors(
    workdir: Path, options: tuple[str, ...], said: str
) -> None:
    refused = tooldeck(workdir, "run", "Hi.", *MODEL, "--base-url", "http://127.0.0.1:9", *options)
    assert refused.returncode == 2
    assert said in refused.stderr


def test_a_run_whose_conversation_cannot_be_written_stops_and_says_why(
    server: FakeOpenAI, workdir: Path
) -> None:
    call = completion_body(None, [chat_call("call_1", "lock", "{}")])
    server.reply(Reply(events=completion_chunks(call)))
    server.reply(Reply(events=completion_chunks(completion_body("Locked."))))
    ran = tooldeck(
        workdir, "run", "Lock.", "-t", "tools.py", *MODEL, "--base-url", server.url,
        "--session", "s1", "--no-display",
    )  # fmt: skip
    # the round's results cannot be journaled (the database is locked): the run stops
    # before its next request, which is never sent
    assert ran.returncode == 1
    assert ran.stdout.strip() == ""
    assert (
        "tooldeck: error: the run stopped: conversation 's1' could not be written: " in ran.stderr
    )
    assert "locked" in ran.stderr.rsplit("tooldeck: error:", 1)[1]
    assert len(server.bodies) == 1


def test_chat_without_tools(server: FakeOpenAI, workdir: Path) -> None:
    server.reply(Reply(events=completion_chunks(completion_body("Hello."))))
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    chatted = subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", "chat", *MODEL, "--base-url", server.url],
        input="Hi.\nexit\n",
        capture_output=True,
        text=True,
        cwd=workdir,
        env={**env, "TOOLDECK_HOME": str(workdir / "home")},
        timeout=120,
        check=False,
    )
    assert chatted.returncode == 0, chatted.stderr
    assert "tooldeck chat on openai-chat:gpt-test with no tools;" in chatted.stdout
    assert "answer: Hello." in chatted.stdout
