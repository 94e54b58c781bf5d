"""The ``tooldeck`` command: run a prompt on tools, try the demo, list and serve tools.

    tooldeck run ["PROMPT"] [--tools MODULE[:ATTR]|FILE.py] [--model MODEL] [--base-url URL]
        [--api-key-env NAME] [--toolset NAME]... [--system TEXT | --instructions-file PATH]
        [--tool-choice auto|required|none|NAME] [--max-rounds N] [--max-tokens N]
        [--timeout SECONDS] [--max-cost USD] [--price IN,OUT]
        [--on-limit raise|final-answer] [--error-details] [--approve TOOL]... [--yes]
        [--deps MODULE:FACTORY] [--output-schema MODULE:TYPE]
        [--output-mode auto|native|tool|prompted] [--json | --no-display]
        [--no-stream] [-c | --session ID] [--no-log] [-v]
    tooldeck chat [--tools MODULE[:ATTR]|FILE.py] [the options of run] [-c | --session ID]
    tooldeck demo ["PROMPT"] [--model MODEL]
    tooldeck tools MODULE[:ATTR]|FILE.py [--toolset NAME] [--json]
    tooldeck mcp serve MODULE[:ATTR]|FILE.py [--toolset NAME] [--http HOST:PORT]
        [--allow-approval-tools] [--include-error-details] [--name NAME]
    tooldeck logs [-n N] [--tool NAME] [--errors] [--session ID] [--json]
    tooldeck logs show RUN_ID | tooldeck logs path
    tooldeck sessions list [-n N] [--json] | tooldeck sessions discard ID |
        tooldeck sessions clear ID
    tooldeck web [--tools MODULE[:ATTR]|FILE.py] [--model MODEL] [--host HOST] [--port N]
        [the options of run but --approve, --yes, --no-stream]
    tooldeck a2a serve --tools MODULE[:ATTR]|FILE.py [--model MODEL] [--host HOST] [--port N]
        [--session-db PATH|URL] [--auth bearer|api-key|none] [the options of web]
    tooldeck eval SUITE... [--model M [--base-url URL]]... [--limit N] [--jobs N]
        [--out FILE] [--resume] [--compare FILE]... [--json] [--report FILE.html]

``run``, ``chat`` and ``demo`` record each run in the run log (``--no-log``: not these);
the log is ``logs.db`` in ``$TOOLDECK_HOME`` or the user's data directory.

Exit status: 0 the model answered, 1 the run stopped without an answer or something failed
(one line on stderr, the traceback with ``-v``), 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tooldeck.cli.a2a import add_a2a_parser
from tooldeck.cli.args import (
    ENVIRONMENT,
    EXIT_INTERRUPTED,
    EXIT_STATUSES,
    EXIT_STOPPED,
    EXIT_USAGE,
    CliError,
    Parser,
    UsageError,
    model_options,
    usage_line,
    verbose_options,
)
from tooldeck.cli.chat import add_chat_parser
from tooldeck.cli.display import Console, show_specs
from tooldeck.cli.eval import add_eval_parser
from tooldeck.cli.exec import Run, execute
from tooldeck.cli.load import load_tools, load_with_settings, refuse_unhonoured
from tooldeck.cli.logs import add_logs_parser
from tooldeck.cli.model import build_model
from tooldeck.cli.run import NO_LOG_HELP, TOOLS_HELP, add_run_parser
from tooldeck.cli.runlog import logging_runs
from tooldeck.cli.sessions import add_sessions_parser
from tooldeck.cli.web import add_web_parser
from tooldeck.errors import ToolDeckError
from tooldeck.tools.registry import ToolEntry


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tooldeck`` console script; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        status: int = args.handler(args)
    except KeyboardInterrupt as interrupt:
        said = f": {interrupt.args[0]}" if interrupt.args else ""
        print(f"tooldeck: interrupted{said}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UsageError as error:
        sys.stderr.write(usage_line(args.prog, str(error)))
        return EXIT_USAGE
    except (CliError, ToolDeckError, ValueError, OSError) as error:
        if args.verbose:
            traceback.print_exception(error.__cause__ or error)
        print(f"tooldeck: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_STOPPED
    return status


def _parser() -> Parser:
    parser = Parser(
        prog="tooldeck",
        description="Run LLM agents that call Python functions as tools.",
        epilog=f"{EXIT_STATUSES}\n\n{ENVIRONMENT}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tooldeck {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    verbose, model = verbose_options(), model_options()
    add_run_parser(commands, [verbose, model])
    add_chat_parser(commands, [verbose, model])

    demo = commands.add_parser(
        "demo",
        parents=[verbose, model],
        help="run the demo agent (add_numbers, get_weather) offline on the local model",
    )
    demo.add_argument("prompt", nargs="*", help="what to ask (default: two sample questions)")
    demo.add_argument("--no-log", action="store_true", help=NO_LOG_HELP)
    demo.set_defaults(handler=_demo)

    tools = commands.add_parser(
        "tools", parents=[verbose], help="print the tool specs a model would see"
    )
    tools.add_argument("module", metavar="MODULE[:ATTR]|FILE.py", help=TOOLS_HELP)
    tools.add_argument("--toolset", action="append", metavar="NAME", help="only tools in NAME")
    tools.add_argument("--json", action="store_true", help="print the specs as JSON")
    tools.set_defaults(handler=_tools)
    _add_mcp_parser(commands, verbose)
    add_logs_parser(commands, [verbose])
    add_sessions_parser(commands, [verbose])
    add_web_parser(commands, [verbose, model])
    add_a2a_parser(commands, [verbose, model])
    add_eval_parser(commands, [verbose])
    for name in ("run", "chat", "demo", "tools"):
        commands.choices[name].set_defaults(prog=f"tooldeck {name}")
    return parser


def _add_mcp_parser(commands: Any, verbose: Parser) -> None:
    mcp = commands.add_parser("mcp", help="Model Context Protocol: serve tools to MCP clients")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", metavar="COMMAND", required=True)
    serve = mcp_commands.add_parser(
        "serve",
        parents=[verbose],
        help="serve a module's tools as an MCP server (stdio, or HTTP with --http)",
    )
    serve.add_argument("module", metavar="MODULE[:ATTR]|FILE.py", help=TOOLS_HELP)
    serve.add_argument("--toolset", action="append", metavar="NAME", help="only tools in NAME")
    serve.add_argument(
        "--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp"
    )
    serve.add_argument(
        "--allow-approval-tools",
        action="store_true",
        help="also serve tools that require approval (the MCP client must ask a person)",
    )
    serve.add_argument(
        "--include-error-details",
        action="store_true",
        help="tell clients a failing tool's exception text",
    )
    serve.add_argument("--name", help="the server name clients see (default: the module)")
    serve.set_defaults(handler=_mcp_serve, prog="tooldeck mcp serve")


def _version() -> str:
    try:
        return version("tooldeck")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _demo(args: argparse.Namespace) -> int:
    from tooldeck.cli.demo import DEMO_PROMPTS, demo_agent

    console = Console()
    agent = demo_agent(build_model(args.model, args.base_url, args.api_key_env), args.price)
    prompts = [" ".join(args.prompt)] if args.prompt else list(DEMO_PROMPTS)
    console.line(
        f"tooldeck demo on {agent.model.name}: tools add_numbers, get_weather "
        "(the first turn must call a tool)",
        "bold",
    )
    with logging_runs(agent, args.no_log):
        for prompt in prompts:
            execute(Run(agent, prompt, verbose=args.verbose), "display", console)
    return 0


def _tools(args: argparse.Namespace) -> int:
    view = load_tools(args.module, args.toolset)
    if args.json:
        described = [{**entry.spec.model_dump(), **_how_it_runs(entry)} for entry in view.entries]
        print(json.dumps(described, indent=2, ensure_ascii=False))
    else:
        show_specs(Console(), view)
    return 0


def _how_it_runs(entry: ToolEntry) -> dict[str, object]:
    rule = entry.options.requires_approval
    approval = rule if isinstance(rule, bool) else "per call"
    how: dict[str, object] = {"external": entry.external, "requires_approval": approval}
    if entry.options.defer_loading:  # shown to a model once search_tools finds it
        how["deferred"] = True
    return how


def _mcp_serve(args: argparse.Namespace) -> int:
    view, settings, _ = load_with_settings(args.module, args.toolset)
    refuse_unhonoured(settings, "tooldeck mcp serve", NOT_SERVED, _ONE_CALL)
    try:
        from tooldeck.serve.mcp import serve_tools
    except ImportError as error:
        raise CliError(str(error)) from error
    _log_tool_failures(args.verbose)
    serve_tools(
        view,
        name=args.name or _module_name(args.module),
        http=args.http,
        allow_approval_tools=args.allow_approval_tools,
        include_error_details=args.include_error_details,
        tool_guardrails=settings.tool_guardrails,
    )
    return 0


NOT_SERVED = (
    "input_guardrails",
    "output_guardrails",
    "handoffs",
    "after_untrusted",
    "capabilities",
)
"""A tools module's settings that judge or steer a conversation, which a served call does
not have: ``tooldeck mcp serve`` refuses to start with them (only ``tool_guardrails``
and ``@tool(guardrails=...)`` judge served calls; a capability's hooks are for runs)."""
_ONE_CALL = (
    "a served call is one call, not a conversation: no prompt or answer to judge, no agent "
    "to hand it to, no untrusted content read before it"
)


class _OneLine(logging.Formatter):
    """A served tool's failure as one line: no traceback, and not the exception's text
    (which may hold what clients are not told), unless ``-v``."""

    def format(self, record: logging.LogRecord) -> str:
        error = record.exc_info[1] if record.exc_info else None
        raised = f": {type(error).__name__}" if error is not None else ""
        shown = "its exception and traceback" if error is not None else "more"
        return f"tooldeck mcp serve: {record.getMessage()}{raised} (-v shows {shown})"


def _log_tool_failures(verbose: bool) -> None:
    """Where ``tooldeck mcp serve`` reports a tool that raised: stderr, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("tooldeck mcp serve: %(message)s") if verbose else _OneLine()
    )
    served = logging.getLogger("tooldeck.serve.mcp")
    served.addHandler(handler)
    served.propagate = False  # the MCP SDK's own handler would show it again


def _module_name(target: str) -> str:
    where = target.partition(":")[0]
    return Path(where).stem if where.endswith(".py") else where


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__
