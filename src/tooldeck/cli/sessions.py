"""Conversations kept between commands: ``-c/--continue``, ``--session ID`` and ``chat``.

Every ``tooldeck run`` and ``tooldeck chat`` keeps its conversation in a SQLiteSession in
``sessions.db`` under ``$TOOLDECK_HOME`` (else the user's data directory, beside the run
log's ``logs.db``): a new conversation each time, unless ``-c`` continues the latest one or
``--session ID`` names one (created when new). The latest one's id is in ``latest_session``
there. A run that stops without an answer leaves its conversation as it was.
"""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path

from tooldeck.cli.args import Parser, UsageError
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
