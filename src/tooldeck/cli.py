"""The ``tooldeck`` command: run the demo, run a prompt on tools from a module, list tools.

    tooldeck demo ["PROMPT"] [--model MODEL]
    tooldeck run "PROMPT" --tools package.module[:attr] [--model MODEL] [--toolset NAME]
        [--tool-choice auto|required|none|NAME] [--max-rounds N] [--instructions TEXT]
        [--approve TOOL]... [--yes]
    tooldeck tools package.module[:attr] [--toolset NAME] [--json]
    tooldeck mcp serve package.module[:attr] [--toolset NAME] [--http HOST:PORT]
        [--allow-approval-tools] [--include-error-details] [--name NAME]
    tooldeck logs [-n N] [--tool NAME] [--errors] [--session ID] [--json]
    tooldeck logs show RUN_ID | tooldeck logs path

``run`` and ``demo`` record each run in the run log (``--no-log``: not this one); the log
is ``logs.db`` in ``$TOOLDECK_HOME`` or the user's data directory.

Errors (a module that does not import, a model file that is missing, a hosted model with
no key) are one line on stderr and exit status 1; usage errors exit with 2.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from pydantic import TypeAdapter

from tooldeck._cli_approve import Approver
from tooldeck._cli_display import Console, RunDisplay, show_specs
from tooldeck._cli_logs import add_logs_parser
from tooldeck.contracts import RunResult
from tooldeck.errors import RunStopped, ToolDeckError
from tooldeck.events import Event, FinalAnswer
from tooldeck.loop import Agent
from tooldeck.models.base import ModelSettings
from tooldeck.models.resolve import resolve_model
from tooldeck.policy import Limits
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.registry import ToolEntry, ToolRegistry, ToolView


class CliError(Exception):
    """A problem to report as one line, without a traceback."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tooldeck`` console script; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        status: int = args.handler(args)
    except KeyboardInterrupt:
        print("tooldeck: interrupted", file=sys.stderr)
        return 130
    except (CliError, ToolDeckError, ValueError, OSError) as error:
        print(f"tooldeck: error: {_one_line(error)}", file=sys.stderr)
        return 1
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tooldeck", description="Run LLM agents that call Python functions as tools."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo", help="run the demo agent (add_numbers, get_weather) offline on the local model"
    )
    demo.add_argument("prompt", nargs="*", help="what to ask (default: two sample questions)")
    demo.add_argument("--model", default="local", help="model string (default: local)")
    demo.set_defaults(handler=_demo)

    run = commands.add_parser("run", help="run a prompt on the tools of a Python module")
    run.add_argument("prompt", help="what to ask")
    run.add_argument("--tools", required=True, metavar="MODULE[:ATTR]", help=_TOOLS_HELP)
    run.add_argument("--model", default="local", help="model string (default: local)")
    run.add_argument("--toolset", action="append", metavar="NAME", help="only tools in NAME")
    run.add_argument("--instructions", default="", help="the system prompt")
    run.add_argument("--max-rounds", type=int, default=10, help="rounds (model requests) at most")
    run.add_argument(
        "--tool-choice",
        default="auto",
        metavar="CHOICE",
        help="first turn: auto, required (must call a tool), none, or a tool's name",
    )
    run.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="TOOL",
        help="approve TOOL's calls without asking (repeatable)",
    )
    run.add_argument("--yes", action="store_true", help="approve every call without asking")
    run.add_argument(
        "--output-schema",
        metavar="MODULE:TYPE",
        help="a typed answer: the model's answer is validated as TYPE and printed as JSON",
    )
    run.set_defaults(handler=_run)

    tools = commands.add_parser("tools", help="print the tool specs a model would see")
    tools.add_argument("module", metavar="MODULE[:ATTR]", help=_TOOLS_HELP)
    tools.add_argument("--toolset", action="append", metavar="NAME", help="only tools in NAME")
    tools.add_argument("--json", action="store_true", help="print the specs as JSON")
    tools.set_defaults(handler=_tools)

    mcp = commands.add_parser("mcp", help="Model Context Protocol: serve tools to MCP clients")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", metavar="COMMAND", required=True)
    serve = mcp_commands.add_parser(
        "serve", help="serve a module's tools as an MCP server (stdio, or HTTP with --http)"
    )
    serve.add_argument("module", metavar="MODULE[:ATTR]", help=_TOOLS_HELP)
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
    serve.set_defaults(handler=_mcp_serve)
    add_logs_parser(commands)
    for command in (demo, run):
        command.add_argument(
            "--no-log", action="store_true", help="do not record this run in the run log"
        )
    return parser


