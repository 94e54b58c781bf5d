"""The built-in shell tool: approval by default, allow lists, process groups, capped output."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import answer, call, calls
from tooldeck import Agent, Approve, Limits, ScriptedModel, StopReason
from tooldeck.tools.builtin import shell_tool

PYTHON = shlex.quote(sys.executable)


def python(code: str) -> str:
    """A command line running ``code`` with this Python."""
    return f"{PYTHON} -c {shlex.quote(code)}"


def observe(shell: Any, command: str, cwd: str = ".") -> str:
    """What the model reads for one shell call (approval opted out by the caller)."""
    model = ScriptedModel([calls(call("shell", command=command, cwd=cwd)), answer("ok")])
    result = Agent(model, [shell], limits=Limits(max_duration_s=60)).run_sync("go")
    return result.tool_trace[0].result.output


def gone(pid: int, within_s: float = 10.0) -> bool:
    """True once ``pid`` no longer runs (absent, or a zombie nobody reaped yet)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_every_call_waits_for_approval_by_default(tmp_path: Path) -> None:
    shell = shell_tool(tmp_path)
    command = python("open('made.txt', 'w').write('x')")
    model = ScriptedModel([calls(call("shell", "c1", command=command)), answer("made it")])
    agent = Agent(model, [shell])

    paused = agent.run_sync("make a file")
    assert paused.stop_reason is StopReason.PAUSED
    assert [(p.call.name, p.kind) for p in paused.pending] == [("shell", "approval")]
    assert not (tmp_path / "made.txt").exists()  # nothing ran before the decision

    assert paused.checkpoint is not None
    done = agent.resume_sync(paused.checkpoint.to_json(), {"c1": Approve()})
    assert done.answer == "made it"
    assert done.tool_trace[0].result.output == "exit code: 0\n(no output)"
    assert (tmp_path / "made.txt").read_text() == "x"


def test_the_exit_code_and_the_output_are_the_observation(tmp_path: Path) -> None:
    shell = shell_tool(tmp_path, requires_approval=False)
    code = "import sys; print('out', flush=True); print('err', file=sys.stderr); sys.exit(3)"
    assert observe(shell, python(code)) == "exit code: 3\nout\nerr\n"
    killed = python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert observe(shell, killed) == "exit code: -15 (killed by SIGTERM)\n(no output)"


def test_an_allow_list_refuses_other_programs_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("precious")
    shell = shell_tool(tmp_path, allow=["ls", "cat"])  # approval stays on
    model = ScriptedModel(
        [
            calls(
                call("shell", "c1", command="rm keep.txt"),
                call("shell", "c2", command="/bin/ls"),
                call("shell", "c3", command="cat 'unclosed"),
            ),
            answer("refused"),
        ]
    )
    result = Agent(model, [shell], limits=Limits(tool_retries=3)).run_sync("delete it")

    assert result.stop_reason is StopReason.ANSWER  # nothing to approve: all refused
    assert [t.result.output for t in result.tool_trace] == [
        "error[tool_error]: the program 'rm' is not allowed; allowed: cat, ls",
        "error[tool_error]: the program '/bin/ls' is not allowed; allowed: cat, ls",
        "error[tool_error]: the command cannot be split into arguments (No closing quotation); "
        "fix its quotes",
    ]
    assert (tmp_path / "keep.txt").read_text() == "precious"


def test_an_allowed_program_still_waits_for_approval(tmp_path: Path) -> None:
    shell = shell_tool(tmp_path, allow=["ls"])
    model = ScriptedModel([calls(call("shell", "c1", command="ls"))])
    assert Agent(model, [shell]).run_sync("list").stop_reason is StopReason.PAUSED


def test_no_shell_runs_the_command_unless_asked(tmp_path: Path) -> None:
    literal = shell_tool(tmp_path, requires_approval=False)
    assert observe(literal, "echo $HOME > out.txt") == "exit code: 0\n$HOME > out.txt\n"
    assert not (tmp_path / "out.txt").exists()

    with_shell = shell_tool(tmp_path, requires_approval=False, shell=True)
    assert observe(with_shell, "echo hi > out.txt && cat out.txt") == "exit code: 0\nhi\n"
    with pytest.raises(ValueError, match="cannot enforce an allow list"):
        shell_tool(tmp_path, allow=["ls"], shell=True)


