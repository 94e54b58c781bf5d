"""Conversations kept between commands: ``-c/--continue``, ``--session ID`` and ``chat``.

Every ``tooldeck run`` and ``tooldeck chat`` keeps its conversation in a SQLiteSession in
``sessions.db`` under ``$TOOLDECK_HOME`` (else the user's data directory, beside the run
log's ``logs.db``): a new conversation each time, unless ``-c`` continues the latest one or
``--session ID`` names one (created when new). The latest one's id is in ``latest_session``
there. A run that stops without an answer leaves its conversation as it was.

``tooldeck sessions`` lists the conversations, discards the paused run one waits on (a
question left unanswered), or clears one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tooldeck.cli.args import CliError, Parser, UsageError, positive_int
from tooldeck.cli.display import call_text
from tooldeck.cli.totals import count
from tooldeck.results import Checkpoint
from tooldeck.runlog import tooldeck_home
from tooldeck.sessions import SQLiteSession

_LATEST = "latest_session"


def session_options() -> Parser:
    """``-c/--continue`` and ``--session ID`` (a parent parser)."""
    parent = Parser(add_help=False)
    which = parent.add_mutually_exclusive_group()
    which.add_argument(
        "-c",
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="continue the latest conversation (of run or chat)",
    )
    which.add_argument(
        "--session",
        metavar="ID",
        help="continue the conversation ID, or start it if new",
    )
    return parent


def open_session(args: argparse.Namespace) -> SQLiteSession:
    """The conversation the arguments name (a new one when they name none)."""
    home = tooldeck_home()
    if args.session is not None:
        if not args.session.strip():
            raise UsageError("--session needs an ID, e.g. --session shopping")
        session_id = args.session
    elif args.continue_latest:
        session_id = _latest(home)
    else:
        session_id = secrets.token_hex(4)
    try:
        home.mkdir(parents=True, exist_ok=True)
        (home / _LATEST).write_text(session_id, encoding="utf-8")
    except OSError as error:
        raise OSError(f"cannot keep conversations in {str(home)!r}: {error}") from error
    return SQLiteSession(home / "sessions.db", session_id)


def _latest(home: Path) -> str:
    try:
        latest = (home / _LATEST).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        latest = ""
    if not latest:
        raise UsageError("-c: there is no conversation to continue yet; run a prompt first")
    return latest


def add_sessions_parser(commands: Any, parents: list[Parser]) -> None:
    """Add ``tooldeck sessions list|discard|clear``."""
    sessions = commands.add_parser(
        "sessions",
        parents=parents,
        help="list conversations; discard a paused run; clear a conversation",
        description="The conversations of run and chat (sessions.db in TOOLDECK_HOME).",
    )
    verbs = sessions.add_subparsers(dest="sessions_command", metavar="COMMAND", required=True)
    listing = verbs.add_parser("list", parents=parents, help="the conversations, latest first")
    listing.add_argument("-n", type=positive_int, default=20, help="how many at most (default 20)")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    listing.set_defaults(handler=_list, prog="tooldeck sessions list")
    discard = verbs.add_parser(
        "discard",
        parents=parents,
        help="drop the run a conversation waits on: its calls never run, and the "
        "conversation goes on from before that run's prompt",
    )
    discard.add_argument("session", metavar="ID", help="the conversation")
    discard.set_defaults(handler=_discard, prog="tooldeck sessions discard")
    clear = verbs.add_parser(
        "clear", parents=parents, help="delete a conversation (a paused run included)"
    )
    clear.add_argument("session", metavar="ID", help="the conversation")
    clear.set_defaults(handler=_clear, prog="tooldeck sessions clear")


def paused_prompt(checkpoint: Checkpoint) -> str:
    """The prompt of the run a checkpoint paused (its last user message)."""
    prompts = [m.content for m in checkpoint.messages if m.role == "user"]
    return prompts[-1] if prompts else ""


def waiting_calls(checkpoint: Checkpoint) -> str:
    """``delete_file(path="a.txt")``: the calls a paused run waits on, as the display shows."""
    return ", ".join(call_text(pending.call) for pending in checkpoint.pending)


def _database() -> Path:
    return tooldeck_home() / "sessions.db"


def _list(args: argparse.Namespace) -> int:
    found = asyncio.run(SQLiteSession.list_sessions(_database(), limit=args.n))
    if args.json:
        print(json.dumps([asdict(info) for info in found], indent=2, ensure_ascii=False))
        return 0
    for info in found:
        paused = "  (a run waits for decisions)" if info.paused else ""
        print(f"{info.session_id}  {count(info.runs, 'run')}  {info.title!r}{paused}")
    if not found:
        print("no conversations yet", file=sys.stderr)
    return 0


def _discard(args: argparse.Namespace) -> int:
    checkpoint = asyncio.run(_discarded(_existing(args.session)))
    print(
        f"discarded the paused run of conversation {args.session!r} (prompt "
        f"{paused_prompt(checkpoint)!r}): {waiting_calls(checkpoint)} will not run; the "
        "conversation goes on from before that prompt"
    )
    return 0


async def _discarded(session: SQLiteSession) -> Checkpoint:
    try:
        history = await session.load()
        if history.pending is None:
            raise CliError(f"conversation {session.session_id!r} has no paused run to discard")
        await session.consume(history.pending.run_id, after=history.head)
        return history.pending
    finally:
        await session.aclose()


def _clear(args: argparse.Namespace) -> int:
    asyncio.run(_cleared(_existing(args.session)))
    print(f"cleared conversation {args.session!r}")
    return 0


async def _cleared(session: SQLiteSession) -> None:
    try:
        history = await session.load()
        if not history.messages and history.pending is None:
            raise CliError(f"conversation {session.session_id!r} holds nothing to clear")
        await session.clear()
    finally:
        await session.aclose()


def _existing(session_id: str) -> SQLiteSession:
    database = _database()
    if not database.exists():
        raise CliError(f"no conversations yet ({str(database)!r} does not exist)")
    return SQLiteSession(database, session_id)
