"""RunContext: what a tool may ask for about the call and the run it belongs to.

The bottom of the tools room (the registry, the options and the function tools all name
RunContext), so it names the registry only by what a tool may do with it (``ToolChanges``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from tooldeck._budget import Budget
from tooldeck.errors import ToolDeckError
from tooldeck.messages import Message, ToolCall
from tooldeck.results import Checkpoint, Decision, PendingCall, ToolTrace
from tooldeck.tools.outputs import OutputStore

DepsT = TypeVar("DepsT")


@dataclass(frozen=True, slots=True)
class Resumption:
    """A paused call going on: the state it paused with and the decisions made since."""

    state: Checkpoint
    """The ``Pause.state`` the call returned when it paused."""
    decisions: Mapping[str, Decision]
    """The decisions on the calls inside it, keyed by the inner ``PendingCall.id``."""


class ToolCaller(Protocol):
    """Runs the calls a call makes of other tools (code mode's programs) through the run's
    own call path: each checked against its schema, the budgets and limits, guarded, asked
    about, run at most once, traced and shown as the run's own call."""

    async def call(self, call: ToolCall, tools: Mapping[str, Any]) -> ToolTrace | PendingCall:
        """Run ``call`` of one of ``tools`` (ToolEntry objects by name): its trace, or the
        PendingCall it waits as (a person's approval)."""
        ...

    async def decided(
        self, pending: PendingCall, decisions: Mapping[str, Decision], tools: Mapping[str, Any]
    ) -> ToolTrace | PendingCall | None:
        """Run (or answer without running) a call that waited, now that it is decided
        (``decisions`` keyed by ``PendingCall.id``, the calls inside an agent tool's paused
        run as ``<call id>/<inner id>``): its trace, the PendingCall it waits as again (an
        agent tool's run paused at another call), or None while no decision concerns it."""
        ...


class ToolChanges(Protocol):
    """What a tool may do with its agent's tools during a run (a ToolRegistry does it)."""

    def register(self, item: Any, /) -> object:
        """Add a tool or a toolset; the model sees it from its next turn."""
        ...

    def remove(self, name_or_toolset: Any, /) -> None:
        """Take a tool (by name) or a toolset out, from the model's next turn."""
        ...

    def get(self, name: str, /) -> Any:
        """The registered tool named ``name`` (its ToolEntry), or None."""
        ...

    def __contains__(self, name: object, /) -> bool: ...

    def __iter__(self) -> Iterator[Any]: ...


@dataclass(slots=True)  # treat as read-only: made for every call, and frozen costs 3x to make
class RunContext(Generic[DepsT]):
    """Injected into a tool parameter annotated ``RunContext``; never shown to the model.
    Read it; changing it changes nothing of the run.

    Examples:
        >>> from tooldeck import RunContext, tool
        >>> @tool
        ... def whoami(ctx: RunContext[str]) -> str:
        ...     '''Say which user the run is for.'''
        ...     return ctx.deps
    """

    call_id: str
    """The model's id for this call."""
    tool_name: str
    """The name of the tool being called."""
    deps: DepsT
    """The host objects given to the run (``agent.run(prompt, deps=...)``)."""
    round: int = 0
    """Which model turn asked for this call, counting from 1."""
    run_id: str = ""
    """The run's id (``RunResult.run_id``; a durable run's workflow id): with ``call_id``, a
    key that names this call across retries and recoveries (an idempotency key)."""
    registry: ToolChanges | None = field(default=None, repr=False)
    """The agent's registry, when its tools may change (use ``tools``)."""
    messages: Sequence[Message] = field(default=(), repr=False)
    """The conversation so far, ending with the model's turn that made this call."""
    emit: Callable[[Any], None] | None = field(default=None, repr=False)
    """For a tool whose entry says ``emits_events``: passes an event of the run made inside
    this call to the run's stream, which shows it nested under this call."""
    resumed: Resumption | None = field(default=None, repr=False)
    """For a call that paused (its handler returned a ``Pause``), going on: what it paused
    with and the decisions on the calls inside it."""
    outputs: OutputStore | None = field(default=None, repr=False)
    """The run's stored outputs (``large_output="store"``), read by ``read_output``."""
    cancelled: threading.Event | None = field(default=None, repr=False)
    """Set when the run is cancelled (a run started with ``agent.start()``): a long sync
    tool can poll ``ctx.cancelled.is_set()`` and stop early; set too when an AG-UI client
    goes away or an MCP client cancels a served call. None for other runs."""
    budget: Budget | None = field(default=None, repr=False)
    """The spending budget the run's calls draw on (``run(budget=...)``, or what is left of
    the run's own token and cost limits), None without either: the inner runs of agent
    tools draw on it too."""
    inherited: Any = field(default=None, repr=False)
    """For a tool whose entry says ``emits_events`` (an agent tool): what the run made
    inside this call inherits from this run, a ``tooldeck.run._engine.inherited.Inherited`` (the
    run-level guardrails and untrusted-content policy, the taint, the cancel signal); None
    for other calls. (Typed loosely: the tools room cannot name the run's class.)"""
    states: dict[str, Any] | None = field(default=None, repr=False)
    """The states of the run's capabilities by name: read one with
    ``capability.state(ctx)`` (None when no capability of the run keeps one)."""
    caller: ToolCaller | None = field(default=None, repr=False)
    """For a tool whose entry says ``calls_tools`` (code mode's ``run_code``): runs its calls
    of other tools through the run's call path; None for other calls."""

    @property
    def idempotency_key(self) -> str:
        """One stable key for this call, ``<run id>:<round>:<place>`` (its place among the
        calls of its model turn, from 0): the same when the call is retried, resumed after a
        pause, continued from the run's journal, or replayed by a durable run, and different
        for every other call. It never holds the provider's call id, which a provider
        draws afresh each time it is asked. Give it to an API that accepts one (payments,
        email, tickets), so the outside world also does the call at most once."""
        return f"{self.run_id}:{self.round}:{self.place}"

    @property
    def place(self) -> int | str:
        """The call's place among the calls of the model turn that made it, from 0 (the
        call id when this context was not made by a run, which knows the turn); for a call
        made inside one of those (``"<its id>.<n>"``, a code-mode program's n-th call),
        ``"<that call's place>.<n>"``."""
        if self.messages:
            calls = self.messages[-1].tool_calls
            for index, call in enumerate(calls):
                if call.id == self.call_id:
                    return index
            outer, dot, number = self.call_id.rpartition(".")
            for index, call in enumerate(calls if dot else ()):
                if call.id == outer:  # a call made inside that one (code mode's program)
                    return f"{index}.{number}"
        return self.call_id

    @property
    def tools(self) -> ToolChanges:
        """The agent's tools, to add or remove some during the run: ``ctx.tools.register(t)``.

        The model sees a change from its next turn, never in the middle of a turn's calls.
        The change is the agent's, so it outlasts the run (and shows in the agent's other runs).
        """
        if self.registry is None:
            raise ToolDeckError(
                f"tool {self.tool_name!r} asked for ctx.tools, but this run's tools cannot "
                "change: the agent was given a fixed ToolView (give it a ToolRegistry or a list "
                "of tools instead), or this RunContext was not made by an agent run"
            )
        return self.registry