_TOOLS_HELP = (
    "a module's tools: every @tool function in it, or the ToolRegistry or list named by ATTR"
)


def _demo(args: argparse.Namespace) -> int:
    from tooldeck.demo import DEMO_PROMPTS, demo_agent

    console = Console()
    agent = demo_agent(resolve_model(args.model))
    prompts = [" ".join(args.prompt)] if args.prompt else list(DEMO_PROMPTS)
    console.line(
        f"tooldeck demo on {agent.model.name}: tools add_numbers, get_weather "
        "(the first turn must call a tool)",
        "bold",
    )
    with _logging(agent, args.no_log):
        for prompt in prompts:
            _stream(agent, prompt, console)
    return 0


def _run(args: argparse.Namespace) -> int:
    view = load_tools(args.tools, args.toolset)
    if args.max_rounds < 1:
        raise CliError(f"--max-rounds must be at least 1, got {args.max_rounds}")
    external = [name for name, entry in view.dispatch.items() if entry.external]
    if external:
        raise CliError(
            f"{args.tools!r} has external tools ({', '.join(map(repr, external))}): the "
            "application runs their calls, so tooldeck run cannot; leave them out (--toolset)"
        )
    unknown = sorted(set(args.approve) - set(view.names))
    if unknown:
        raise CliError(f"--approve names no tool of {args.tools!r}: {', '.join(unknown)}")
    output_type = load_type(args.output_schema) if args.output_schema else None
    agent: Agent[None, Any] = Agent(
        resolve_model(args.model),
        view,
        instructions=args.instructions,
        settings=ModelSettings(tool_choice=args.tool_choice),
        limits=Limits(max_rounds=args.max_rounds),
        output_type=output_type,
    )
    with _logging(agent, args.no_log):
        result = _stream(agent, args.prompt, Console(), Approver(args.approve, args.yes))
    if output_type is not None:
        print(TypeAdapter(output_type).dump_json(result.output, indent=2).decode())
    return 0


def _tools(args: argparse.Namespace) -> int:
    view = load_tools(args.module, args.toolset)
    if args.json:
        described = [
            {**entry.spec.model_dump(), **_how_it_runs(entry)} for entry in view.dispatch.values()
        ]
        print(json.dumps(described, indent=2, ensure_ascii=False))
    else:
        show_specs(Console(), view)
    return 0


def _how_it_runs(entry: ToolEntry) -> dict[str, object]:
    rule = entry.options.requires_approval
    approval = rule if isinstance(rule, bool) else "per call"
    return {"external": entry.external, "requires_approval": approval}


def _mcp_serve(args: argparse.Namespace) -> int:
    view = load_tools(args.module, args.toolset)
    try:
        from tooldeck.serve.mcp import serve_tools
    except ImportError as error:
        raise CliError(str(error)) from error
    serve_tools(
        view,
        name=args.name or args.module.partition(":")[0],
        http=args.http,
        allow_approval_tools=args.allow_approval_tools,
        include_error_details=args.include_error_details,
    )
    return 0


