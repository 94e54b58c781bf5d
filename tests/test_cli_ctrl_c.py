"""Ctrl-C during a run of ``tooldeck run`` and ``chat`` cancels the run through its handle:
the run ends with stop reason ``cancelled``, each unfinished call answered as cancelled,
its conversation keeps it, and the command says so (status 130). A second Ctrl-C stops at
once. (Ctrl-C at an approval question is tested in test_cli_terminal.py.)

The model is the loopback OpenAI-compatible server; each command runs in a pseudo-terminal
that is its controlling terminal, so the Ctrl-C typed there interrupts it.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from _cli_terminal import CANCELLED_BY_CTRL_C, command, environment
from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from _pty import Terminal

TOOLS = textwrap.dedent(
    '''
    import asyncio
    from pathlib import Path

    from tooldeck import tool


    @tool
    async def crawl(site: str) -> str:
        """Crawl a whole site."""
        Path("crawling").touch()
        await asyncio.sleep(600)
        return "crawled"


    @tool(requires_approval=True)
    async def purge(path: str) -> str:
        """Purge a folder, slowly."""
        Path("purging").touch()
        await asyncio.sleep(600)
        return f"purged {path}"


    @tool
    async def stubborn(seconds: float) -> str:
        """Wait, and go on waiting when cancelled once."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            await asyncio.sleep(seconds)
            raise
        return "done"
    '''
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    return tmp_path


def at_terminal(server: FakeOpenAI, workdir: Path, argv: list[str], **options: object) -> Terminal:
    env = environment(server, workdir)
    return Terminal(argv, workdir, env, controlling=True, **options)  # type: ignore[arg-type]


def asks(server: FakeOpenAI, name: str, arguments: dict[str, object]) -> None:
    call = chat_call("call_1", name, json.dumps(arguments))
    server.reply(Reply(events=completion_chunks(completion_body(None, [call]))))


def answers(server: FakeOpenAI, *texts: str) -> None:
    server.reply(*(Reply(events=completion_chunks(completion_body(t))) for t in texts))


def conversation(body: dict[str, object]) -> list[tuple[object, object]]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [(m["role"], m.get("content") or "") for m in messages if m["role"] != "system"]


def going_on(server: FakeOpenAI, workdir: Path) -> list[tuple[object, object]]:
    """Run a next prompt in the latest conversation; what the model was sent."""
    answers(server, "Going on.")
    done = subprocess.run(
        command("run", "Go on.", "-c", "--no-display"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=workdir,
        env=environment(server, workdir),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return conversation(server.bodies[-1])


def started(marker: Path) -> None:
    """Wait until the tool that writes ``marker`` runs."""
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert time.monotonic() < deadline, f"{marker.name} never appeared"
        time.sleep(0.05)


def test_ctrl_c_cancels_the_run_and_the_conversation_keeps_it(
    server: FakeOpenAI, workdir: Path
) -> None:
    asks(server, "crawl", {"site": "example.org"})
    terminal = at_terminal(server, workdir, command("run", "Crawl example.org."))
    terminal.expect('→ crawl(site="example.org")')
    terminal.send("\x03")
    status, shown = terminal.finish()

    assert status == 130, shown
    assert re.search(
        rf"\^C\n  ✗ {re.escape(CANCELLED_BY_CTRL_C)}  \(.*\)\n\d+\.\d\d s total, .*; "
        r"stop: cancelled \(interrupted by Ctrl-C\)\n"
        r"tooldeck: interrupted: the run was cancelled; conversation '\w+' keeps what it "
        r"did \(crawl answered as cancelled\)\n$",
        shown,
    ), shown
    assert going_on(server, workdir) == [
        ("user", "Crawl example.org."),
        ("assistant", ""),
        ("tool", CANCELLED_BY_CTRL_C),
        ("user", "Go on."),
    ]


def test_ctrl_c_with_json_prints_the_cancelled_runs_document(
    server: FakeOpenAI, workdir: Path
) -> None:
    asks(server, "crawl", {"site": "example.org"})
    out = workdir / "out.json"
    with out.open("wb") as stdout:
        argv = command("run", "Crawl example.org.", "--json")
        terminal = at_terminal(server, workdir, argv, stdout=stdout)
        started(workdir / "crawling")
        terminal.send("\x03")
        status, shown = terminal.finish()

    assert status == 130, shown
    document = json.loads(out.read_text(encoding="utf-8"))
    assert (document["stop_reason"], document["error"]) == ("cancelled", "interrupted by Ctrl-C")
    assert [(c["name"], c["error_code"], c["output"]) for c in document["calls"]] == [
        ("crawl", "cancelled", CANCELLED_BY_CTRL_C)
    ]
    assert "tooldeck: interrupted: the run was cancelled" in shown


def test_ctrl_c_after_an_approval_cancels_the_resumed_run_and_keeps_it(
    server: FakeOpenAI, workdir: Path
) -> None:
    asks(server, "purge", {"path": "cache"})
    terminal = at_terminal(server, workdir, command("run", "Purge the cache."))
    terminal.expect('approve purge(path="cache")?')
    terminal.send("y\r")
    started(workdir / "purging")
    terminal.send("\x03")
    status, shown = terminal.finish()

    assert status == 130, shown
    assert "stop: cancelled (interrupted by Ctrl-C)" in shown
    assert going_on(server, workdir) == [
        ("user", "Purge the cache."),
        ("assistant", ""),
        ("tool", CANCELLED_BY_CTRL_C),
        ("user", "Go on."),
    ]


def test_chat_ctrl_c_cancels_the_turn_keeps_it_and_goes_on(
    server: FakeOpenAI, workdir: Path
) -> None:
    asks(server, "crawl", {"site": "example.org"})
    answers(server, "Crawl cancelled, noted.")
    terminal = at_terminal(server, workdir, command("chat"))
    terminal.expect("> ")
    terminal.send("Crawl example.org.\r")
    terminal.expect('→ crawl(site="example.org")')
    terminal.send("\x03")
    shown = terminal.expect("(interrupted: the run was cancelled, and this turn is kept in the")
    terminal.expect("> ", after=shown.index("(interrupted: "))
    terminal.send("What happened?\r")
    shown = terminal.expect("answer: Crawl cancelled, noted.")
    terminal.expect("> ", after=shown.index("answer: Crawl cancelled, noted."))
    terminal.send("\x04")
    status, shown = terminal.finish()

    assert status == 0, shown
    assert conversation(server.bodies[1]) == [
        ("user", "Crawl example.org."),
        ("assistant", ""),
        ("tool", CANCELLED_BY_CTRL_C),
        ("user", "What happened?"),
    ]


def test_a_second_ctrl_c_stops_at_once(server: FakeOpenAI, workdir: Path) -> None:
    asks(server, "stubborn", {"seconds": 600})
    terminal = at_terminal(server, workdir, command("run", "Wait."))
    terminal.expect("→ stubborn(seconds=600)")
    terminal.send("\x03")
    terminal.expect("^C\n")  # the cancelled run winds down: its tool does not let go
    terminal.send("\x03")
    status, shown = terminal.finish(timeout=60)

    assert status == 130, shown
    assert re.search(
        r"\d+\.\d\d s total, .*; stop: interrupted\ntooldeck: interrupted\n$", shown
    ), shown
