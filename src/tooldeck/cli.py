"""The ``tooldeck`` command: run the demo, run a prompt on tools from a module, list tools.

    tooldeck demo ["PROMPT"] [--model MODEL]
    tooldeck run "PROMPT" --tools package.module[:attr] [--model MODEL] [--toolset NAME]
        [--tool-choice auto|required|none|NAME] [--max-rounds N] [--instructions TEXT]
    tooldeck tools package.module[:attr] [--toolset NAME] [--json]

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
from collections.abc import Sequence
from typing import Any

from tooldeck._cli_display import Console, RunDisplay, show_specs
from tooldeck.errors import RunStopped, ToolDeckError
from tooldeck.events import FinalAnswer
from tooldeck.loop import Agent
from tooldeck.models.base import ModelSettings
from tooldeck.models.resolve import resolve_model
from tooldeck.policy import Limits
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.registry import ToolRegistry, ToolView


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
    run.add_argument("--max-rounds", type=int, default=10, help="model turns at most")
    run.add_argument(
        "--tool-choice",
        default="auto",
        metavar="CHOICE",
        help="first turn: auto, required (must call a tool), none, or a tool's name",
    )
    run.set_defaults(handler=_run)

    tools = commands.add_parser("tools", help="print the tool specs a model would see")
    tools.add_argument("module", metavar="MODULE[:ATTR]", help=_TOOLS_HELP)
    tools.add_argument("--toolset", action="append", metavar="NAME", help="only tools in NAME")
    tools.add_argument("--json", action="store_true", help="print the specs as JSON")
    tools.set_defaults(handler=_tools)
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
    for prompt in prompts:
        _stream(agent, prompt, console)
    return 0


def _run(args: argparse.Namespace) -> int:
    view = load_tools(args.tools, args.toolset)
    if args.max_rounds < 1:
        raise CliError(f"--max-rounds must be at least 1, got {args.max_rounds}")
    agent: Agent[None] = Agent(
        resolve_model(args.model),
        view,
        instructions=args.instructions,
        settings=ModelSettings(tool_choice=args.tool_choice),
        limits=Limits(max_rounds=args.max_rounds),
    )
    _stream(agent, args.prompt, Console())
    return 0


def _tools(args: argparse.Namespace) -> int:
    view = load_tools(args.module, args.toolset)
    if args.json:
        print(json.dumps([spec.model_dump() for spec in view.specs], indent=2, ensure_ascii=False))
    else:
        show_specs(Console(), view.specs)
    return 0


def _stream(agent: Agent[None], prompt: str, console: Console) -> None:
    console.line("")
    console.line(f"user: {prompt}", "bold")
    display = RunDisplay(console, agent.model.name)
    started = time.perf_counter()

    async def drive() -> None:
        try:
            async for event in agent.stream(prompt):
                display.show(event)
                if isinstance(event, FinalAnswer):
                    display.summary(event.result, time.perf_counter() - started)
        finally:
            display.close()

    try:
        asyncio.run(drive())
    except RunStopped as stopped:
        raise CliError(f"the run stopped without an answer: {stopped}") from stopped


def load_tools(target: str, toolsets: Sequence[str] | None = None) -> ToolView:
    """The tools named by ``package.module`` (its @tool functions) or ``package.module:attr``."""
    module_name, _, attribute = target.partition(":")
    if not module_name:
        raise CliError(f"no module in {target!r}; write package.module or package.module:attr")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules beside you import
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise CliError(f"cannot import {module_name!r}: {error}") from error
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
