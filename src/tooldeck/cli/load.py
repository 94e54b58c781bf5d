"""What a command names on its command line, loaded: tools, a type, a deps factory.

The loading itself is ``tooldeck.tools.modules`` (case files of ``tooldeck eval`` name
tools the same way); here its errors become the command's: a target written wrong is a
usage error, one that cannot be loaded a failure of one line (the traceback with ``-v``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tooldeck.cli.args import CliError, UsageError
from tooldeck.tools import modules
from tooldeck.tools.modules import exception_text, is_own_code, raised_at
from tooldeck.tools.registry import ToolView

__all__ = [
    "exception_text",
    "is_own_code",
    "load_object",
    "load_tools",
    "load_tools_and_settings",
    "raised_at",
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
    those of ``toolsets`` when given."""
    return load_tools_and_settings(target, toolsets)[0]


def load_tools_and_settings(
    target: str, toolsets: Sequence[str] | None = None
) -> tuple[ToolView, dict[str, Any]]:
    """``load_tools``, and the agent settings the module defines beside its tools (its
    guardrails: ``tooldeck.tools.modules.AGENT_SETTINGS``)."""
    with command_errors():
        registry, settings = modules.tools_and_settings(target)
    if not toolsets:
        return registry.view(), settings
    try:
        return registry.view(toolsets), settings
    except ValueError as error:  # an unknown toolset name
        raise UsageError(f"--toolset: {error}") from error


def load_object(target: str, option: str) -> Any:
    """The object ``module:attr`` names (for ``--output-schema``, ``--deps``)."""
    with command_errors():
        return modules.load_object(target, option)