def test_the_working_directory_stays_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    shell = shell_tool(root, requires_approval=False)
    where = python("import os; print(os.getcwd())")

    assert observe(shell, where, cwd="sub") == f"exit code: 0\n{root / 'sub'}\n"
    assert observe(shell, where, cwd="..") == (
        "error[tool_error]: '..' uses '..'; give a path inside the root without '..'"
    )
    assert observe(shell, where, cwd="out") == (
        f"error[tool_error]: 'out' leads outside the root: the symlink 'out' points to "
        f"{str(tmp_path)!r}"
    )
    assert observe(shell, "true", cwd="nowhere") == "error[tool_error]: 'nowhere' does not exist"


def test_a_timeout_kills_the_whole_process_group_even_what_ignores_sigterm(tmp_path: Path) -> None:
    code = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    open('child.pid', 'w').write(str(os.getpid()))\n"
        "    time.sleep(600)\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    shell = shell_tool(tmp_path, timeout=1, requires_approval=False)
    started = time.monotonic()
    text = observe(shell, python(code))

    assert text == (
        "error[tool_error]: the command did not finish within 1 s: it was killed, with every "
        "process it started. Output so far:\nstarted\n"
    )
    assert time.monotonic() - started < 30
    assert gone(int((tmp_path / "child.pid").read_text()))


def test_what_the_command_leaves_running_is_killed_when_it_ends(tmp_path: Path) -> None:
    shell = shell_tool(tmp_path, shell=True, requires_approval=False)
    started = time.monotonic()
    text = observe(shell, "sleep 600 & echo $!")
    pid = int(text.splitlines()[1])
    assert text.startswith("exit code: 0\n")
    assert time.monotonic() - started < 30  # did not wait for the background sleep
    assert gone(pid)


def test_huge_output_keeps_the_head_and_the_tail_and_says_what_was_cut(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('HEAD' + 'x' * 10_000_000 + 'TAIL')"
    shell = shell_tool(tmp_path, max_output=1000, requires_approval=False)
    text = observe(shell, python(code))

    head, cut, tail = text.split("\n", 1)[1].split("\n")
    assert head == "HEAD" + "x" * 496
    assert cut == (
        "[... 9,999,008 bytes cut from the middle of 10,000,008 bytes of output; narrow the "
        "command to see them ...]"
    )
    assert tail == "x" * 496 + "TAIL"


def test_invalid_utf8_output_is_replaced_not_fatal(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end')"
    shell = shell_tool(tmp_path, requires_approval=False)
    assert observe(shell, python(code)) == "exit code: 0\nok \ufffd\ufffd end"


def test_a_missing_program_and_an_empty_command_are_clear(tmp_path: Path) -> None:
    shell = shell_tool(tmp_path, requires_approval=False)
    assert observe(shell, "no-such-program-xyz --help") == (
        "error[tool_error]: the program 'no-such-program-xyz' was not found"
    )
    assert observe(shell, "   ") == "error[tool_error]: the command is empty"


def test_variables_can_be_set_and_home_is_the_root(tmp_path: Path) -> None:
    shell = shell_tool(tmp_path, requires_approval=False, env={"GREETING": "hej"})
    code = "import os; print(os.environ.get('GREETING'), os.environ.get('HOME'))"
    assert observe(shell, python(code)) == f"exit code: 0\nhej {tmp_path.resolve()}\n"


def test_a_predicate_decides_approval_for_allowed_commands(tmp_path: Path) -> None:
    def only_writes(ctx: Any, arguments: dict[str, Any]) -> bool:
        return not str(arguments["command"]).startswith("ls")

    shell = shell_tool(tmp_path, allow=["ls", "touch"], requires_approval=only_writes)
    listing = ScriptedModel([calls(call("shell", command="ls")), answer("listed")])
    assert Agent(listing, [shell]).run_sync("list").answer == "listed"
    touching = ScriptedModel([calls(call("shell", command="touch a"))])
    assert Agent(touching, [shell]).run_sync("touch").stop_reason is StopReason.PAUSED
    assert not (tmp_path / "a").exists()
    assert os.listdir(tmp_path) == []
