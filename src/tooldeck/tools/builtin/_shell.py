"""A shell tool rooted in one directory; every call waits for a person's approval by default.

The command runs without a shell (``shlex.split``) unless ``shell=True``, in a working
directory resolved inside the root, with stdin closed, in a new process group. When the
command ends, or at the timeout, the whole group is killed (SIGKILL: a process that ignores
SIGTERM or forked into the background goes too). The output (stdout and stderr together)
is capped: the head and the tail are kept and the cut is said; invalid UTF-8 is replaced.
Its environment is an allow-list's, never this process's whole one; with
``sandbox="bubblewrap"`` it runs in a bubblewrap sandbox (``_sandbox``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

from tooldeck.tools.builtin._files import explain
from tooldeck.tools.builtin._rooted import Refused, Root, open_directory
from tooldeck.tools.builtin._sandbox import Confinement, Sandbox, confinement
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import FunctionTool, tool
from tooldeck.tools.options import RequiresApproval

_DRAIN_S = 5.0
"""How long to wait for the output pipe after the process group was killed."""

_DESCRIPTION = (
    "Run a command in a working directory under the project root and return its exit code "
    "and output (stdout and stderr together, cut in the middle when long)."
)
_NO_SHELL = (
    " The command runs without a shell: no pipes, redirections, globs or variables; quote "
    "arguments with spaces."
)


def shell_tool(
    root: str | os.PathLike[str],
    *,
    allow: Iterable[str] | None = None,
    timeout: float = 30,
    max_output: int = 20_000,
    shell: bool = False,
    requires_approval: RequiresApproval = True,
    env: Mapping[str, str] | None = None,
    pass_env: Iterable[str] = (),
    sandbox: Sandbox = "none",
) -> FunctionTool[..., Any]:
    """A tool ``shell(command: str, cwd: str = ".")`` that runs commands under ``root``.

    Args:
        root: The directory the working directory must be in.
        allow: Program names the command may start with (``["ls", "git"]``); any other is
            refused before anything runs (and without asking for approval). None: any.
        timeout: Seconds before the command and every process it started are killed.
        max_output: Bytes of output kept (half from the start, half from the end).
        shell: Run the command with ``/bin/sh -c`` (pipes, redirections). An ``allow`` list
            cannot be enforced through a shell, so the two are refused together.
        requires_approval: True (the default): each call waits for a person's decision;
            False to opt out; or a predicate ``(ctx, arguments) -> bool``.
        env: Variables to set in the command's environment, on top of the minimal one:
            ``PATH``, ``LANG``, ``LC_*``, ``TERM``, ``TZ``, ``USER``, ``LOGNAME`` copied from
            this process, and ``HOME`` set to the root. Nothing else of this process's
            environment (its API keys) reaches a command.
        pass_env: More names of this process's variables to copy (``pass_env=os.environ``
            copies them all).
        sandbox: ``"none"`` (the default): the command can reach whatever this process's
            user can, files outside the root and the network included; only its working
            directory and environment are confined. ``"bubblewrap"``: it runs in a
            bubblewrap sandbox (Debian's ``bubblewrap``): the system read-only, the root
            writable, no other file, no network; ValueError here if bwrap is missing or
            cannot start. ``"auto"``: bubblewrap where it works, else none.

    Examples:
        >>> import tempfile
        >>> from tooldeck.tools.builtin import shell_tool
        >>> shell_tool(tempfile.gettempdir(), allow=["ls"]).name
        'shell'
    """
    rooted = Root(root)
    confined = confinement(rooted.path, sandbox, env, pass_env)
    allowed = frozenset(allow) if allow is not None else None
    if shell and allowed is not None:
        raise ValueError(
            "shell_tool(shell=True) cannot enforce an allow list (a shell runs whatever the "
            "command line says); drop allow= or shell=True"
        )
    if timeout <= 0 or max_output < 2:
        raise ValueError(f"timeout and max_output must be positive, got {timeout}, {max_output}")

    def program(command: str) -> list[str]:
        return _argv(command, shell, allowed)

    def needs_approval(ctx: RunContext[Any], arguments: dict[str, Any]) -> bool | Awaitable[bool]:
        try:
            program(str(arguments["command"]))
        except Refused:  # refused before anything runs: nothing to approve
            return False
        if isinstance(requires_approval, bool):
            return requires_approval
        return requires_approval(ctx, arguments)

    approval: RequiresApproval = needs_approval if requires_approval is not False else False

    @tool(
        name="shell",
        description=_DESCRIPTION + ("" if shell else _NO_SHELL) + confined.description(),
        on_error=explain,
        requires_approval=approval,
        side_effects=True,
    )
    async def run_command(command: str, cwd: str = ".") -> str:
        """Run a command.

        Args:
            command: The command line, e.g. "ls -la src".
            cwd: The working directory, relative to the root.
        """
        argv = program(command)
        with rooted.locate(cwd) as located:
            directory = open_directory(located)
        try:
            return await _run(argv, directory, timeout, max_output, confined)
        finally:
            os.close(directory)

    return run_command


def _argv(command: str, shell: bool, allowed: frozenset[str] | None) -> list[str]:
    """The program and its arguments, or why the command is refused."""
    if shell:
        return ["/bin/sh", "-c", command]
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise Refused(
            f"the command cannot be split into arguments ({error}); fix its quotes"
        ) from None
    if not argv:
        raise Refused("the command is empty")
    if allowed is not None and argv[0] not in allowed:
        raise Refused(
            f"the program {argv[0]!r} is not allowed; allowed: {', '.join(sorted(allowed))}"
        )
    return argv


async def _run(
    argv: list[str], directory: int, timeout: float, max_output: int, confined: Confinement
) -> str:
    process = await _start(argv, directory, confined)
    capture = _Capture(max_output)
    assert process.stdout is not None
    reader = asyncio.ensure_future(capture.read(process.stdout))
    try:
        code = await _wait(process, timeout)
    except BaseException:  # cancelled (the run's time is up): nothing may outlive the call
        _kill_group(process.pid)
        reader.cancel()
        raise
    _kill_group(process.pid)  # what the command left running in the background goes too
    await _drain(reader, capture)
    if code is None:
        raise Refused(
            f"the command did not finish within {timeout:g} s: it was killed, with every "
            f"process it started. Output so far:\n{capture.text()}"
        )
    return f"{_exit_text(code)}\n{capture.text() or '(no output)'}"


async def _start(
    argv: list[str], directory: int, confined: Confinement
) -> asyncio.subprocess.Process:
    cwd = f"/proc/self/fd/{directory}"  # the resolved directory itself, not a path again
    if confined.bwrap is not None:
        cwd = os.readlink(cwd)  # where the sandbox starts the command (the root is bound there)
    try:
        return await asyncio.create_subprocess_exec(
            *confined.argv(argv, cwd),
            cwd=f"/proc/self/fd/{directory}",
            pass_fds=(directory,),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as a whole
            env=confined.env,
        )
    except FileNotFoundError:
        raise Refused(f"the program {argv[0]!r} was not found") from None
    except PermissionError:
        raise Refused(f"the program {argv[0]!r} cannot be run (permission denied)") from None


async def _wait(process: asyncio.subprocess.Process, timeout: float) -> int | None:
    """The exit code, or None at the timeout."""
    try:
        async with asyncio.timeout(timeout):
            return await _exited(process)
    except TimeoutError:
        return None


async def _exited(process: asyncio.subprocess.Process) -> int:
    """The exit code once the process ended. (``Process.wait()`` also waits for the pipes to
    close, which a process left running in the background keeps open.)"""
    delay = 0.002
    while process.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return process.returncode


async def _drain(reader: asyncio.Future[None], capture: _Capture) -> None:
    try:
        async with asyncio.timeout(_DRAIN_S):
            await reader
    except TimeoutError:  # a process that left the group still holds the pipe
        capture.note = "[the output may be incomplete: a process that left the group kept it open]"


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"exit code: {code} (killed by {name})"
    return f"exit code: {code}"


class _Capture:
    """The head and tail of a stream, and how many bytes went by."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.note = ""

    async def read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(1 << 16):
            self.total += len(chunk)
            room = self.half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        if not cut:
            text = bytes(self.head + self.tail).decode("utf-8", "replace")
        else:
            text = (
                self.head.decode("utf-8", "replace")
                + f"\n[... {cut:,} bytes cut from the middle of {self.total:,} bytes of output; "
                "narrow the command to see them ...]\n" + self.tail.decode("utf-8", "replace")
            )
        return f"{text}\n{self.note}" if self.note else text
