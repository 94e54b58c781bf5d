"""``tooldeck chat``: a conversation with the model and your tools, turn after turn.

Each line typed at ``> `` is a run in the conversation (a session, see ``cli/sessions.py``),
shown live as ``tooldeck run`` shows it. A run that stops or is interrupted (Ctrl-C) ends
with its totals and the chat goes on; Ctrl-D or ``exit`` leaves (status 0), Ctrl-C at the
prompt too (status 130).
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace
from typing import Any

from tooldeck.cli.args import EXIT_ANSWER, EXIT_STATUSES, CliError, Parser
from tooldeck.cli.display import Console, Tally
from tooldeck.cli.exec import Run, execute
from tooldeck.cli.load import loaded_tools
from tooldeck.cli.run import agent_options, prepare
from tooldeck.cli.runlog import logging_runs
from tooldeck.cli.sessions import session_options
from tooldeck.errors import SessionError

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
    with asyncio.Runner() as runner, loaded_tools(args.tools, args.toolset, runner) as view:
        run = prepare(args, view, "")
        with logging_runs(run.agent, args.no_log):
            return _converse(run, runner)


def _converse(run: Run, runner: asyncio.Runner) -> int:
    """Prompts read from the terminal, each run in turn, until Ctrl-D or 'exit'."""
    console = Console()
    session = run.session.session_id if run.session is not None else ""
    tools = ", ".join(run.agent.tools.names) or "no tools"
    console.line(
        f"tooldeck chat on {run.agent.model.name} with {tools}; conversation {session} "
        f"(tooldeck run --session {session} goes on with it). Ctrl-D or 'exit' leaves.",
        "bold",
    )
    _line_editing()
    while True:
        try:
            prompt = input("> ")
        except EOFError:  # Ctrl-D
            console.line("")
            return EXIT_ANSWER
        if prompt.strip() in _LEAVE:
            return EXIT_ANSWER
        if prompt.strip():
            _turn(replace(run, prompt=prompt, tally=Tally()), console, runner)


def _turn(run: Run, console: Console, runner: asyncio.Runner) -> None:
    """One run of the chat; its failure is a line, and the chat goes on."""
    try:
        execute(run, "display", console, runner, echo=False)
    except KeyboardInterrupt:
        console.line("(interrupted: the conversation is as it was before this turn)", "yellow")
    except (CliError, SessionError) as error:
        console.line(f"tooldeck: error: {' '.join(str(error).split())}", "red")


def _line_editing() -> None:
    """Arrow keys and history at the prompt (GNU readline, where Python has it)."""
    try:
        import readline  # noqa: F401  (importing it is what turns line editing on)
    except ImportError:
        return
