"""``tooldeck chat``: a conversation with the model and your tools, turn after turn.

Each line typed at ``> `` is a run in the conversation (a session, see ``cli/sessions.py``),
shown live as ``tooldeck run`` shows it. A run that stops or is interrupted (Ctrl-C) ends
with its totals and the chat goes on; Ctrl-D or ``exit`` leaves (status 0), Ctrl-C at the
prompt too (status 130). Ctrl-C during a turn cancels its run (``cli/interrupt.py``): the
turn is kept, its unfinished calls answered as cancelled. An interrupted turn says what it
left: a question that comes back (the pause stays in the conversation), the cancelled turn,
a call in a thread that may still complete.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace
from typing import Any

from tooldeck.cli.args import EXIT_ANSWER, EXIT_STATUSES, CliError, Parser
from tooldeck.cli.display import Console, call_text
from tooldeck.cli.exec import Run, execute
from tooldeck.cli.interrupt import Interrupted
from tooldeck.cli.load import loaded_tools
from tooldeck.cli.run import agent_options, defer_tools, prepare
from tooldeck.cli.runlog import logging_runs
from tooldeck.cli.sessions import session_options
from tooldeck.cli.terminal import TerminalReader
from tooldeck.cli.totals import Tally
from tooldeck.errors import ErrorCode, SessionError
from tooldeck.run._engine.calls.texts import keeps_running
from tooldeck.tools.registry import ToolView

_LEAVE = {"exit", "quit", "/exit", "/quit"}


def add_chat_parser(commands: Any, parents: list[Parser]) -> None:
    """Add ``tooldeck chat`` and its options to the command parser."""
    chat = commands.add_parser(
        "chat",
        parents=[*parents, agent_options(), session_options()],
        help="talk with a model that calls your tools, turn after turn",
        description="Talk with a model that calls your tools; each turn is shown live.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chat.set_defaults(handler=chat_command)


def chat_command(args: argparse.Namespace) -> int:
    """Run ``tooldeck chat``: prompts read from the terminal, turn after turn; the exit status."""
    with asyncio.Runner() as runner, loaded_tools(args.tools, args.toolset, runner) as loaded:
        run = prepare(args, loaded, "")
        with logging_runs(run.agent, args.no_log):
            return _converse(run, runner, defer_tools(args, loaded.view))


def _converse(run: Run, runner: asyncio.Runner, shown: ToolView) -> int:
    """Prompts read from the terminal, each run in turn, until Ctrl-D or 'exit'; ``shown``:
    the tools the chat starts with."""
    console = Console()
    session = run.session.session_id if run.session is not None else ""
    tools = ", ".join(shown.names) or "no tools"
    if shown.deferred:  # --defer-tools-after, or the module's defer_loading
        tools += f" (and {len(shown.deferred)} deferred, found with search_tools)"
    console.line(
        f"tooldeck chat on {run.agent.model.name} with {tools}; conversation {session} "
        f"(tooldeck run --session {session} goes on with it). Ctrl-D or 'exit' leaves.",
        "bold",
    )
    _line_editing()
    read = TerminalReader()
    while True:
        try:
            prompt = read("> ")
        except EOFError:  # Ctrl-D
            console.line("")
            return EXIT_ANSWER
        if prompt.strip() in _LEAVE:
            return EXIT_ANSWER
        if prompt.strip():
            _turn(replace(run, prompt=prompt, tally=Tally()), console, runner)


def _turn(run: Run, console: Console, runner: asyncio.Runner) -> None:
    """One run of the chat; its failure is a line, and the chat goes on."""
    if run.approver is not None:
        run.approver.unanswered = None
    try:
        execute(run, "display", console, runner, echo=False)
    except KeyboardInterrupt as interrupt:
        console.line(f"(interrupted: {interrupted_text(run, interrupt)})", "yellow")
    except (CliError, SessionError) as error:
        console.line(f"tooldeck: error: {' '.join(str(error).split())}", "red")


def interrupted_text(run: Run, interrupt: KeyboardInterrupt) -> str:
    """What a Ctrl-C during a chat's turn left: a question still waiting, the cancelled turn
    kept (or, after a second Ctrl-C, nothing of it), and calls that may still complete."""
    waiting = run.approver.unanswered if run.approver is not None else None
    if waiting is not None:  # the run's pause stays in the conversation (see cli/exec.py)
        return (
            f"{call_text(waiting.call)} still waits for approval; the question comes back "
            "before your next prompt"
        )
    if isinstance(interrupt, Interrupted):
        left = "the run was cancelled, and this turn is kept in the conversation"
        traces = interrupt.driven.result.tool_trace
        calls = [t.call for t in traces if t.result.error_code == ErrorCode.CANCELLED]
    else:
        left, calls = "this turn is not kept in the conversation", [*run.tally.running.values()]
    in_threads = [
        call_text(call)
        for call in calls
        if (entry := run.agent.tools.dispatch.get(call.name)) is not None and keeps_running(entry)
    ]
    if in_threads:
        verb, what, does = ("runs", "it", "does") if len(in_threads) == 1 else ("run", "they", "do")
        return (
            f"{left}, but {', '.join(in_threads)} {verb} in a thread, which cannot be "
            f"stopped: {what} may still finish, and do what {what} {does}"
        )
    return left


def _line_editing() -> None:
    """Arrow keys and history at the prompt (GNU readline, where Python has it)."""
    try:
        import readline  # noqa: F401  (importing it is what turns line editing on)
    except ImportError:
        return
