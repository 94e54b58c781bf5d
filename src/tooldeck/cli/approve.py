"""How ``tooldeck run`` decides on calls that wait for a person: ask at the terminal, or not.

    approve delete_file(path="a.txt")? [y]es / [n]o / [a]lways this tool / [e]dit

``--approve TOOL`` approves a tool's calls without asking, ``--yes`` every call. With no
terminal on stdin nothing waits: an uncovered call is rejected and stderr says so.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from tooldeck.cli.display import call_text
from tooldeck.results import Approve, Decision, PendingCall, Reject

_CHOICES = "[y]es / [n]o / [a]lways this tool / [e]dit"
_NO_TERMINAL = "nobody was at the terminal to approve this call"


class Approver:
    """Decisions for pending approval calls, from the options and the person at the terminal."""

    def __init__(
        self,
        approve: Iterable[str] = (),
        approve_all: bool = False,
        interactive: bool | None = None,
        read: Callable[[str], str] = input,
        errors: TextIO | None = None,
    ) -> None:
        self.always = set(approve)
        """Tools whose calls are approved without asking."""
        self.approve_all = approve_all
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self._read = read
        self._errors = errors or sys.stderr

    def decide(self, pending: Sequence[PendingCall]) -> dict[str, Decision]:
        """One decision per approval call (external calls cannot be run from the CLI)."""
        decisions: dict[str, Decision] = {}
        for waiting in pending:
            if waiting.kind == "approval":
                decisions[waiting.id] = self._decide_one(waiting)  # unique in nested runs too
        return decisions

    def _decide_one(self, waiting: PendingCall) -> Decision:
        call = waiting.call
        # a call that waits because of untrusted content is asked about each time
        if self.approve_all or (call.name in self.always and not waiting.reason):
            return Approve(by="cli")
        why = f" ({waiting.reason})" if waiting.reason else ""
        if not self.interactive:
            hint = "--yes" if waiting.reason else f"--approve {call.name} or --yes"
            print(
                f"tooldeck: rejected {call_text(call)}: it needs approval{why} and stdin is not "
                f"a terminal (use {hint})",
                file=self._errors,
                flush=True,
            )
            return Reject(message=_NO_TERMINAL, by="cli")
        if waiting.reason:
            print(f"tooldeck: ⚠ {waiting.reason}", file=self._errors, flush=True)
        return self._ask(waiting)

    def _ask(self, waiting: PendingCall) -> Decision:
        call = waiting.call
        inside = f"{' > '.join(waiting.path)}: " if waiting.path else ""  # a call in an agent tool
        while True:
            question = f"approve {inside}{call_text(call)}? {_CHOICES} "
            answer = self._read(question).strip().lower()
            if answer in ("y", "yes"):
                return Approve(by="cli")
            if answer in ("n", "no"):
                return Reject(message="the person at the terminal said no", by="cli")
            if answer in ("a", "always"):
                self.always.add(call.name)
                return Approve(by="cli")
            if answer in ("e", "edit"):
                edited = self._edit(call.arguments_json)
                if edited is not None:
                    return Approve(arguments=edited, by="cli")
                continue
            print(f"please answer y, n, a or e (got {answer!r})", file=self._errors, flush=True)

    def _edit(self, current: str) -> dict[str, object] | None:
        """The arguments as one line of JSON, prefilled; None to go back to the question."""
        text = _read_prefilled(self._read, "arguments (JSON, empty to go back): ", current)
        if not text.strip():
            return None
        try:
            value = json.loads(text)
        except ValueError as error:
            print(f"not valid JSON ({error}); try again", file=self._errors, flush=True)
            return None
        if not isinstance(value, dict):
            print("the arguments must be a JSON object; try again", file=self._errors, flush=True)
            return None
        return value


def _read_prefilled(read: Callable[[str], str], prompt: str, text: str) -> str:
    """Read a line with ``text`` already typed in (GNU readline), or shown above it."""
    try:
        import readline
    except ImportError:  # no readline on this platform: show the current value instead
        print(f"current: {text}", flush=True)
        return read(prompt)
    readline.set_startup_hook(lambda: readline.insert_text(text))
    try:
        return read(prompt)
    finally:
        readline.set_startup_hook()
