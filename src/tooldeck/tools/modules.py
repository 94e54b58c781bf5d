"""Tools, types and factories named by a target: ``package.module`` or ``path/to/tools.py``.

A target names a module, with ``:attr`` to name one object in it. What the ``tooldeck``
command's ``--tools`` loads and what an evaluation case file's ``tools`` names are read
here. A module that raises while it imports is one line naming the exception and the file
and line where it was raised; ``TargetError`` carries it (its cause is the exception).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from tooldeck.errors import ToolDeckError
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.registry import ToolEntry, ToolRegistry, Toolset, ToolView

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


class TargetError(ToolDeckError, ValueError):
    """A target that cannot be loaded: no such module or file, an import that raised, an
    attribute that is not there or not tools."""


class TargetUsageError(TargetError):
    """A target written wrong (nothing was imported): no module, or no object named."""


AGENT_SETTINGS = (
    "input_guardrails",
    "output_guardrails",
    "tool_guardrails",
    "handoffs",
    "after_untrusted",
    "capabilities",
    "budget",
)
"""What a tools module may give the command's agent beside its tools, by these names: lists
of guardrails (``Agent(input_guardrails=...)`` and the others), of the agents it may hand
the conversation to (``Agent(handoffs=...)``: agents, or ``handoff(agent, ...)``), and its
untrusted-content policy (``Agent(after_untrusted=...)``), its ``capabilities``
(``Agent(capabilities=...)``); a shared ``budget``, which the
front doors refuse (they take spending limits as options). Each front door reads them
through ``tooldeck.run.module_settings``, which checks them."""


def tool_registry(target: str) -> ToolRegistry:
    """The tools named by ``target``: a module's own @tool functions and Toolsets (or those
    in its ``__all__``), or the ToolRegistry, list, tool or Toolset that ``:attr`` names.

    A Toolset's tools (an MCP server's) are not loaded here: ``await
    registry.load_view()`` connects and lists them.
    """
    return tools_and_settings(target)[0]


def tools_and_settings(target: str) -> tuple[ToolRegistry, dict[str, Any]]:
    """``tool_registry(target)``, and the agent settings its module defines
    (``AGENT_SETTINGS``: its guardrails), the module imported once."""
    module, attribute = import_target(target)
    found = vars(module)
    settings = {name: found[name] for name in AGENT_SETTINGS if name in found}
    for name, value in settings.items():
        if name not in ("after_untrusted", "budget") and not isinstance(value, list | tuple):
            what = {"handoffs": "agents or handoff(...)", "capabilities": "capabilities"}.get(
                name, "guardrails"
            )
            raise TargetError(
                f"{target!r}: {name} must be a list of {what}, got {type(value).__name__}"
            )
    return _registry(module, attribute, target), settings


def _registry(module: ModuleType, attribute: str, target: str) -> ToolRegistry:
    if attribute:
        return _as_registry(_attribute(module, attribute, target), target)
    found: list[FunctionTool[..., Any] | ToolEntry | Toolset] = [*module_tools(module)]
    found += module_toolsets(module)
    if not found:
        raise TargetError(
            f"{target!r} defines no tools; decorate functions with @tool, or name a "
            "ToolRegistry, a Toolset or a list of tools: module:attr"
        )
    return ToolRegistry({id(item): item for item in found}.values())  # each once, in order


def module_tools(module: ModuleType) -> list[FunctionTool[..., Any] | ToolEntry]:
    """The tools a module offers: those named in its ``__all__``, else the ones it made
    itself (not tools it imported from another module); an agent as a tool
    (``agent.as_tool(...)``, a ToolEntry) is one of them."""
    names = vars(module).get("__all__")
    if names is not None:
        named = [vars(module).get(n) for n in names]
        return [value for value in named if isinstance(value, FunctionTool | ToolEntry)]
    return [
        value
        for value in vars(module).values()
        if isinstance(value, ToolEntry)
        or (isinstance(value, FunctionTool) and not _imported(value, module))
    ]


def module_toolsets(module: ModuleType) -> list[Toolset]:
    """The Toolsets (MCP servers...) a module holds: those named in its ``__all__``, else
    every one it holds as a variable."""
    names = vars(module).get("__all__")
    values = [vars(module).get(n) for n in names] if names is not None else vars(module).values()
    return list(dict.fromkeys(value for value in values if isinstance(value, Toolset)))


def _imported(tool: FunctionTool[..., Any], module: ModuleType) -> bool:
    """Whether ``tool`` is an attribute of the module its function comes from (another one)."""
    if tool.fn is None:  # an external tool: made where it is found
        return False
    home = sys.modules.get(tool.fn.__module__)
    if home is None or home is module:
        return False
    return any(value is tool for value in vars(home).values())


def load_object(target: str, option: str) -> Any:
    """The object ``module:attr`` names (``option`` is what named it, for the message)."""
    module, attribute = import_target(target)
    if not attribute:
        raise TargetUsageError(f"{option} {target!r} names no object; write module:NAME")
    return _attribute(module, attribute, target)


def _attribute(module: ModuleType, attribute: str, target: str) -> Any:
    try:
        return getattr(module, attribute)  # the name typed; a module __getattr__ answers too
    except AttributeError:
        message = f"{target!r}: module {module.__name__!r} has no attribute {attribute!r}"
        raise TargetError(message) from None


def import_target(target: str) -> tuple[ModuleType, str]:
    """The module of ``module[:attr]`` or ``file.py[:attr]``, and the attribute (or "")."""
    where, colon, attribute = target.rpartition(":")
    if not colon or not attribute.isidentifier():  # no attribute (or a Windows drive's colon)
        where, attribute = target, ""
    if not where:
        raise TargetUsageError(f"no module in {target!r}; write package.module or path/to/tools.py")
    if where.endswith(".py") or "/" in where or os.sep in where:
        return _import_file(where), attribute
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules beside you import
    try:
        return importlib.import_module(where), attribute
    except ModuleNotFoundError as error:
        if error.name is not None and f"{where}.".startswith(f"{error.name}."):  # the target
            raise TargetError(f"cannot import {where!r}: {error}") from error
        raise TargetError(_failure(where, error)) from error
    except Exception as error:  # any exception at import, SyntaxError included
        raise TargetError(_failure(where, error)) from error


def _import_file(where: str) -> ModuleType:
    path = Path(where)
    if not path.is_file():
        raise TargetError(f"no such file: {where!r}")
    name = path.stem if path.stem.isidentifier() else "tooldeck_tools"
    taken = sys.modules.get(name)
    if taken is not None and Path(taken.__file__ or "").resolve() != path.resolve():
        name = f"_tooldeck_file_{name}"  # do not replace a module already loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"cannot import {where!r}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # like `python path/to/tools.py`: its neighbours import
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise TargetError(_failure(where, error)) from error
    return module


def _failure(what: str, error: BaseException) -> str:
    """``cannot import 'x' (x.py, line 3): KeyError: 'k'`` and where to see more."""
    place = raised_at(error)
    where = f" ({place})" if place else ""
    return f"cannot import {what!r}{where}: {exception_text(error)} (-v shows the traceback)"


def exception_text(error: BaseException) -> str:
    """``KeyError: 'k'``; a SyntaxError's own message without its location."""
    message = error.msg if isinstance(error, SyntaxError) else str(error)
    message = " ".join(message.split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def raised_at(error: BaseException) -> str:
    """``file.py, line N``: where the person's own code raised ``error`` (not Python's
    or tooldeck's), or where it was raised at all; "" when not known."""
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        return f"{_shown_path(error.filename)}, line {error.lineno}"
    stack = traceback.extract_tb(error.__traceback__)
    frames = [f for f in stack if not f.filename.startswith("<")]  # not importlib's own
    if not frames:
        return ""
    own = [f for f in frames if is_own_code(f.filename)]
    frame = (own or frames)[-1]
    return f"{_shown_path(frame.filename)}, line {frame.lineno}"


def is_own_code(filename: str) -> bool:
    """Whether ``filename`` is the person's code: not Python's, an installed package's or
    tooldeck's own."""
    path = Path(filename).resolve()
    installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return not any(path.is_relative_to(p) for p in (*installed, _PACKAGE_DIR))


def _shown_path(filename: str) -> str:
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return filename


def _as_registry(value: Any, target: str) -> ToolRegistry:
    if isinstance(value, ToolRegistry):
        return value
    if isinstance(value, ToolView):
        return ToolRegistry(value.entries)
    if isinstance(value, FunctionTool | Toolset):
        return ToolRegistry([value])
    if isinstance(value, list | tuple):
        return ToolRegistry(value)
    raise TargetError(
        f"{target!r} is a {type(value).__name__}; expected a ToolRegistry, a list of tools, "
        "a tool or a Toolset"
    )
