"""``tooldeck run`` and ``chat`` at a terminal, as a person uses them: Ctrl-C, a redirected
stdout, the answers to an approval question, what the display says at the end.

The model is the loopback OpenAI-compatible server; each command runs in a pseudo-terminal
(the controlling terminal of the command, so a Ctrl-C typed there interrupts it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _cli_terminal import CANCELLED_BY_CTRL_C, command, environment
from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks, running
from _pty import Terminal

TOOLS = textwrap.dedent(
    '''
    import time
    from pathlib import Path

    from tooldeck import tool


    @tool(requires_approval=True)
    def delete_file(path: str, keep_days: int = 0) -> str:
        """Delete a file."""
        return f"deleted {path}"


    @tool
    def slow_copy(seconds: float, target: str) -> str:
        """Copy slowly."""
        time.sleep(seconds)
        Path(target).write_text("copied")
        return "copied"
    '''
)
QUESTION = (
    'approve delete_file(path="a.txt")? [y]es / [n]o / [a]lways in this run / [s]ession / [e]dit'
)


@pytest.fixture
def model_server() -> Iterator[FakeOpenAI]:
    with running() as server:
        yield server


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


def at_terminal(server: FakeOpenAI, workdir: Path, *argv: str, **options: object) -> Terminal:
    return Terminal(
        list(argv),
        workdir,
        environment(server, workdir),
        controlling=True,
        **options,  # type: ignore[arg-type]
    )


def asks_to_delete(server: FakeOpenAI, arguments: str = '{"path": "a.txt"}') -> None:
    call = chat_call("call_1", "delete_file", arguments)
    server.reply(Reply(events=completion_chunks(completion_body(None, [call]))))


def answers(server: FakeOpenAI, *texts: str) -> None:
    server.reply(*(Reply(events=completion_chunks(completion_body(t))) for t in texts))


def tool_results(body: dict[str, object]) -> list[object]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [m["content"] for m in messages if m["role"] == "tool"]


@pytest.fixture
def one_core() -> Iterator[None]:
    """The test and the commands it starts share one core: the command is paused the moment
    it writes (the test's read wakes up), which is when a Ctrl-C finds a question not yet
    waiting (a race seen 1 time in 3 on a quiet machine pinned to one core)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    yield
    os.sched_setaffinity(0, allowed)


def test_ctrl_c_the_moment_the_question_shows_always_interrupts(
    model_server: FakeOpenAI, workdir: Path, one_core: None
) -> None:
    for attempt in range(20):
        asks_to_delete(model_server)
        terminal = at_terminal(model_server, workdir, *command("run", "Delete a.txt."))
        terminal.expect(QUESTION)
        terminal.send("\x03")
        status, shown = terminal.finish(timeout=30)
        assert status == 130, f"attempt {attempt}: {shown}"
        assert shown.rstrip().endswith("stop: interrupted\ntooldeck: interrupted"), shown


@pytest.mark.parametrize("form", ["--json", "--no-display"])
def test_with_stdout_redirected_the_question_goes_to_the_terminal_not_into_stdout(
    model_server: FakeOpenAI, workdir: Path, form: str
) -> None:
    asks_to_delete(model_server)
    answers(model_server, "Deleted.")
    out = workdir / "out.json"
    with out.open("wb") as stdout:
        terminal = at_terminal(
            model_server, workdir, *command("run", "Delete a.txt.", form), stdout=stdout
        )
        terminal.expect(QUESTION)
        terminal.send("maybe\r")
        terminal.expect("please answer y, n (or n and why), a, s or e (got 'maybe')")
        terminal.send("e\r")
        terminal.expect('current: {"path": "a.txt"}')  # no readline without a terminal stdout
        terminal.expect("arguments (JSON, empty to go back): ")
        terminal.send('{"path": "b.txt"}\r')
        status, shown = terminal.finish()
    assert status == 0, shown
    written = out.read_text(encoding="utf-8")
    if form == "--json":
        assert json.loads(written)["answer"] == "Deleted."
    else:
        assert written == "Deleted.\n"
    assert tool_results(model_server.bodies[1]) == [
        'deleted b.txt\n(run with arguments edited by a person: {"path": "b.txt"})'
    ]


def test_an_edit_that_does_not_fit_the_schema_is_refused_and_asked_again(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    asks_to_delete(model_server)
    answers(model_server, "Deleted.")
    terminal = at_terminal(model_server, workdir, *command("run", "Delete a.txt."))
    terminal.expect(QUESTION)
    terminal.send("e\r")
    terminal.expect('arguments (JSON, empty to go back): {"path": "a.txt"}')
    terminal.send('\x15{"path": "b.txt", "keep_days": "many"}\r')  # Ctrl-U clears the line
    shown = terminal.expect("try again")
    assert "these arguments do not fit delete_file: " in shown
    assert "keep_days" in shown.split("these arguments do not fit")[1]
    terminal.expect(QUESTION, after=shown.index("try again"))
    terminal.send("y\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert tool_results(model_server.bodies[1]) == ["deleted a.txt"]  # nothing edited ran


def test_no_can_say_why_and_the_model_reads_it(model_server: FakeOpenAI, workdir: Path) -> None:
    asks_to_delete(model_server)
    answers(model_server, "Understood.")
    terminal = at_terminal(model_server, workdir, *command("run", "Delete a.txt."))
    terminal.expect(QUESTION)
    terminal.send("n Too risky: archive it instead?\r")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert tool_results(model_server.bodies[1]) == [
        "error[rejected]: the person at the terminal said no: Too risky: archive it instead?"
    ]


def conversation(body: dict[str, object]) -> list[tuple[object, object]]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [(m["role"], m.get("content") or "") for m in messages]


def test_chat_ctrl_c_at_a_question_says_it_comes_back_and_it_does(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    asks_to_delete(model_server)
    answers(model_server, "Deleted a.txt.", "Nothing else.")
    terminal = at_terminal(model_server, workdir, *command("chat"))
    terminal.expect("> ")
    terminal.send("Delete a.txt.\r")
    terminal.expect(QUESTION)
    terminal.send("\x03")
    shown = terminal.expect(
        '(interrupted: delete_file(path="a.txt") still waits for approval; the question '
        "comes back before your next prompt)"
    )
    terminal.expect("> ", after=shown.index("(interrupted"))
    terminal.send("Anything else?\r")
    terminal.expect(QUESTION, after=shown.index("(interrupted"))
    terminal.send("y\r")
    shown = terminal.expect("answer: Nothing else.")
    terminal.expect("> ", after=shown.index("answer: Nothing else."))
    terminal.send("\x04")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert "the conversation is as it was" not in shown
    assert conversation(model_server.bodies[2])[-5:] == [
        ("user", "Delete a.txt."),
        ("assistant", ""),
        ("tool", "deleted a.txt"),
        ("assistant", "Deleted a.txt."),
        ("user", "Anything else?"),
    ]


def test_chat_ctrl_c_during_a_tool_in_a_thread_says_it_may_still_complete(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    target = workdir / "copy.txt"
    arguments = json.dumps({"seconds": 5, "target": str(target)})
    call = chat_call("call_1", "slow_copy", arguments)
    model_server.reply(Reply(events=completion_chunks(completion_body(None, [call]))))
    answers(model_server, "Hello.")
    terminal = at_terminal(model_server, workdir, *command("chat"))
    terminal.expect("> ")
    terminal.send("Copy it.\r")
    terminal.expect("  → slow_copy(")
    terminal.send("\x03")
    shown = terminal.expect("(interrupted: ")
    interrupted = terminal.expect("> ", after=shown.index("(interrupted: "))
    line = interrupted[interrupted.index("(interrupted: ") :].splitlines()[0]
    assert line == (
        "(interrupted: the run was cancelled, and this turn is kept in the conversation, but "
        f'slow_copy(seconds=5, target="{target}") runs in a thread, which cannot be stopped: '
        "it may still finish, and do what it does)"
    )
    assert CANCELLED_BY_CTRL_C in shown
    terminal.send("Hi.\r")
    shown = terminal.expect("answer: Hello.")
    terminal.expect("> ", after=shown.index("answer: Hello."))
    deadline = time.monotonic() + 60
    while not target.exists() and time.monotonic() < deadline:  # the chat goes on meanwhile
        time.sleep(0.1)
    assert target.read_text() == "copied"  # what it does happened after the interrupt
    terminal.send("\x04")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert conversation(model_server.bodies[1]) == [  # the cancelled turn is kept
        ("user", "Copy it."),
        ("assistant", ""),
        ("tool", CANCELLED_BY_CTRL_C),
        ("user", "Hi."),
    ]


def copies(server: FakeOpenAI, seconds: float, target: Path) -> None:
    arguments = json.dumps({"seconds": seconds, "target": str(target)})
    call = chat_call("call_1", "slow_copy", arguments)
    server.reply(Reply(events=completion_chunks(completion_body(None, [call]))))


def without_terminal(
    server: FakeOpenAI, workdir: Path, *argv: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=workdir,
        env=environment(server, workdir),
        timeout=120,
        check=False,
    )


def test_a_resumed_run_that_answers_shows_its_answer_and_totals(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    asks_to_delete(model_server)
    answers(model_server, "Deleted a.txt.", "Nothing else.")
    first = at_terminal(model_server, workdir, *command("run", "Delete a.txt."))
    first.expect(QUESTION)
    first.send("\x03")
    status, shown = first.finish()
    assert status == 130, shown
    assert re.search(r"\[e\]dit (\^C)?\n\d+\.\d\d s total, .*; stop: interrupted\n", shown), shown
    again = at_terminal(model_server, workdir, *command("run", "Anything else?", "-c"))
    again.expect(QUESTION)
    again.send("y\r")
    status, shown = again.finish()
    assert status == 0, shown
    resumed = shown[shown.index("← deleted a.txt") :]
    assert re.search(r"answer: Deleted a\.txt\.\n\d+\.\d\d s total, .*; stop: answer\n", resumed), (
        resumed
    )
    assert "answer: Nothing else." in resumed[resumed.index("stop: answer") :]


def test_an_answer_forced_at_a_limit_says_so(model_server: FakeOpenAI, workdir: Path) -> None:
    copies(model_server, 0, workdir / "copy.txt")
    answers(model_server, "Copied, I think.")
    argv = command("run", "Copy.", "--max-rounds", "1", "--on-limit", "final-answer")
    done = without_terminal(model_server, workdir, *argv, "--no-display")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Copied, I think.\n"
    assert done.stderr.rstrip().endswith(
        "stop: max_rounds (the answer was forced at the limit: asked once more, without tools)"
    ), done.stderr


def test_a_server_that_sends_no_usage_shows_tokens_unknown(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    body = completion_body("Hi.", usage=None)
    model_server.reply(Reply(events=completion_chunks(body)))
    done = without_terminal(model_server, workdir, *command("run", "Hi", "--no-display"))
    assert done.returncode == 0, done.stderr
    assert (
        "1 model turn, 0 tool calls, tokens unknown (the server sent no usage); stop: answer"
        in (done.stderr)
    )
    assert "0 input / 0 output" not in done.stderr


def test_json_says_when_the_answer_was_forced_and_when_usage_is_unknown(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    copies(model_server, 0, workdir / "copy.txt")
    model_server.reply(Reply(events=completion_chunks(completion_body("Copied.", usage=None))))
    argv = command("run", "Copy.", "--max-rounds", "1", "--on-limit", "final-answer", "--json")
    done = without_terminal(model_server, workdir, *argv)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["answer"], document["stop_reason"]) == ("Copied.", "max_rounds")
    assert (document["answer_forced"], document["turns_without_usage"]) == (True, 1)
    answers(model_server, "Hello.")
    plain = without_terminal(model_server, workdir, *command("run", "Hi", "--json"))
    assert plain.returncode == 0, plain.stderr
    assert not {"answer_forced", "turns_without_usage"} & json.loads(plain.stdout).keys()


def test_a_call_over_a_second_reads_in_seconds_and_totals_after_ctrl_c_start_a_line(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    copies(model_server, 1.5, workdir / "first.txt")
    copies(model_server, 60, workdir / "second.txt")
    terminal = at_terminal(model_server, workdir, *command("run", "Copy twice."))
    shown = terminal.expect("← copied  (")
    terminal.expect("→ slow_copy(seconds=60", after=shown.index("← copied"))
    terminal.send("\x03")
    status, shown = terminal.finish()
    assert status == 130, shown
    assert re.search(r"← copied  \(1\.\d s\)\n", shown), shown
    assert re.search(
        rf"\^C\n  ✗ {re.escape(CANCELLED_BY_CTRL_C)}  \(.*\)\n\d+\.\d\d s total, .*, 2 tool "
        r"calls, .*; stop: cancelled \(interrupted by Ctrl-C\)\n",
        shown,
    ), shown


def test_ctrl_d_at_the_question_leaves_it_unanswered_as_ctrl_c_does(
    model_server: FakeOpenAI, workdir: Path
) -> None:
    asks_to_delete(model_server)
    terminal = at_terminal(model_server, workdir, *command("run", "Delete a.txt."))
    terminal.expect(QUESTION)
    terminal.send("\x04")
    status, shown = terminal.finish()
    assert status == 130, shown
    assert "Traceback" not in shown
    assert shown.rstrip().endswith("stop: interrupted\ntooldeck: interrupted"), shown
