"""What a durable run names and the process that executes it looks up: its deps and its
budget (neither can be stored in the workflow's arguments; each process has its own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")

Named = Mapping[str, T] | Callable[[str], T]
"""Where a process finds what a run names: a mapping, or a function of the name."""


def checked_name(source: Named[T] | None, name: object, what: str, agent: str) -> str | None:
    """The name a run carries, checked as it starts (against the names, when a mapping
    gives them); ``what`` is the ``DurableAgent`` keyword (``deps``, ``budgets``)."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(
            f"a durable run takes its {_one(what)} by name (a key of DurableAgent({what}=...)), "
            f"got {type(name).__name__}: the run may go on in another process, which "
            f"builds its own {_one(what)}"
        )
    if isinstance(source, Mapping) and name not in source:
        known = ", ".join(map(repr, source)) or "none"
        raise KeyError(f"DurableAgent {agent!r} has no {_one(what)} named {name!r}; known: {known}")
    return name


def looked_up(source: Named[T] | None, name: str | None, what: str, agent: str) -> T | None:
    """What ``name`` stands for in the process executing the run."""
    if name is None:
        return None
    if source is None:
        raise LookupError(
            f"the run asks for {_one(what)} {name!r}, but DurableAgent {agent!r} has none in "
            f"this process: declare it with DurableAgent(..., {what}={{...}})"
        )
    if isinstance(source, Mapping):
        if name not in source:
            known = ", ".join(map(repr, source)) or "none"
            raise LookupError(
                f"the run asks for {_one(what)} {name!r}, but DurableAgent {agent!r} has no "
                f"{_one(what)} of that name in this process; known: {known}"
            )
        return source[name]
    return source(name)


def _one(what: str) -> str:
    return "budget" if what == "budgets" else what
