"""``tooldeck run``: one prompt on the tools of a module, shown as it happens.

The arguments are checked before the model is asked anything (a wrong one is a usage
error, exit status 2); the prompt comes from the argument, stdin, or both (as ``llm``:
piped text first, then the argument).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from tooldeck.cli.approve import Approver, reachable_tools
from tooldeck.cli.args import (
    ENVIRONMENT,
    EXIT_STATUSES,
    CliError,
    Parser,
    UsageError,
    did_you_mean,
    dollars,
    positive_int,
    positive_seconds,
    whole_number,
)
from tooldeck.cli.exec import Form, Run, execute
from tooldeck.cli.load import Loaded, exception_text, load_object, loaded_tools, raised_at
from tooldeck.cli.model import build_model
from tooldeck.cli.runlog import logging_runs
from tooldeck.cli.sessions import open_session, session_options
from tooldeck.models.base import Model, ModelSettings
from tooldeck.run.agent import Agent
from tooldeck.run.capabilities import Capability
from tooldeck.run.output import OutputMode
from tooldeck.run.policy import Limits
from tooldeck.tools.registry import ToolRegistry, ToolView, deferred

NO_LOG_HELP = "do not record this run in the run log (tooldeck logs)"
TOOLS_HELP = (
    "a module (package.module) or a file (path/to/tools.py): the @tool functions it defines "
    "(or names in __all__); add :ATTR to name a ToolRegistry, a list of tools or one tool"
)
_CHOICES = ("auto", "required", "none")


def agent_options(terminal: bool = True, without_tools: str = "no tools") -> Parser:
    """The options that build an agent, shared by ``run``, ``chat`` and ``web`` (a parent
    parser); ``terminal``: with those of a run shown in a terminal (approvals, streaming).
    ``without_tools`` says what the command does without ``--tools``."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "-t",
        "--tools",
        metavar="MODULE[:ATTR]|FILE.py",
        help=f"{TOOLS_HELP} (none: {without_tools})",
    )
    parent.add_argument("--toolset", action="append", metavar="NAME", help="only tools in NAME")
    _searching(parent)
    parent.add_argument("--no-log", action="store_true", help=NO_LOG_HELP)
    system = parent.add_mutually_exclusive_group()
    system.add_argument(
        "-s", "--system", "--instructions", dest="system", metavar="TEXT", help="system prompt"
    )
    system.add_argument(
        "--instructions-file", metavar="PATH", help="read the system prompt from a file"
    )
    _bounds(parent)
    parent.add_argument(
        "--max-cost",
        type=dollars,
        metavar="USD",
        help="stop before a request once the run has spent USD dollars (stop: max_cost)",
    )
    parent.add_argument(
        "--tool-choice",
        default="auto",
        metavar="CHOICE",
        help="auto (the default) or none (no tool calls): every model request; required "
        "(must call a tool) or a tool's name: the run's first request only, auto after it",
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
        "--after-untrusted",
        choices=("allow", "ask", "refuse"),
        default="allow",
        help="once an untrusted tool's result is read: ask before, or refuse, the calls of "
        "tools with side effects or sensitive ones (default: allow, or the tools module's "
        "after_untrusted; the stricter wins)",
    )
    parent.add_argument(
        "--deps",
        metavar="MODULE:FACTORY",
        help="the run's deps (RunContext.deps): what FACTORY() returns",
    )
    if terminal:
        _terminal(parent)
    return parent


def _terminal(parent: Parser) -> None:
    """The options of a run shown in a terminal: its approvals, its streaming."""
    parent.add_argument(
        "--approve", action="append", default=[], metavar="TOOL", help="approve TOOL's calls"
    )
    parent.add_argument("--yes", action="store_true", help="approve every call without asking")
    parent.add_argument(
        "--no-stream", action="store_true", help="do not stream: show each model turn whole"
    )


def _searching(parent: Parser) -> None:
    """The options of tool search: deferring the module's tools, searching them."""
    parent.add_argument(
        "--tool-search",
        action="store_true",
        help="give the model search_tools, which finds the module's deferred tools "
        "(defer_loading=True, or --defer-tools-after) and shows them from the next turn on",
    )
    parent.add_argument(
        "--defer-tools-after",
        type=whole_number,
        metavar="N",
        help="show the module's first N tools with every request and defer the rest until "
        "search_tools finds them (0: defer them all; implies --tool-search)",
    )


