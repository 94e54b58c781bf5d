"""A command driven through a pseudo-terminal, as a person at a terminal would drive it.

``Terminal(argv)`` starts the command with a pty as its stdin, stdout and stderr;
``expect(text)`` waits until the screen shows ``text`` (ANSI codes removed); ``send(keys)``
types; ``finish()`` waits for the exit status and returns everything shown.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]|\r")


def plain(text: str) -> str:
    """The text without terminal control sequences and carriage returns."""
    return _ANSI.sub("", text)


class Terminal:
    def __init__(
        self, argv: list[str], cwd: Path, env: Mapping[str, str], columns: int = 200
    ) -> None:
        master, slave = pty.openpty()
        self._master = master
        env = {**env, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm"}
        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True
        )
        os.close(slave)
        self._raw = b""

    @property
    def shown(self) -> str:
        return plain(self._raw.decode("utf-8", "replace"))

    def expect(self, text: str, timeout: float = 120, after: int = 0) -> str:
        """Wait until ``text`` is on the screen (past the first ``after`` characters of
        what it shows); everything shown so far."""
        deadline = time.monotonic() + timeout
        while text not in self.shown[after:]:
            if not self._read(deadline - time.monotonic()):
                self.process.kill()  # the test fails here: leave no process behind it
                self.process.wait()
                raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.shown}")
        return self.shown

    def send(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        """The exit status and everything shown."""
        deadline = time.monotonic() + timeout
        while self._read(deadline - time.monotonic()):
            pass
        status = self.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        os.close(self._master)
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
