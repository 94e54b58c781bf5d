"""``tooldeck a2a serve``: an agent served over A2A (``tooldeck.serve.a2a``) until stopped.

The agent is built as ``tooldeck run`` builds its own (``cli.run.build_agent``), with every
setting the tools module defines. Its clients authenticate with the secret in
``$TOOLDECK_A2A_TOKEN`` (a bearer token, or with ``--auth api-key`` an API key): a secret on
the command line would show in the process list. ``--auth none`` serves anyone, for a server
behind the application's own gateway. Tasks and conversations are kept in ``--session-db``
(a SQLite file or a ``postgresql://`` URL); servers started on one go on with each other's
tasks. ``$TOOLDECK_CHECKPOINT_KEY``, when set, signs the checkpoints of paused runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from tooldeck.cli.args import CliError, Parser, UsageError, positive_int
from tooldeck.cli.load import load_with_settings
from tooldeck.cli.run import agent_options, build_agent, build_deps
from tooldeck.cli.web import _listen
from tooldeck.serve.limits import DEFAULT_MAX_BODY_BYTES

TOKEN_ENV = "TOOLDECK_A2A_TOKEN"
"""The environment variable holding the secret clients must send."""
KEY_ENV = "TOOLDECK_CHECKPOINT_KEY"
"""The environment variable holding the key that signs paused runs' checkpoints."""
DEFAULT_PORT = 8766


def add_a2a_parser(commands: Any, parents: list[Parser]) -> None:
    """Add ``tooldeck a2a serve`` and its options to the command line's subcommands."""
    a2a = commands.add_parser("a2a", help="Agent2Agent protocol: serve an agent to A2A clients")
    a2a_commands = a2a.add_subparsers(dest="a2a_command", metavar="COMMAND", required=True)
    serve = a2a_commands.add_parser(
        "serve",
        parents=[*parents, agent_options(terminal=False)],
        help="serve an agent over A2A (JSON-RPC and HTTP+JSON)",
        description=(
            "Serve an agent over A2A: a task is a run, a context a conversation kept in "
            f"--session-db. Clients send the secret in ${TOKEN_ENV}."
        ),
    )
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1: this machine")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0: a free one"
    )
    serve.add_argument(
        "--url", help="the URL clients reach the server at, for the card (default: from --host)"
    )
    serve.add_argument(
        "--session-db",
        metavar="PATH|URL",
        help="where tasks and conversations are kept: a SQLite file or a postgresql:// URL "
        "(default: a2a.db in $TOOLDECK_HOME)",
    )
    serve.add_argument(
        "--auth",
        choices=("bearer", "api-key", "none"),
        default="bearer",
        help=f"how clients send ${TOKEN_ENV}: Authorization: Bearer (default), an X-API-Key "
        "header, or not at all (none: anyone may send tasks)",
    )
    serve.add_argument(
        "--max-body",
        type=positive_int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="BYTES",
        help=f"the largest request body taken (default {DEFAULT_MAX_BODY_BYTES}: 1 MiB)",
    )
    _add_store_sharing_options(serve)
    serve.set_defaults(handler=a2a_serve_command, prog="tooldeck a2a serve")


def _add_store_sharing_options(serve: Any) -> None:
    """The options of servers sharing one store: heartbeat, lease and the event log's grace."""
    serve.add_argument(
        "--heartbeat",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how often the server renews the lease on the tasks it runs (default 2)",
    )
    serve.add_argument(
        "--lease",
        type=float,
        metavar="SECONDS",
        help="how long a task's lease holds unrenewed before other servers on the store take "
        "its server for stopped and fail the task (default: 5 heartbeats)",
    )
    serve.add_argument(
        "--keep-events",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long a finished task's streamed events stay in the store's event log before "
        "all but the last are deleted (default 600; the task and its history stay)",
    )


def a2a_serve_command(args: argparse.Namespace) -> int:
    """``tooldeck a2a serve``: serve until Ctrl-C; the exit status."""
    try:
        import uvicorn

        from tooldeck.serve.a2a import ApiKey, BearerToken, app
    except ImportError as error:
        raise CliError(str(error)) from error
    if not args.tools:
        raise UsageError("give the agent's tools: -t/--tools MODULE[:ATTR]|FILE.py")
    auth = _auth(args.auth, ApiKey, BearerToken)
    agent = build_agent(args, load_with_settings(args.tools, args.toolset))
    key = os.environ.get(KEY_ENV)
    if key:
        agent.checkpoint_key = key.encode()
    deps = build_deps(args.deps) if args.deps else None
    listener = _listen(args.host, args.port)
    port = listener.getsockname()[1]
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    url = args.url or f"http://{f'[{shown}]' if ':' in shown else shown}:{port}"
    try:
        served = app(
            agent,
            url=url,
            auth=auth,
            store=args.session_db,
            deps=deps,
            max_body_bytes=args.max_body,
            heartbeat_s=args.heartbeat,
            lease_s=args.lease,
            keep_events_s=args.keep_events,
        )
    except ValueError as error:
        raise UsageError(str(error)) from None
    tools = ", ".join(agent.tools.names) or "none"
    print(
        f"tooldeck a2a serve: {agent.name!r} at {url} (card: {url}/.well-known/agent-card.json); "
        f"tools: {tools}; auth: {args.auth}; Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(served, log_level="warning", timeout_graceful_shutdown=5)
    with listener:
        uvicorn.Server(config).run(sockets=[listener])
    return 0


def _auth(kind: str, api_key: Any, bearer: Any) -> Any:
    if kind == "none":
        return None
    secret = os.environ.get(TOKEN_ENV)
    if not secret:
        raise UsageError(
            f"--auth {kind} needs the secret in ${TOKEN_ENV} (make one with: python -c "
            "'import secrets; print(secrets.token_urlsafe(32))'), or --auth none to serve anyone"
        )
    try:
        return api_key(secret) if kind == "api-key" else bearer(secret)
    except ValueError as error:
        raise UsageError(f"${TOKEN_ENV}: {error}") from error