def _bounds(parent: Parser) -> None:
    """The options that bound a run: its rounds, each request's tokens, its time."""
    parent.add_argument(
        "--max-rounds",
        type=positive_int,
        default=10,
        help="rounds (model requests) at most (default 10)",
    )
    parent.add_argument(
        "--max-tokens",
        type=positive_int,
        metavar="N",
        help="output tokens per model request at most (default: the model's own limit)",
    )
    parent.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="the run's time at most, waiting for your approval aside; the run stops at it",
    )


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
    typed_answer_options(run, "printed as JSON")
    run.set_defaults(handler=run_command)


def typed_answer_options(parser: Parser, shown: str) -> None:
    """``--output-schema`` and ``--output-mode`` (``run``, ``web``); ``shown``: how the
    typed answer is shown."""
    parser.add_argument(
        "--output-schema",
        metavar="MODULE:TYPE",
        help=f"a typed answer: the model's answer is validated as TYPE and {shown}",
    )
    parser.add_argument(
        "--output-mode",
        choices=["auto", "native", "tool", "prompted"],
        help="how the typed answer is asked for: the server's structured output (native), a "
        "final_answer tool (tool), the schema in the instructions (prompted); auto (the "
        "default) picks native, and prompted where the server refuses it",
    )


def typed_answer(args: argparse.Namespace) -> tuple[Any, OutputMode]:
    """The type ``--output-schema`` names (None: none) and ``--output-mode``, checked."""
    output_type = load_object(args.output_schema, "--output-schema") if args.output_schema else None
    if args.output_mode is not None and output_type is None:
        raise UsageError(
            f"--output-mode {args.output_mode} applies to a typed answer: give "
            "--output-schema MODULE:TYPE too"
        )
    return output_type, args.output_mode or "auto"


def run_command(args: argparse.Namespace) -> int:
    """Run ``tooldeck run``: one prompt carried to its end and shown; the exit status."""
    prompt = read_prompt(args.prompt, sys.stdin)
    output_type, output_mode = typed_answer(args)
    form: Form = "json" if args.json else "plain" if args.no_display else "display"
    with asyncio.Runner() as runner, loaded_tools(args.tools, args.toolset, runner) as loaded:
        run = prepare(args, loaded, prompt, output_type, output_mode)
        with logging_runs(run.agent, args.no_log):
            status, _ = execute(run, form, runner=runner)
    return status


def prepare(
    args: argparse.Namespace,
    loaded: Loaded,
    prompt: str,
    output_type: Any = None,
    output_mode: OutputMode = "auto",
) -> Run:
    """The run the arguments describe on the tools ``loaded`` (with the settings their
    module defines: guardrails, handoffs, its untrusted policy), every argument checked
    first."""
    view = defer_tools(args, loaded.view)
    agent = build_agent(args, loaded, output_type, output_mode)
    check_terminal(args, view, agent)
    return Run(
        agent,
        prompt,
        session=open_session(args),
        deps=build_deps(args.deps) if args.deps else None,
        approver=Approver(args.approve, args.yes, tools=view),
        deltas=not args.no_stream,
        output_type=output_type,
        verbose=args.verbose,
    )


def build_agent(
    args: argparse.Namespace,
    loaded: Loaded,
    output_type: Any = None,
    output_mode: OutputMode = "auto",
) -> Agent[Any, Any]:
    """The agent the options of ``agent_options`` and ``model_options`` describe, on the
    tools ``loaded`` and with every setting their module defines: ``run``, ``chat`` and
    ``web`` build theirs here, so each honours what the others do. A module's Toolsets are
    followed when ``loaded`` can (a changed MCP tool list is read again before a turn)."""
    module = loaded.settings
    view = defer_tools(args, loaded.view)
    check_tools(args, view, output_type)
    instructions = _instructions(args)
    model = build_model(args.model, args.base_url, args.api_key_env)
    if _final_answer_tool(output_type, output_mode, model) and args.tool_choice == "none":
        raise UsageError(
            f"--tool-choice none cannot give the typed answer --output-schema asks for: "
            f"{model.name} is asked for it with the final_answer tool, which 'none' forbids "
            "it to call; leave --tool-choice out (auto), or use a model with structured "
            "output (openai:..., openai-chat:...)"
        )
    return Agent(
        model,
        _followed(args, loaded, view),
        instructions=instructions,
        settings=ModelSettings(
            tool_choice=args.tool_choice, max_tokens=args.max_tokens, prices=args.price
        ),
        limits=Limits(
            max_rounds=args.max_rounds, max_duration_s=args.timeout, max_cost_usd=args.max_cost
        ),
        on_limit="final_answer" if args.on_limit == "final-answer" else "raise",
        include_error_details=args.error_details,
        output_type=output_type,
        output_mode=output_mode,
        input_guardrails=module.input_guardrails,
        output_guardrails=module.output_guardrails,
        tool_guardrails=module.tool_guardrails,
        handoffs=module.handoffs,
        after_untrusted=module.untrusted_policy(args.after_untrusted),
        capabilities=searching(args, view, module.capabilities),
    )


