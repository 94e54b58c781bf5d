"""How ``tooldeck run`` decides on calls that wait for a person: ask at the terminal, or not.

    approve delete_file(path="a.txt")? [y]es / [n]o / [a]lways in this run / [s]ession / [e]dit

``y`` approves this call; ``a`` the tool's later calls of this run too and ``s`` those of the
conversation's next runs as well (``Approve(scope="run" | "session")``: the run remembers
them, so they are not asked about, and ``tooldeck logs`` shows each as remembered). A call
a code-mode program makes is asked about the same way, after the program's line that makes
it; a ``run_code`` approved as a whole names the tools its program may call. A call made
inside an agent tool is approved once (no ``a``/``s``: that run ends with the call).

Ctrl-C or Ctrl-D leaves the question unanswered (KeyboardInterrupt: the run keeps waiting).
``n`` may carry why (``n too expensive``): the model reads it in the rejection. An edit is
checked against the tool's schema before it is accepted; one that does not fit is refused
with the problems, and the question is asked again.

``--approve TOOL`` approves a tool's calls without asking, ``--yes`` every call. With no
terminal on stdin nothing waits: an uncovered call is rejected and stderr says so. The
question and what answers it goes to the terminal, never into a redirected stdout (see
``cli/terminal.py``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO, cast

from tooldeck.cli.display import call_text
from tooldeck.cli.terminal import TerminalReader
from tooldeck.errors import InvalidArguments
from tooldeck.results import ApprovalScope, Approve, Decision, PendingCall, Reject
from tooldeck.run._engine.handing_over import reachable
from tooldeck.run.agent import Agent
from tooldeck.run.agent_tool import AgentTool
from tooldeck.tools.registry import ToolView

_CHOICES = "[y]es / [n]o / [a]lways in this run / [s]ession / [e]dit"
_NESTED_CHOICES = "[y]es / [n]o / [e]dit"
_SCOPES: dict[str, ApprovalScope] = {
    "a": "run",
    "always": "run",
    "s": "session",
    "session": "session",
}
_NO_TERMINAL = "nobody was at the terminal to approve this call"


class Approver:
    """Decisions for pending approval calls, from the options and the person at the terminal."""

    def __init__(
        self,
        approve: Iterable[str] = (),
        approve_all: bool = False,
        interactive: bool | None = None,
        read: Callable[[str], str] | None = None,
        errors: TextIO | None = None,
        tools: ToolView | None = None,
    ) -> None:
        self.always = set(approve)
        """Tools whose calls are approved without asking."""
        self.approve_all = approve_all
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self._reader = TerminalReader()
        self._read = read or self._reader
        """Reads the answer (a Ctrl-C always interrupts the wait)."""
        self._errors = errors
        self.tools = tools
        self.unanswered: PendingCall | None = None
        """The call whose question is being asked (still set when Ctrl-C interrupted it)."""
        """The tools whose schemas an edit must fit (None: not checked here)."""

    @property
    def _terminal(self) -> TextIO:
        """Where the person reads what answers their answers (never a redirected stdout)."""
        return self._errors or self._reader.stream()

    def decide(self, pending: Sequence[PendingCall]) -> dict[str, Decision]:
        """One decision per approval call (external calls cannot be run from the CLI)."""
        decisions: dict[str, Decision] = {}
        remembered: set[str] = set()
        for waiting in pending:
            if waiting.kind != "approval":
                continue
            if waiting.call.name in remembered and not waiting.path and not waiting.reason:
                continue  # the run approves it, as approved for the run a moment ago
            decision = decisions[waiting.id] = self._decide_one(waiting)  # unique when nested
            if isinstance(decision, Approve) and decision.scope != "once":
                remembered.add(waiting.call.name)
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
                file=self._errors or sys.stderr,
                flush=True,
            )
            return Reject(message=_NO_TERMINAL, by="cli")
        if waiting.reason:
            print(f"tooldeck: ⚠ {waiting.reason}", file=self._terminal, flush=True)
        for line in _about(waiting):
            print(f"tooldeck: {line}", file=self._terminal, flush=True)
        return self._ask(waiting)

    def _ask(self, waiting: PendingCall) -> Decision:
        call = waiting.call
        inside = f"{' > '.join(waiting.path)}: " if waiting.path else ""  # in a program too
        self.unanswered = waiting
        while True:
            choices = _CHOICES if waiting.own else _NESTED_CHOICES
            question = f"approve {inside}{call_text(call)}? {choices} "
            try:
                answer = self._read(question)
            except EOFError:  # Ctrl-D: the question is left unanswered, as with Ctrl-C
                raise KeyboardInterrupt from None
            decision = self._answer(waiting, answer.strip())
            if decision is not None:
                self.unanswered = None
                return decision

    def _answer(self, waiting: PendingCall, answer: str) -> Decision | None:
        """The decision an answer makes; None to ask again."""
        word, _, reason = answer.partition(" ")
        word = word.lower()
        if word in ("n", "no"):  # "n too expensive": the model reads why
            return Reject(message=_said_no(reason.strip()), by="cli")
        if answer.lower() in ("y", "yes"):
            return Approve(by="cli")
        scope = _SCOPES.get(answer.lower())
        if scope is not None and waiting.own:
            return Approve(by="cli", scope=scope)
        if answer.lower() in ("e", "edit"):
            edited = self._edit(waiting)
            return None if edited is None else Approve(arguments=edited, by="cli")
        if not waiting.own:
            self._say(f"please answer y, n (or n and why) or e (got {answer!r})")
        else:
            self._say(f"please answer y, n (or n and why), a, s or e (got {answer!r})")
        return None

    def _edit(self, waiting: PendingCall) -> dict[str, object] | None:
        """The arguments as one line of JSON, prefilled, checked against the tool's schema;
        None to go back to the question."""
        prompt = "arguments (JSON, empty to go back): "
        text = _read_prefilled(self._read, prompt, waiting.call.arguments_json, self._terminal)
        if not text.strip():
            return None
        try:
            value = json.loads(text)
        except ValueError as error:
            self._say(f"not valid JSON ({error}); try again")
            return None
        if not isinstance(value, dict):
            self._say("the arguments must be a JSON object; try again")
            return None
        problem = self._misfit(waiting, value)
        if problem:
            self._say(f"these arguments do not fit {waiting.call.name}: {problem}; try again")
            return None
        return value

    def _misfit(self, waiting: PendingCall, arguments: dict[str, object]) -> str:
        """What is wrong with ``arguments`` for the call's tool ('' when they fit). A call in
        an agent tool is checked by that agent's run when it resumes."""
        if self.tools is None or not waiting.own:
            return ""
        name = waiting.call.name  # a deferred tool's call waits once a search revealed it
        entry = self.tools.dispatch.get(name) or self.tools.deferred.get(name)
        if entry is None:
            return ""
        try:
            entry.handler.validate(dict(arguments))
        except InvalidArguments as error:
            return str(error)
        return ""

    def _say(self, text: str) -> None:
        print(text, file=self._terminal, flush=True)