def _stream(
    agent: Agent[None, Any], prompt: str, console: Console, approver: Approver | None = None
) -> RunResult[Any]:
    """Run ``prompt`` with the live display; ask for approvals when the run pauses."""
    console.line("")
    console.line(f"user: {prompt}", "bold")
    display = RunDisplay(console, agent.model.name)
    started = time.perf_counter()
    with asyncio.Runner() as runner:
        result = runner.run(_show(agent.stream(prompt, deltas=True), display))
        while result.stop_reason == "paused" and approver is not None:
            decisions = approver.decide(result.pending)
            if not decisions or result.checkpoint is None:
                names = ", ".join(sorted({p.call.name for p in result.pending}))
                raise CliError(f"the run waits for calls tooldeck run cannot answer: {names}")
            resumed = agent.resume_stream(result.checkpoint, decisions, deltas=True)
            result = runner.run(_show(resumed, display))
    display.summary(result, time.perf_counter() - started)
    return result


async def _show(events: AsyncIterator[Event], display: RunDisplay) -> RunResult[Any]:
    """Show the events as they come; the run's result (RunStopped becomes a CliError)."""
    result = None
    try:
        async for event in events:
            display.show(event)
            if isinstance(event, FinalAnswer):
                result = event.result
    except RunStopped as stopped:
        raise CliError(f"the run stopped without an answer: {stopped}") from stopped
    finally:
        display.close()
    if result is None:
        raise CliError("the run ended without a result")
    return result


@contextmanager
def _logging(agent: Agent[None, Any], off: bool) -> Iterator[None]:
    """Record the agent's runs in the run log (``tooldeck logs``) unless ``--no-log``.

    A log that cannot be opened or written costs a warning, never the run.
    """
    if off:
        yield
        return
    from tooldeck.runlog import RunLog, RunLogError

    try:
        log = RunLog()
    except RunLogError as error:
        _warn(f"this run is not logged: {error}")
        yield
        return
    agent.run_log = log
    try:
        yield
    finally:
        try:
            log.close()
        except RunLogError as error:
            _warn(str(error))


def _warn(text: str) -> None:
    print(f"tooldeck: warning: {' '.join(text.split())}", file=sys.stderr)


def load_tools(target: str, toolsets: Sequence[str] | None = None) -> ToolView:
    """The tools named by ``package.module`` (its @tool functions) or ``package.module:attr``."""
    module_name, _, attribute = target.partition(":")
    module = _import_module(module_name, target)
    if attribute:
        if not hasattr(module, attribute):
            raise CliError(f"module {module_name!r} has no attribute {attribute!r}")
        registry = _as_registry(vars(module)[attribute], target)
    else:
        found = [value for value in vars(module).values() if isinstance(value, FunctionTool)]
        if not found:
            raise CliError(
                f"module {module_name!r} defines no tools; decorate functions with @tool, "
                "or name a ToolRegistry or list of tools: package.module:attr"
            )
        registry = ToolRegistry(dict.fromkeys(found))
    return registry.view(toolsets) if toolsets else registry.view()


def _import_module(module_name: str, target: str) -> ModuleType:
    if not module_name:
        raise CliError(f"no module in {target!r}; write package.module or package.module:attr")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules beside you import
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise CliError(f"cannot import {module_name!r}: {error}") from error


def load_type(target: str) -> Any:
    """The type named by ``package.module:Name`` (for ``--output-schema``)."""
    module_name, _, attribute = target.partition(":")
    module = _import_module(module_name, target)
    if not attribute or not hasattr(module, attribute):
        raise CliError(f"{target!r} names no type; write package.module:Name")
    return vars(module)[attribute]


def _as_registry(value: Any, target: str) -> ToolRegistry:
    if isinstance(value, ToolRegistry):
        return value
    if isinstance(value, ToolView):
        return ToolRegistry(value.dispatch.values())
    if isinstance(value, FunctionTool):
        return ToolRegistry([value])
    if isinstance(value, list | tuple):
        return ToolRegistry(value)
    raise CliError(
        f"{target!r} is a {type(value).__name__}; expected a ToolRegistry, a list of tools "
        "or a tool"
    )


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
