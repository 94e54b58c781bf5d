"""What a command names on its command line, loaded: tools, a type, a deps factory.

The loading itself is ``tooldeck.tools.modules`` (case files of ``tooldeck eval`` name
tools the same way), and a module's settings beside its tools (guardrails, handoffs, its
untrusted policy) are read by ``tooldeck.run.module_settings``, for every command that
names a module: ``run``, ``chat``, ``web``, ``mcp serve``, ``eval``. Here their errors
become the command's: a target written wrong is a usage error, one that cannot be loaded a
failure of one line (the traceback with ``-v``).
A Toolset's tools (an MCP server's) go where function tools go: they are loaded (the server
started) on the event loop the command runs on, and closed when the command ends. While
the command runs, a module with Toolsets is followed (``ModuleTools``): an MCP server that
announces a new tool list (``notifications/tools/list_changed``) is listed again before the
next model turn, as for an ``Agent`` given the toolset itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from tooldeck.cli.args import CliError, UsageError
from tooldeck.run.module_settings import ModuleSettings, module_settings
from tooldeck.tools import modules
from tooldeck.tools.modules import exception_text, is_own_code, raised_at
from tooldeck.tools.registry import ToolEntry, ToolRegistry, Toolset, ToolView

__all__ = [
    "Loaded",
    "ModuleSettings",
    "ModuleTools",
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


class ModuleTools(Toolset):
    """A module's tools as a command shows them (``shape``: ``--defer-tools-after``), listed
    again whenever one of its Toolsets changed (an MCP server's ``tools/list_changed``):
    what ``run`` and ``chat`` give their agent when the module has Toolsets."""

    def __init__(
        self,
        registry: ToolRegistry,
        toolsets: Sequence[str] | None,
        shape: Callable[[ToolView], ToolView] | None = None,
    ) -> None:
        self._registry = registry
        self._toolsets = toolsets
        self._shape = shape
        self._stamp = registry.stamp
        self._version = 0
        self.defer_loading = False
        """Whether some of its tools are deferred (an agent then gets a ``ToolSearch``)."""

    def shaped(self, shape: Callable[[ToolView], ToolView], shown: ToolView) -> ModuleTools:
        """These tools, each list passed through ``shape``; ``shown`` is the first one."""
        twin = ModuleTools(self._registry, self._toolsets, shape)
        twin.defer_loading = bool(shown.deferred)
        return twin

    @property
    def version(self) -> int:
        stamp = self._registry.stamp
        if stamp != self._stamp:
            self._stamp = stamp
            self._version += 1
        return self._version

    async def entries(self) -> Sequence[ToolEntry]:
        """The tools as they are now: the module's own and its MCP servers' current lists,
        shaped as the command shows them (deferred past ``--defer-tools-after``)."""
        view = await _view(self._registry, self._toolsets)
        return (view if self._shape is None else self._shape(view)).entries


class Loaded(NamedTuple):
    """What a command's ``-t/--tools`` names, loaded."""

    view: ToolView
    """The tools as loaded when the command started."""
    settings: ModuleSettings
    """The settings the module defines beside its tools."""
    following: ModuleTools | None = None
    """The same tools, listed again when a Toolset changes; None when the module has no
    Toolset (or its connections are closed already)."""


def load_tools(target: str, toolsets: Sequence[str] | None = None) -> ToolView:
    """The tools named by ``target`` (see ``tooldeck.tools.modules.tool_registry``), only
    those of ``toolsets`` when given; a Toolset's are listed, and its connection closed (its
    tools connect again where they are called)."""
    return load_with_settings(target, toolsets)[0]


def load_with_settings(target: str, toolsets: Sequence[str] | None = None) -> Loaded:
    """``load_tools``, and the settings the module defines beside its tools (not followed:
    a Toolset's connection is closed here)."""
    with asyncio.Runner() as runner, loaded_tools(target, toolsets, runner) as loaded:
        return loaded._replace(following=None)


@contextmanager
def loaded_tools(
    target: str | None, toolsets: Sequence[str] | None, runner: asyncio.Runner
) -> Iterator[Loaded]:
    """The tools named by ``target`` (none when None), Toolsets' tools loaded on
    ``runner``'s loop and closed there when the block ends; the settings the module
    defines beside its tools (``ModuleSettings``: guardrails, handoffs, untrusted policy);
    and, for a module with Toolsets, the tools followed on ``runner``'s loop."""
    if target is None:
        if toolsets:
            raise UsageError("--toolset picks tools of --tools: give -t/--tools too")
        yield Loaded(ToolView.of(()), ModuleSettings())
        return
    with command_errors():
        registry, settings = module_settings(target)
    try:
        view = runner.run(_view(registry, toolsets))
        following = ModuleTools(registry, toolsets) if registry.toolsets_registered else None
        yield Loaded(view, settings, following)
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