def _about(waiting: PendingCall) -> list[str]:
    """What the person is told about where a call comes from and what approving it allows."""
    lines = []
    if waiting.where:
        lines.append(f"the program makes this call at {waiting.where}")
    if waiting.reaches:
        tools = ", ".join(waiting.reaches)
        lines.append(f"the program may call {tools}: approved, it calls them without asking")
    return lines


def _said_no(reason: str) -> str:
    said = "the person at the terminal said no"
    return f"{said}: {reason}" if reason else said


def _read_prefilled(read: Callable[[str], str], prompt: str, text: str, shown: TextIO) -> str:
    """Read a line with ``text`` already typed in (GNU readline, on a terminal stdout), or
    shown above it (on ``shown``)."""
    try:
        import readline
    except ImportError:  # no readline on this platform
        return _read_below(read, prompt, text, shown)
    if not sys.stdout.isatty():  # input() does not use readline then
        return _read_below(read, prompt, text, shown)
    readline.set_startup_hook(lambda: readline.insert_text(text))
    try:
        return read(prompt)
    finally:
        readline.set_startup_hook()


def _read_below(read: Callable[[str], str], prompt: str, text: str, shown: TextIO) -> str:
    print(f"current: {text}", file=shown, flush=True)
    return read(prompt)


def reachable_tools(agent: Agent[Any, Any], shown: ToolView | None = None) -> list[str]:
    """The names of the tools of ``agent``, of every agent a run may be handed to from it
    (``handing_over.reachable``) and of every agent asked as a tool by one of them: the calls
    a person may be asked about (a call inside an agent tool waits as the top run's).
    ``shown``: ``agent``'s tools as the command loaded them (an agent following a module's
    Toolsets lists them at its first turn)."""
    names: dict[str, None] = dict.fromkeys(e.name for e in shown.entries) if shown else {}
    seen: set[int] = set()
    waiting = [agent]
    while waiting:
        for each in reachable(waiting.pop()).values():
            if id(each) in seen:
                continue
            seen.add(id(each))
            tools = cast(Agent[Any, Any], each).tools
            names.update((entry.name, None) for entry in tools.entries)  # deferred ones too
            for entry in tools.entries:
                if isinstance(entry.handler, AgentTool) and isinstance(entry.handler.agent, Agent):
                    waiting.append(entry.handler.agent)
    return list(names)
