"""A command driven through a pseudo-terminal, as a person at a terminal would drive it.

``Terminal(argv)`` starts the command with a pty as its stdin, stdout and stderr (stdout
may go elsewhere, as when a person redirects it); ``expect(text)`` waits until the screen
shows ``text`` (ANSI codes removed); ``send(keys)`` types; ``finish()`` waits for the exit
status and returns everything shown. With ``controlling=True`` the pty is the command's
controlling terminal, so Ctrl-C typed there (``send("\x03")``) interrupts it as it would a
person's command.

A command that does not end in time is killed (``expect`` and ``finish`` fail then), and
``kill_leftovers()`` (called after every test, see conftest.py) kills the ones a failing test
left running: no test leaves a process behind.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import termios
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]|\r")


def plain(text: str) -> str:
    """The text without terminal control sequences and carriage returns."""
    return _ANSI.sub("", text)


_RUNNING: list[Terminal] = []
"""Terminals whose command may still run (``kill_leftovers`` ends them)."""


def kill_leftovers() -> list[str]:
    """Kill the commands of terminals a test left running; their command lines."""
    killed = []
    while _RUNNING:
        terminal = _RUNNING.pop()
        if terminal.process.poll() is None:
            killed.append(str(terminal.process.args))
        terminal.kill()
    return killed


class Terminal:
    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        env: Mapping[str, str],
        columns: int = 200,
        *,
        stdout: IO[bytes] | None = None,
        controlling: bool = False,
    ) -> None:
        master, slave = pty.openpty()
        self._master = master
        env = {**env, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm"}
        self.process = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave if stdout is None else stdout,
            stderr=slave,
            cwd=cwd,
            env=env,
            close_fds=True,
            start_new_session=controlling,
            preexec_fn=_take_terminal if controlling else None,
        )
        os.close(slave)
        self._raw = b""
        self._closed = False
        _RUNNING.append(self)

    def kill(self) -> None:
        """End the command (if it still runs) and close the terminal."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if not self._closed:
            os.close(self._master)
            self._closed = True

    @property
    def shown(self) -> str:
        return plain(self._raw.decode("utf-8", "replace"))

    def expect(self, text: str, timeout: float = 120, after: int = 0) -> str:
        """Wait until ``text`` is on the screen (past the first ``after`` characters of
        what it shows); everything shown so far."""
        deadline = time.monotonic() + timeout
        while text not in self.shown[after:]:
            if not self._read(deadline - time.monotonic()):
                self.kill()  # the test fails here: leave no process behind it
                raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.shown}")
        return self.shown

    def send(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        """The exit status and everything shown."""
        deadline = time.monotonic() + timeout
        while self._read(deadline - time.monotonic()):
            pass
        try:
            status = self.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()  # the test fails here: leave no process behind it
            raise AssertionError(
                f"the command did not end within {timeout} s (killed); the screen shows:\n"
                f"{self.shown}"
            ) from None
        self.kill()  # it ended: this closes the terminal
        return status, self.shown

    def _read(self, timeout: float) -> bool:
        """Read what is there (up to ``timeout`` s); False at the end of output or time."""
        if timeout <= 0:
            return False
        ready, _, _ = select.select([self._master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self._master, 65536)
        except OSError:  # EIO: the command exited and closed the terminal
            return False
        self._raw += chunk
        return bool(chunk)


def _take_terminal() -> None:
    """In the child, before the command: make its stdin (the pty) its controlling terminal."""
    import fcntl

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
