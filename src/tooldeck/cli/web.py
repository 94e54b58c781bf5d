"""``tooldeck web``: the agent's chat, its approvals, the conversations and the run log in a
browser (``tooldeck.web``), served on this machine only unless ``--host`` says otherwise.

A random token is printed at start, in the URL to open (as Jupyter does): every request
needs it. Without ``--tools`` the server shows the run log and the conversations only.

The chat's agent is built as ``tooldeck run`` builds its own (``cli.run.build_agent``), from
the same options and with every setting the tools module defines: its guardrails, its
handoffs, its untrusted policy; a typed answer (``--output-schema``) is shown as data.
Approvals are answered in the page, so ``run``'s ``--approve``, ``--yes`` and
``--no-stream`` are not options here.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import socket
import sys
from typing import Any

from tooldeck.cli.args import CliError, Parser, UsageError, positive_int
from tooldeck.cli.load import load_with_settings
from tooldeck.cli.run import (
    agent_options,
    build_agent,
    build_deps,
    typed_answer,
    typed_answer_options,
)
from tooldeck.cli.runlog import logging_runs
from tooldeck.run.agent import Agent
from tooldeck.runlog import RunLog, tooldeck_home
from tooldeck.serve.limits import DEFAULT_MAX_BODY_BYTES

DEFAULT_PORT = 8765


def add_web_parser(commands: Any, parents: list[Parser]) -> None:
    """Add ``tooldeck web`` and its options to the command line's subcommands."""
    chat = agent_options(terminal=False, without_tools="no chat: the run log only")
    web = commands.add_parser(
        "web",
        parents=[*parents, chat],
        help="the chat, approvals, conversations and run log in a browser",
        description=(
            "Serve a web app on this machine: chat with the agent (answers stream, approvals "
            "in the page), the conversations, the run log and the tools. Without --tools: the "
            "run log and the conversations only."
        ),
    )
    web.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every "
        "network interface)",
    )
    web.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0: a free one"
    )
    web.add_argument(
        "--max-body",
        type=positive_int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="BYTES",
        help="the largest request body taken, a larger one is refused with 413 (default "
        f"{DEFAULT_MAX_BODY_BYTES}: 1 MiB)",
    )
    typed_answer_options(web, "shown as data")
    web.set_defaults(handler=web_command, prog="tooldeck web")
    web.set_defaults(chat_defaults=vars(chat.parse_args([])))


def web_command(args: argparse.Namespace) -> int:
    """``tooldeck web``: serve the app until Ctrl-C; the exit status."""
    try:
        from tooldeck.web import create_app
        from tooldeck.web.server import serve
    except ImportError as error:
        raise CliError(str(error)) from error
    if not args.tools:
        _no_chat(args)
    agent = _agent(args) if args.tools else None
    deps = build_deps(args.deps) if args.deps else None
    listener = _listen(args.host, args.port)
    port = listener.getsockname()[1]
    token = secrets.token_urlsafe(24)
    home = tooldeck_home()
    home.mkdir(parents=True, exist_ok=True)
    logged = logging_runs(agent, args.no_log) if agent else contextlib.nullcontext()
    with listener, logged:
        app = create_app(
            agent=agent,
            home=home,
            token=token,
            port=port,
            host=args.host,
            run_log=_run_log(agent),
            deps=deps,
            max_body_bytes=args.max_body,
        )
        _announce(agent, args.host, port, token, str(home))
        serve(app, listener)
    return 0


def _agent(args: argparse.Namespace) -> Agent[Any, Any]:
    """The chat's agent: as ``tooldeck run`` builds it, with the module's settings."""
    output_type, output_mode = typed_answer(args)
    loaded = load_with_settings(args.tools, args.toolset)
    return build_agent(args, loaded, output_type, output_mode)


def _no_chat(args: argparse.Namespace) -> None:
    """Refuse the options of the chat's runs given without ``--tools`` (there is no chat)."""
    given = [
        f"--{dest.replace('_', '-')}"
        for dest, default in args.chat_defaults.items()
        if dest not in ("deps", "no_log") and getattr(args, dest) != default
    ]
    given += [
        option
        for option, value in (
            ("--price", args.price),
            ("--output-schema", args.output_schema),
            ("--output-mode", args.output_mode),
        )
        if value is not None
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)} set{'s' if len(given) == 1 else ''} the chat's runs, and "
            "there is no chat without --tools: give -t/--tools MODULE"
        )


def _run_log(agent: Agent[Any, Any] | None) -> RunLog | None:
    """The log the agent records its runs in, if it is a run log (the runs pages flush it)."""
    log = agent.run_log if agent is not None else None
    return log if isinstance(log, RunLog) else None


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one), before anything is printed."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(2048)  # before the URL is printed: a browser may connect at once
    except OSError as error:
        listener.close()
        raise CliError(
            f"cannot listen on {host}:{port}: {error.strerror or error}; give another port with "
            "--port N (0 picks a free one)"
        ) from error
    return listener


def _announce(agent: Agent[Any, Any] | None, host: str, port: int, token: str, home: str) -> None:
    if agent is not None:
        tools = ", ".join(agent.tools.names) or "no tools"
        what = f"chat with {agent.model.name} and its tools ({tools})"
    else:
        tools, what = "", "the run log and the conversations (no --tools: no chat)"
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    shown = f"[{local}]" if ":" in local else local
    lines = [
        f"tooldeck web: {what}; data in {home}",
        "Open this URL in a browser (its token lets you in; keep it to yourself):",
        f"    http://{shown}:{port}/?token={token}",
    ]
    if host in ("0.0.0.0", "::"):
        lines.append(
            f"warning: listening on every network interface ({host}): anyone who can reach this "
            f"machine on port {port} and has the token can "
            + (f"chat with the agent and run its tools ({tools}), " if agent else "")
            + "read and delete the conversations and read the run log. The connection is plain "
            "HTTP: the token and everything shown cross the network unencrypted."
        )
    elif local in ("127.0.0.1", "localhost", "::1"):
        lines.append("Only this machine can connect.")
    lines.append("Ctrl-C stops the server.")
    print("\n".join(lines), flush=True)
    sys.stdout.flush()
