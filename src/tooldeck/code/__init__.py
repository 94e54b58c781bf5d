"""Code mode: the model writes one Python program that calls the agent's tools, run in a
sandbox, in place of many rounds of single calls.

``CodeMode`` gives the model a ``run_code(code)`` tool whose description shows the chosen
tools as typed Python async functions with their docstrings; those tools are no longer
offered for direct calls (unless kept). The program runs in pydantic-monty (a Python
interpreter in Rust, in worker processes: no files, network, environment, subprocesses or
imports of the host unless a folder is mounted) within limits (``CodeLimits``). Each call it
makes goes through the run's own call path — schema, guardrails, the untrusted-content
policy, budgets and limits, approvals, at-most-once, tracing — and shows as the run's own
call. The model reads what the program printed and its last expression's value; a failure
is an observation (``code_syntax``, ``code_type``, ``code_error``, ``code_limit``,
``code_crashed``) naming the line and what went wrong. A call that needs a person's
approval pauses the run with the program's state, which goes on after the decision.

pydantic-monty is an optional extra (``pip install 'tooldeck[code]'``), imported only when
a program runs.

Layer 3 (beside ``run``). May import: ``tooldeck.run`` (its engine's call path through
``RunContext.caller`` only) and the layers below; pydantic_monty in ``_sandbox`` only.

Examples:
    >>> from tooldeck import Agent, ScriptedModel, tool
    >>> from tooldeck.code import CodeMode
    >>> @tool
    ... def price(item: str) -> float:
    ...     '''The price of an item, in euros.'''
    ...     return {"apple": 0.5, "pear": 0.75}[item]
    >>> agent = Agent(ScriptedModel([]), tools=[price], capabilities=[CodeMode()])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Literal

from tooldeck.code._limits import CodeLimits, Mount
from tooldeck.code._program import RUN_CODE, RunCode
from tooldeck.code._signatures import callable_name, described, stubs
from tooldeck.run.capabilities import Capability, RunView
from tooldeck.tools.function import FunctionTool, tool
from tooldeck.tools.registry import ToolEntry, ToolView

__all__ = ["RUN_CODE", "CodeLimits", "CodeMode", "Mount"]

_KEPT_VIEWS = 4
"""Tool sets whose ``run_code`` a CodeMode keeps made (an agent's usual view, a handoff's...)."""
Approval = Literal["each", "whole"]


class CodeMode(Capability):
    """Gives the model ``run_code``: a Python program that calls the chosen tools.

    Args:
        tools: Which of the agent's tools a program may call: ``"all"`` (default), a list of
            names, or a function of a tool's entry. A tool whose name is not a Python name,
            and a tool that itself calls tools, is left out.
        keep: Tools still offered for direct calls too: ``True`` (all of them), or names.
        limits: What one program may use (``CodeLimits()``: 30 s, 256 MiB, 100 calls).
        mounts: Host folders a program may read or write (``Mount``); none by default.
        approval: ``"each"`` (default): a call that needs a person's approval pauses the run
            where the program made it, and the program goes on after the decision.
            ``"whole"``: ``run_code`` itself needs approval when any tool it may call does
            (the person approves the program; its calls then ask no more).
        type_check: Check each program's types against the tools' signatures before it runs
            (``code_type`` when they do not fit); it costs 30-150 ms a program.
        repl: Keep what a program defines (its variables, functions, imports) for the run's
            next programs, as a REPL does; ``run_code(..., restart=true)`` starts afresh. It
            is the run's state: a checkpoint and the run's journal carry it; the session's
            next run starts afresh. A program that fails leaves it as it was before.

    Examples:
        >>> from tooldeck.code import CodeLimits, CodeMode
        >>> CodeMode(["price", "stock"], limits=CodeLimits(duration_s=5))
        CodeMode(['price', 'stock'])
    """

    def __init__(
        self,
        tools: Literal["all"] | Iterable[str] | Callable[[ToolEntry], bool] = "all",
        *,
        keep: bool | Iterable[str] = False,
        limits: CodeLimits | None = None,
        mounts: Iterable[Mount] = (),
        approval: Approval = "each",
        type_check: bool = False,
        repl: bool = False,
    ) -> None:
        if approval not in ("each", "whole"):
            raise ValueError(f"approval must be 'each' or 'whole', got {approval!r}")
        if isinstance(tools, str) and tools != "all":
            raise TypeError(
                f"CodeMode takes 'all', a list of tool names or a function, got {tools!r}"
            )
        self._names = None if tools == "all" or callable(tools) else frozenset(tools)
        self._chooses = tools if callable(tools) else None
        self._keep: bool | frozenset[str] = keep if isinstance(keep, bool) else frozenset(keep)
        self.limits = limits or CodeLimits()
        self.mounts = tuple(mounts)
        for mount in self.mounts:
            if not isinstance(mount, Mount):
                raise TypeError(f"CodeMode(mounts=...) takes Mount objects, got {mount!r}")
        self.approval: Approval = approval
        self.type_check = type_check
        self.repl = repl
        self._made: list[tuple[ToolView, ToolView]] = []

    def initial_state(self) -> dict[str, Any] | None:
        """With ``repl``: the run's REPL (a dump of the names programs left, and how many
        programs it holds: monty names each program's source by its place; none yet)."""
        return {"session": None, "feeds": 0} if self.repl else None

    def next_run_state(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """Each run starts with an empty REPL."""
        return None

    def chooses(self, entry: ToolEntry) -> bool:
        """Whether a program may call ``entry``'s tool."""
        if entry.name == RUN_CODE or entry.calls_tools or not callable_name(entry.name):
            return False
        if self._names is not None:
            return entry.name in self._names
        return self._chooses(entry) if self._chooses is not None else True

    def show_tools(self, view: ToolView, ctx: RunView) -> ToolView:
        """``view`` without the chosen tools (those kept stay), with ``run_code`` at the end."""
        for seen, made in self._made:
            if seen is view or made is view:
                return made
        chosen = [entry for entry in view.dispatch.values() if self.chooses(entry)]
        made = ToolView.of(
            [
                *(entry for entry in view.dispatch.values() if self._shown(entry)),
                self._run_code(chosen),
            ]
        )
        made = replace(made, deferred=view.deferred)
        self._made = [*self._made[-(_KEPT_VIEWS - 1) :], (view, made)]
        return made

    def _shown(self, entry: ToolEntry) -> bool:
        keep = self._keep
        kept = keep if isinstance(keep, bool) else entry.name in keep
        return kept or not self.chooses(entry)

    def _run_code(self, chosen: list[ToolEntry]) -> ToolEntry:
        whole = self.approval == "whole"
        asks = whole and any(entry.options.requires_approval for entry in chosen)
        if whole:  # approved as a whole: its calls ask no more
            chosen = [_without_approval(entry) for entry in chosen]
        tools = {entry.name: entry for entry in chosen}
        schema = _schema(self.repl)
        checked = stubs(chosen) if self.type_check else None
        repl = self.state_key if self.repl else None
        handler = RunCode(schema, tools, self.limits, self.mounts, checked, repl)
        spec = schema.spec.model_copy(update={"description": self._description(chosen)})
        options = schema.options
        if asks:
            options = replace(options, requires_approval=True)
        return ToolEntry(
            spec, handler, options, origin="tooldeck.code", calls_tools=True, reaches=tuple(tools)
        )

    def _description(self, chosen: list[ToolEntry]) -> str:
        limits = self.limits
        files = (
            "Files: " + ", ".join(f"{m.virtual_path} ({m.mode})" for m in self.mounts) + "."
            if self.mounts
            else "It has no files, network or environment of the host."
        )
        return (
            "Run a Python program (a subset of Python 3 with its common standard modules) in a "
            "sandbox. It may call the functions below, which are async: `await` each, with "
            "keyword arguments; run several at once with `await asyncio.gather(...)` (after "
            "`import asyncio`). A failed call raises an exception the program may catch. You "
            "read what it printed, then the value of its last expression: end with the value "
            f"you need. {files} Limits: {limits.duration_s:g} s, "
            f"{limits.memory_bytes // (1024 * 1024)} MiB, {limits.max_calls} tool calls."
            + (
                " What a program defines stays for your next programs (restart: true forgets it)."
                if self.repl
                else ""
            )
            + ("\n\n" + described(chosen) if chosen else " It may call no tool.")
        )

    def __repr__(self) -> str:
        if self._names is not None:
            return f"CodeMode({sorted(self._names)!r})"
        if self._chooses is not None:
            return f"CodeMode({getattr(self._chooses, '__name__', 'a function')})"
        return "CodeMode('all')"


def _without_approval(entry: ToolEntry) -> ToolEntry:
    if not entry.options.requires_approval:
        return entry
    return replace(entry, options=replace(entry.options, requires_approval=False))


@functools.cache
def _schema(repl: bool) -> FunctionTool[..., str]:
    """``run_code``'s arguments, made once a process (its description is per tool set).
    ``sequential``: a program runs alone in its round. Its calls are made one after another
    anyway; in a durable run each takes the workflow's next step, so two programs at once
    would take them in an order a recovery could not repeat."""
    return tool(name=RUN_CODE, sequential=True)(_repl_program if repl else _program)


def _program(code: str) -> str:  # pragma: no cover - its schema only: RunCode runs it
    """Run a Python program.

    Args:
        code: The program. Its last expression's value is what you read, after what it printed.
    """
    return code


def _repl_program(code: str, restart: bool = False) -> str:  # pragma: no cover - its schema
    """Run a Python program.

    Args:
        code: The program. Its last expression's value is what you read, after what it printed.
        restart: Forget what earlier programs defined, and start afresh.
    """
    return code
