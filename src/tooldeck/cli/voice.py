"""What a command says besides a run's events (``Voice``), and what its run produced
(``Driven``): the prompt's result, and the paused run its conversation held, answered first.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from tooldeck.cli.display import Console
from tooldeck.results import RunResult


@dataclass(frozen=True)
class Voice:
    """Where the command says what it does besides the run's events: the display's console,
    else stderr (stdout holds only the answer or the JSON document)."""

    console: Console | None
    echo: bool = True
    """Show the prompt as the user line before its run."""

    def note(self, text: str) -> None:
        """Say ``text`` beside the run: a yellow line of the display, else a line on stderr."""
        if self.console is not None:
            self.console.line(text, "yellow")
        else:
            print(f"tooldeck: {text}", file=sys.stderr, flush=True)

    def end_line(self) -> None:
        """End the line a Ctrl-C left the cursor on (after ``^C``, or after a question)."""
        if self.console is not None:
            if self.console.terminal:
                self.console.write("\n")
        elif sys.stderr.isatty():
            print(file=sys.stderr, flush=True)

    def prompt(self, text: str, *, after_other_run: bool = False) -> None:
        """Show the prompt as the user line (in a chat, only after another run was shown)."""
        if self.console is not None and (self.echo or after_other_run):
            self.console.line("")
            self.console.line(f"user: {text}", "bold")


@dataclass(frozen=True)
class Driven:
    """What a command's run produced: the prompt's result, and the result of the paused run
    its conversation held, answered first (None when it held none)."""

    result: RunResult[Any]
    resumed: RunResult[Any] | None = None
