"""``tooldeck run``: one prompt on the tools of a module, shown as it happens.

The arguments are checked before the model is asked anything (a wrong one is a usage
error, exit status 2); the prompt comes from the argument, stdin, or both (as ``llm``:
piped text first, then the argument).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from tooldeck.cli.approve import Approver
from tooldeck.cli.args import (
    ENVIRONMENT,
    EXIT_STATUSES,
    CliError,
    Parser,
    UsageError,
    did_you_mean,
    positive_int,
)
from tooldeck.cli.exec import Form, Run, execute
from tooldeck.cli.load import exception_text, load_object, load_tools_and_settings, raised_at
from tooldeck.cli.model import build_model
from tooldeck.cli.runlog import logging_runs
from tooldeck.cli.sessions import open_session, session_options
from tooldeck.models.base import ModelSettings
from tooldeck.run.agent import Agent
from tooldeck.run.policy import Limits
from tooldeck.tools.registry import ToolView

NO_LOG_HELP = "do not record this run in the run log (tooldeck logs)"
TOOLS_HELP = (
    "a module (package.module) or a file (path/to/tools.py): the @tool functions it defines "
    "(or names in __all__); add :ATTR to name a ToolRegistry, a list of tools or one tool"
)
_CHOICES = ("auto", "required", "none")


def agent_options() -> Parser:
    """The options that build an agent, shared by ``run`` and ``chat`` (a parent parser)."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "-t", "--tools", required=True, metavar="MODULE[:ATTR]|FILE.py", help=TOOLS_HELP
    )
    parent.add_argument("--toolset", action="append", metavar="NAME", help="only tools in NAME")
    parent.add_argument("--no-log", action="store_true", help=NO_LOG_HELP)
    system = parent.add_mutually_exclusive_group()
    system.add_argument(
        "-s", "--system", "--instructions", dest="system", metavar="TEXT", help="system prompt"
    )
    system.add_argument(
        "--instructions-file", metavar="PATH", help="read the system prompt from a file"
    )
    parent.add_argument(
        "--max-rounds",
        type=positive_int,
        default=10,
        help="rounds (model requests) at most (default 10)",
    )
    parent.add_argument(
        "--tool-choice",
        default="auto",
        metavar="CHOICE",
        help="first turn: auto, required (must call a tool), none, or a tool's name",
    )
    parent.add_argument(
        "--on-limit",
        choices=("raise", "final-answer"),
        default="raise",
        help="at a limit: stop (raise, the default) or ask once more for an answer without tools",
    )
    parent.add_argument(
        "--error-details",
        action="store_true",
        help="tell the model a failing tool's exception (it always shows here)",
    )
    parent.add_argument(
        "--approve", action="append", default=[], metavar="TOOL", help="approve TOOL's calls"
    )
    parent.add_argument("--yes", action="store_true", help="approve every call without asking")
    parent.add_argument(
        "--after-untrusted",
        choices=("allow", "ask", "refuse"),
        default="allow",
        help="once an untrusted tool's result is read: ask before, or refuse, the calls of "
        "tools with side effects or sensitive ones (default: allow)",
    )
    parent.add_argument(
        "--deps",
        metavar="MODULE:FACTORY",
        help="the run's deps (RunContext.deps): what FACTORY() returns",
    )
    parent.add_argument(
        "--no-stream", action="store_true", help="do not stream: show each model turn whole"
    )
    return parent


