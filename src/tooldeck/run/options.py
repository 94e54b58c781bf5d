"""The options every entry point of a run takes, declared once.

``Agent.run``, ``run_sync``, ``stream``, ``resume``, ``resume_sync`` and ``resume_stream``
(and the durable agent's) take the same keywords, ``RunArgs``; each becomes one checked
``RunOptions``, the only thing the loop is told about how this run was asked for. What a
run needs (its session's id, the agent-tool call it runs inside) is passed here, never
carried in a ContextVar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar

from tooldeck.messages import Message
from tooldeck.run._engine.inbox import Inbox
from tooldeck.run._engine.inherited import Inherited
from tooldeck.run._engine.journal import JournalWriter
from tooldeck.run.budget import Budget
from tooldeck.run.cancel import CancelSignal
from tooldeck.run.capabilities import Capability
from tooldeck.run.session import CallRecords, Session

DepsT = TypeVar("DepsT")


@dataclass(frozen=True, slots=True)
class ParentCall:
    """The agent-tool call a run is the inner run of: the outer run's id and the call's id."""

    run_id: str
    call_id: str


class RunArgs(TypedDict, Generic[DepsT], total=False):
    """The keyword options of every entry point of a run (all optional)."""

    deps: DepsT | None
    """The host objects the run's tools receive as ``RunContext.deps``."""
    history: Sequence[Message]
    """An earlier conversation to continue (e.g. ``result.messages``); not with ``session``,
    and not on a resume (the checkpoint has it)."""
    session: Session | None
    """A conversation kept between runs (``tooldeck.sessions``): the run starts from its
    history and is stored in it before its FinalAnswer; a resume claims its paused run."""
    run_id: str | None
    """An id the application already has for this run (a request or workflow id); a random
    one is drawn otherwise. Not on a resume (the run keeps its id)."""
    deltas: bool
    """Also stream the model's text and tool calls as it writes them (TextDelta,
    ToolCallDelta), from models that can stream; ``run()`` uses the stream to build the turn."""
    session_id: str | None
    """The id of the conversation the run belongs to when its history is given directly
    (the run log records it); set by ``session=`` otherwise."""
    parent: ParentCall | None
    """The agent-tool call this run is the inner run of (the run log links the two)."""
    budget: Budget | None
    """A spending budget shared with other runs (``tooldeck.run.budget.Budget``, or a store
    such as ``tooldeck.sessions.SQLiteBudget``): the run stops with stop reason ``budget``
    when it is spent."""
    inherited: Inherited | None
    """What the run inherits from the run whose call it runs inside (set by agent tools):
    that run's guardrails and untrusted-content policy, which apply beside this agent's
    own, its taint and its cancel signal (``tooldeck.run._engine.inherited``)."""
    capabilities: Sequence[Capability]
    """Capabilities for this run only, holding for the whole of it: after handoffs and
    inside agent tools' inner runs, before each agent's own (``tooldeck.run.capabilities``).
    Give them again to ``resume()``, as ``deps``."""


@dataclass(slots=True)  # treat as read-only (made for every run; frozen costs 3x)
class RunOptions:
    """One run's options, checked (``RunOptions.of(args)``)."""

    deps: Any = None
    history: tuple[Message, ...] = ()
    session: Session | None = None
    run_id: str | None = None
    deltas: bool = False
    session_id: str | None = None
    parent: ParentCall | None = None
    budget: Budget | None = None
    inherited: Inherited | None = None
    cancel: CancelSignal | None = None
    """Set by ``Agent.start``: the signal that cancels the run (tools read it as
    ``ctx.cancelled``)."""
    inbox: Inbox | None = None
    """Set by ``Agent.start``: where the handle puts the messages sent to the run
    (``RunHandle.send``)."""
    records: CallRecords | None = None
    """Where the run records its ``side_effects`` calls: its session, when it can (set by
    the agent as it takes the session out of the options)."""
    journal: JournalWriter | None = None
    """Where the run's journal is written ahead: its session, when it keeps one (set as the
    run is opened in the session)."""
    capabilities: tuple[Capability, ...] = ()
    """``run(capabilities=...)``: the run's own, for the whole run."""
    carried: Mapping[str, Any] | None = None
    """The capability states the session's last committed run ended with (set as a run in
    a session starts; ``Capability.next_run_state``)."""

    @classmethod
    def of(cls, args: RunArgs[Any], *, resuming: bool = False) -> RunOptions:
        """Check the keywords of an entry point; ``resuming`` refuses what a resume cannot
        take (the checkpoint holds the history and the run id)."""
        if not args:
            return cls()
        unknown = args.keys() - _NAMES
        if unknown:
            raise TypeError(
                f"unknown run option(s) {', '.join(map(repr, sorted(unknown)))}; the options "
                f"are: {', '.join(RunArgs.__annotations__)}"
            )
        history = tuple(args.get("history") or ())
        session = args.get("session")
        run_id = args.get("run_id")
        if resuming and (history or run_id is not None):
            raise TypeError(
                "resume() takes no history= or run_id=: the paused run's checkpoint holds both"
            )
        if session is not None and history:
            raise ValueError("pass history= or session=, not both: a session has its history")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
        session_id = args.get("session_id")
        if session is not None:
            session_id = session.session_id
        return cls(
            args.get("deps"),
            history,
            session,
            run_id,
            bool(args.get("deltas", False)),
            session_id,
            args.get("parent"),
            _checked_budget(args.get("budget")),
            _checked_inherited(args.get("inherited")),
            capabilities=_checked_capabilities(args.get("capabilities")),
        )


_NAMES = frozenset(RunArgs.__annotations__)


def _checked_budget(budget: object) -> Budget | None:
    if budget is None or isinstance(budget, Budget):
        return budget
    raise TypeError(
        f"budget= takes a Budget (tooldeck.run.budget), got {type(budget).__name__}: {budget!r}"
    )


def _checked_capabilities(given: object) -> tuple[Capability, ...]:
    if given is None:
        return ()
    if isinstance(given, Capability) or not isinstance(given, Sequence | tuple | list):
        raise TypeError(f"capabilities= takes a list of Capability objects, got {given!r}")
    for item in given:
        if not isinstance(item, Capability):
            raise TypeError(
                "capabilities= takes Capability objects (tooldeck.run.capabilities), got "
                f"{type(item).__name__}: {item!r}"
            )
    return tuple(given)


def _checked_inherited(inherited: object) -> Inherited | None:
    if inherited is None or isinstance(inherited, Inherited):
        return inherited
    raise TypeError(
        "inherited= takes what an agent tool passes on (tooldeck.run._engine.inherited.Inherited), "
        f"got {type(inherited).__name__}: {inherited!r}"
    )