def _followed(args: argparse.Namespace, loaded: Loaded, view: ToolView) -> ToolView | ToolRegistry:
    """``view``, or for a module with Toolsets the same tools read again when one changes."""
    if loaded.following is None:
        return view
    return ToolRegistry([loaded.following.shaped(partial(defer_tools, args), view)])


def defer_tools(args: argparse.Namespace, view: ToolView) -> ToolView:
    """``view`` with its tools past the first ``--defer-tools-after`` deferred (the module's
    own deferred tools stay deferred); as it is without the option."""
    after = getattr(args, "defer_tools_after", None)
    if after is None:
        return view
    if args.tools is None:
        raise UsageError("--defer-tools-after defers tools of -t/--tools: give -t/--tools too")
    shown = list(view.dispatch.values())
    held = [deferred(entry) for entry in shown[after:]]
    return ToolView.of((*shown[:after], *held, *view.deferred.values()))


def searching(
    args: argparse.Namespace, view: ToolView, capabilities: tuple[Capability, ...]
) -> tuple[Capability, ...]:
    """The module's capabilities, with ``ToolSearch()`` for ``--tool-search`` (or
    ``--defer-tools-after``) unless the module gives its own ToolSearch."""
    after = getattr(args, "defer_tools_after", None)
    if not getattr(args, "tool_search", False) and after is None:
        return capabilities
    if args.tools is None:
        raise UsageError("--tool-search finds deferred tools of -t/--tools: give -t/--tools too")
    if not view.deferred and after is not None:
        raise UsageError(
            f"--defer-tools-after {after} defers none of the {len(view.dispatch)} tools of "
            f"{args.tools!r}: give a smaller N"
        )
    if not view.deferred:
        raise UsageError(
            f"--tool-search finds deferred tools, and {args.tools!r} has none: give "
            "--defer-tools-after N, or mark tools @tool(defer_loading=True) in the module"
        )
    from tooldeck.search import ToolSearch  # imported only for a run that searches

    if any(isinstance(each, ToolSearch) for each in capabilities):
        return capabilities  # the module's own, with its strategy
    try:
        return (*capabilities, ToolSearch())
    except ImportError as error:  # bm25s is not installed
        raise CliError(str(error)) from error


def _final_answer_tool(output_type: Any, output_mode: OutputMode, model: Model) -> bool:
    """Whether the typed answer is asked for with the final_answer tool."""
    if output_type is None or output_mode == "prompted":
        return False
    return output_mode == "tool" or not model.native_output


def check_terminal(args: argparse.Namespace, view: ToolView, agent: Agent[Any, Any]) -> None:
    """Refuse what a run in the terminal cannot do: external tools' calls (the application
    runs them; the web page asks for their results), an ``--approve`` of no tool (of the
    module, or of an agent it may hand the conversation to)."""
    external = [entry.name for entry in view.entries if entry.external]
    if external:
        raise CliError(
            f"{args.tools!r} has external tools ({', '.join(map(repr, external))}): the "
            f"application runs their calls, so {args.prog} cannot; leave them out (--toolset)"
        )
    for name in args.approve:
        if args.tools is None:
            raise UsageError(f"--approve {name!r}: there are no tools without -t/--tools")
        names = reachable_tools(agent, view)
        if name not in names:
            known = did_you_mean(name, names)
            raise UsageError(f"--approve {name!r} is no tool of {args.tools!r}{known}")


def check_tools(args: argparse.Namespace, view: ToolView, output_type: Any = None) -> None:
    """Refuse a ``--tool-choice`` that is no tool of ``view``."""
    given = args.tools is not None
    choice = args.tool_choice
    if choice in view.deferred:
        raise UsageError(
            f"--tool-choice {choice!r} is deferred (not shown until search_tools finds it): "
            "leave it among the first --defer-tools-after N tools, or choose another"
        )
    if choice not in _CHOICES and choice not in view.names:
        tools = f"a tool of {args.tools!r}" if given else "a tool (there are none without -t)"
        raise UsageError(
            f"--tool-choice {choice!r} is not auto, required, none or {tools}"
            + did_you_mean(choice, [*_CHOICES, *view.names])
        )
    if choice == "required" and not view.entries and output_type is None:
        raise UsageError("--tool-choice required needs tools to call: give -t/--tools")


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