def add_run_parser(commands: Any, parents: list[Parser]) -> None:
    """Add ``tooldeck run`` and its options to the command parser."""
    run = commands.add_parser(
        "run",
        parents=[*parents, agent_options(), session_options()],
        help="run a prompt on the tools of a module or file",
        description="Run a prompt on the tools of a module or file, showing each step.",
        epilog=f"{EXIT_STATUSES}\n\n{ENVIRONMENT}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "prompt",
        nargs="?",
        help="what to ask; '-' reads it from stdin; piped text comes before the prompt",
    )
    form = run.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the run as JSON for scripts")
    form.add_argument(
        "--no-display", action="store_true", help="print only the answer (totals on stderr)"
    )
    run.add_argument(
        "--output-schema",
        metavar="MODULE:TYPE",
        help="a typed answer: the model's answer is validated as TYPE and printed as JSON",
    )
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Run ``tooldeck run``: one prompt carried to its end and shown; the exit status."""
    prompt = read_prompt(args.prompt, sys.stdin)
    output_type = load_object(args.output_schema, "--output-schema") if args.output_schema else None
    run = prepare(args, prompt, output_type)
    form: Form = "json" if args.json else "plain" if args.no_display else "display"
    with logging_runs(run.agent, args.no_log):
        status, _ = execute(run, form)
    return status


def prepare(args: argparse.Namespace, prompt: str, output_type: Any = None) -> Run:
    """The run the arguments describe, every argument checked first."""
    view, settings = load_tools_and_settings(args.tools, args.toolset)
    check_tools(args, view)
    instructions = _instructions(args)
    agent: Agent[Any, Any] = Agent(
        build_model(args.model, args.base_url, args.api_key_env),
        view,
        instructions=instructions,
        settings=ModelSettings(tool_choice=args.tool_choice),
        limits=Limits(max_rounds=args.max_rounds),
        on_limit="final_answer" if args.on_limit == "final-answer" else "raise",
        include_error_details=args.error_details,
        output_type=output_type,
        after_untrusted=args.after_untrusted,
        **settings,
    )
    return Run(
        agent,
        prompt,
        session=open_session(args),
        deps=build_deps(args.deps) if args.deps else None,
        approver=Approver(args.approve, args.yes),
        deltas=not args.no_stream,
        output_type=output_type,
        verbose=args.verbose,
    )


def check_tools(args: argparse.Namespace, view: ToolView) -> None:
    """Refuse what cannot run from here, and names that are no tool of ``view``."""
    external = [name for name, entry in view.dispatch.items() if entry.external]
    if external:
        raise CliError(
            f"{args.tools!r} has external tools ({', '.join(map(repr, external))}): the "
            "application runs their calls, so tooldeck run cannot; leave them out (--toolset)"
        )
    for name in args.approve:
        if name not in view.names:
            known = did_you_mean(name, view.names)
            raise UsageError(f"--approve {name!r} is no tool of {args.tools!r}{known}")
    choice = args.tool_choice
    if choice not in _CHOICES and choice not in view.names:
        raise UsageError(
            f"--tool-choice {choice!r} is not auto, required, none or a tool of {args.tools!r}"
            + did_you_mean(choice, [*_CHOICES, *view.names])
        )


def _instructions(args: argparse.Namespace) -> str:
    if args.instructions_file is None:
        return str(args.system or "")
    try:
        return Path(args.instructions_file).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(
            f"--instructions-file {args.instructions_file!r}: {error.strerror or error}"
        ) from error


def build_deps(target: str) -> Any:
    """What ``module:factory`` returns when called (the run's deps)."""
    factory = load_object(target, "--deps")
    if not callable(factory):
        raise UsageError(f"--deps {target!r} is a {type(factory).__name__}, not a factory")
    try:
        return factory()
    except Exception as error:
        place = raised_at(error)
        where = f" ({place})" if place else ""
        raise CliError(
            f"--deps {target!r} raised{where}: {exception_text(error)} (-v shows the traceback)"
        ) from error


def read_prompt(argument: str | None, stdin: TextIO) -> str:
    """The prompt: the argument; stdin for ``-``; piped text, then the argument."""
    if argument == "-":
        prompt = stdin.read()
    elif stdin.isatty():
        prompt = argument or ""
    else:
        piped = stdin.read().rstrip("\n")
        prompt = "\n\n".join(part for part in (piped, argument) if part)
    if not prompt.strip():
        raise UsageError("the prompt is empty: give it as an argument, or pipe it on stdin")
    return prompt
