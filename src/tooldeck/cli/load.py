"""What a command names on its command line, loaded: tools, a type, a deps factory.

The loading itself is ``tooldeck.tools.modules`` (case files of ``tooldeck eval`` name
tools the same way), and a module's settings beside its tools (guardrails, handoffs, its
untrusted policy) are read by ``tooldeck.run.module_settings``, for every command that
names a module: ``run``, ``chat``, ``web``, ``mcp serve``, ``eval``. Here their errors
become the command's: a target written wrong is a usage error, one that cannot be loaded a
failure of one line (the traceback with ``-v``).
A Toolset's tools (an MCP server's) go where function tools go: they are loaded (the server
started) on the event loop the command runs on, and closed when the command ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tooldeck.cli.args import CliError, UsageError
from tooldeck.run.module_settings import ModuleSettings, module_settings
from tooldeck.tools import modules
from tooldeck.tools.modules import exception_text, is_own_code, raised_at
from tooldeck.tools.registry import ToolRegistry, ToolView

__all__ = [
    "ModuleSettings",
    "exception_text",
    "is_own_code",
    "load_object",
    "load_tools",
    "load_with_settings",
    "loaded_tools",
    "raised_at",
    "refuse_unhonoured",
]


@contextmanager
def command_errors() -> Iterator[None]:
    """A target's errors as the command's own (usage: exit 2; the rest: exit 1)."""
    try:
        yield
    except modules.TargetUsageError as error:
        raise UsageError(str(error)) from error.__cause__
    except modules.TargetError as error:
        raise CliError(str(error)) from error.__cause__


def load_tools(target: str, toolsets: Sequence[str] | None = None) -> ToolView:
    """The tools named by ``target`` (see ``tooldeck.tools.modules.tool_registry``), only
    those of ``toolsets`` when given; a Toolset's are listed, and its connection closed (its
    tools connect again where they are called)."""
    return load_with_settings(target, toolsets)[0]


def load_with_settings(
    target: str, toolsets: Sequence[str] | None = None
) -> tuple[ToolView, ModuleSettings]:
    """``load_tools``, and the settings the module defines beside its tools."""
    with asyncio.Runner() as runner, loaded_tools(target, toolsets, runner) as loaded:
        return loaded


@contextmanager
def loaded_tools(
    target: str | None, toolsets: Sequence[str] | None, runner: asyncio.Runner
) -> Iterator[tuple[ToolView, ModuleSettings]]:
    """The tools named by ``target`` (none when None), Toolsets' tools loaded on
    ``runner``'s loop and closed there when the block ends; and the settings the module
    defines beside its tools (``ModuleSettings``: guardrails, handoffs, untrusted policy)."""
    if target is None:
        if toolsets:
            raise UsageError("--toolset picks tools of --tools: give -t/--tools too")
        yield ToolView.of(()), ModuleSettings()
        return
    with command_errors():
        registry, settings = module_settings(target)
    try:
        yield runner.run(_view(registry, toolsets)), settings
    finally:
        if registry.toolsets_registered:
            runner.run(registry.aclose())


async def _view(registry: ToolRegistry, toolsets: Sequence[str] | None) -> ToolView:
    every = await registry.load_view()  # connects to the servers, refuses duplicate names
    if not toolsets:
        return every
    try:
        return await registry.load_view(toolsets)  # the Toolsets' lists, as just loaded
    except ValueError as error:  # an unknown toolset name
        raise UsageError(f"--toolset: {error}") from error


def refuse_unhonoured(
    settings: ModuleSettings, door: str, unhonoured: Collection[str], why: str
) -> None:
    """A usage error naming the module's settings of ``unhonoured`` that ``door`` cannot
    honour, and ``why``, before anything runs."""
    with command_errors():
        settings.refuse_unhonoured(door, unhonoured, why)


def load_object(target: str, option: str) -> Any:
    """The object ``module:attr`` names (for ``--output-schema``, ``--deps``)."""
    with command_errors():
        return modules.load_object(target, option)
