"""Capabilities: the one way to add to what an agent's runs do.

A capability may add tools (``tools``), instructions (``instructions``, read as each run
starts) and hooks at the named points of a run — around each model request
(``before_request``, ``after_response``), around each tool call (``wrap_call``, a handler
wrapper; ``before_tool_call`` and ``after_tool_call`` are its two halves), on the answer
(``on_answer``), on each event (``on_event``), on the tools each request shows
(``show_tools``) and on the messages that join the conversation while the run works
(``join_messages``) — with a state of its own per run
(``initial_state``, read and changed through ``self.state(ctx)``) that checkpoints and a
session's run journal carry, so a resumed or recovered run goes on with it. A session keeps
the states its last committed run ended with, and its next run starts each capability from
its own (``next_run_state`` says what carries over).

``Agent(capabilities=[...])`` gives them to an agent: they apply while it holds the run.
``agent.run(..., capabilities=[...])`` gives them to one run, for the whole of it: after
handoffs and inside agent tools' inner runs too; so does an agent's capability whose
``run_level`` is True when the run starts on that agent (the guardrails and the
untrusted-content policy are such).

Tooldeck's own features are capabilities: ``Middleware`` (a capability with request and
call hooks), ``Guardrails``, ``UntrustedPolicy``, the history strategies
(``KeepLastExchanges``...), ``LargeOutputs``, the run log and tracing; ``Agent``'s older
keywords (``middleware=``, ``input_guardrails=``, ``history_strategy=``, ``run_log=``...)
are shorthands that build them. A run whose agent has no capability with hooks pays nothing.

Examples:
    >>> from tooldeck import Agent, AssistantOutput, ScriptedModel
    >>> from tooldeck.run.capabilities import Capability
    >>> class Polite(Capability):
    ...     def instructions(self, ctx):
    ...         return "Always say please."
    >>> agent = Agent(ScriptedModel([AssistantOutput(content="Please, hi!")]),
    ...               capabilities=[Polite()])
    >>> agent.run_sync("Hello").answer
    'Please, hi!'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolResult, ToolSpec
from tooldeck.models.base import ModelSettings
from tooldeck.results import APPROVALS_STATE, RunResult
from tooldeck.tools.context import RunContext
from tooldeck.tools.options import RequiresApproval
from tooldeck.tools.outputs import LARGE_OUTPUTS, LargeOutput
from tooldeck.tools.registry import ToolEntry, ToolView

if TYPE_CHECKING:
    from tooldeck.run.events import Event

CallNext = Callable[[ToolCall], Awaitable[ToolResult]]
"""Runs a call further in (the next capability's ``wrap_call``, then the tool): give it the
call, or a copy with other arguments (validated again)."""


class HasStates(Protocol):
    """A context that carries the run's capability states (each context a hook is given)."""

    @property
    def states(self) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model request as a hook sees it; return a changed copy (``dataclasses.replace``)."""

    messages: tuple[Message, ...]
    """The conversation to send."""
    settings: ModelSettings
    """Tool choice and sampling for this request (e.g. ``settings.with_tool_choice("none")``)."""
    instructions: str
    """The system prompt."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a request hook may read about a model request (read only)."""

    round: int
    """The round this request starts, counting from 1."""
    run_id: str
    deps: Any
    """The run's ``deps``."""
    tools: tuple[ToolSpec, ...]
    """The tools the model is shown in this request."""
    states: dict[str, Any] | None = field(default=None, repr=False)
    """The run's capability states (``Capability.state(ctx)``)."""


@dataclass(frozen=True, slots=True)
class RunView:
    """What ``instructions``, ``on_answer`` and ``on_event`` may read about the run: a narrow
    view, never the engine's own state."""

    run_id: str
    agent: str
    """The name of the agent that holds the run."""
    round: int
    """The model turns so far."""
    deps: Any
    messages: tuple[Message, ...] = field(default=(), repr=False)
    """The conversation as it was when the view was made."""
    states: dict[str, Any] | None = field(default=None, repr=False)
    """The run's capability states (``Capability.state(ctx)``)."""


class Capability:
    """Subclass and override what you need; every hook not overridden costs nothing.

    Hooks that return something return the (possibly changed) thing they were given; one
    that raises ends the run with ``MiddlewareError`` naming it (``GuardrailTripped`` and
    ``RunStopped`` pass through as they are), so nothing is dropped silently.
    """

    run_level: ClassVar[bool] = False
    """Whether the capability holds for the whole run when the run starts on an agent that
    has it (after handoffs, inside agent tools). Capabilities given to ``run()`` always do."""

    @property
    def state_key(self) -> str:
        """The key of its state in checkpoints and journals: its class name, unless a
        subclass says otherwise (two instances of one class that keep state need two)."""
        return type(self).__name__

    def tools(self) -> Sequence[Any]:
        """Tools it adds (functions, ``@tool``s, Toolsets), shown beside the agent's own."""
        return ()

    def instructions(self, ctx: RunView) -> str:
        """Text added to the system prompt of each request of a run (read as it starts)."""
        return ""

    def wrap_tool(self, entry: ToolEntry) -> ToolEntry:
        """See or change each tool the agent shows (its own and those it gains later), as
        the model is shown it: a changed copy (``dataclasses.replace``) to change how its
        calls run — that they need approval, say — or the entry as it is."""
        return entry

    def show_tools(self, view: ToolView, ctx: RunView) -> ToolView:
        """Before each model request: the tools it shows and its calls may use — ``view``
        (the agent's current tools, deferred ones held back in ``view.deferred``) or another
        (``ToolView.of``); add at the end to keep a provider's prompt cache (``ToolSearch``
        appends the tools it revealed). ``ctx`` holds no messages (not copied per request)."""
        return view

    def initial_state(self) -> dict[str, Any] | None:
        """Its state as a run starts: a JSON-able dict (None: it keeps no state)."""
        return None

    def next_run_state(self, state: dict[str, Any]) -> dict[str, Any] | None:
        """What a session's next run starts from, given the state this capability ended the
        session's last committed run with: by default that state as it is. Return another
        dict to carry part of it, or None to start the next run from ``initial_state()``.

        The rule, for each capability that keeps state (its ``initial_state`` returns a
        dict) as it first starts in a run of a session: a resumed or recovered run goes on
        with the state it had; otherwise, when the session's last committed run (finished,
        or closed as it stood after a crash) ended with a state under its ``state_key``, the
        run starts from ``next_run_state`` of a copy of it, and from ``initial_state()``
        when that returns None or there is none (the capability was not in that run, the
        session is new or was cleared). The state kept must be JSON-able, as a
        checkpoint's: one that is not is a TypeError naming the capability where it is
        written, and nothing is stored."""
        return state

    def state(self, ctx: HasStates) -> dict[str, Any]:
        """Its state in the run of ``ctx`` (any context a hook or a tool is given): a dict
        it may change in place; checkpoints, journals and a session's next run carry it."""
        states, key = ctx.states, self.state_key
        if states is None or key not in states:
            raise LookupError(
                f"{key} keeps no state in this run: return a dict from initial_state()"
            )
        state: dict[str, Any] = states[key]
        return state

    async def before_request(
        self, request: ModelCall, ctx: RequestContext
    ) -> ModelCall | AssistantOutput:
        """See or change a request; return an AssistantOutput to answer in the model's place."""
        return request

    async def after_response(
        self, request: ModelCall, output: AssistantOutput, ctx: RequestContext
    ) -> AssistantOutput:
        """See or change what the model returned for ``request``."""
        return output

    async def wrap_call(
        self, call: ToolCall, ctx: RunContext[Any], call_next: CallNext
    ) -> ToolResult:
        """Around one tool call whose arguments passed validation: run it further in with
        ``await call_next(call)`` (or a copy with other arguments), or answer in the tool's
        place without calling it; return the result the model reads. By default:
        ``before_tool_call``, the call, ``after_tool_call``."""
        before = await self.before_tool_call(call, ctx)
        if isinstance(before, ToolResult):
            return before
        result = await call_next(before)
        return await self.after_tool_call(before, result, ctx)

    async def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> ToolCall | ToolResult:
        """See a call whose arguments passed validation. Return it, a copy with other
        arguments (``call.model_copy(update={"arguments": ...})``, validated again), or a
        ToolResult to answer in the tool's place (the tool does not run)."""
        return call

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
    ) -> ToolResult:
        """See or change the result the model will read for ``call`` (the call as it ran)."""
        return result

    async def on_answer(self, result: RunResult[Any], ctx: RunView) -> RunResult[Any]:
        """See the run's answer before it ends the run; return it, or a changed copy
        (``result.model_copy(update=...)``). Raise ``GuardrailTripped`` to stop the run."""
        return result

    def on_event(self, event: Event, ctx: RunView) -> None:
        """See each event of the run as it happens (to count, log or show it)."""

    async def join_messages(self, ctx: RunView) -> Sequence[Message]:
        """Before each model request, and as the run would end with an answer: the user
        messages that join the conversation now, after the round's results (``()`` for
        none; a ``MessageJoined`` event tells them). Messages that join as the run answers
        make it ask again, so they are answered. A durable run's ``DurableAgent.send`` is
        this hook; ``RunHandle.send`` is its in-memory twin. ``ctx`` holds no messages (not
        copied per request)."""
        return ()


REQUEST_HOOKS = ("before_request", "after_response")
CALL_HOOKS = ("wrap_call", "before_tool_call", "after_tool_call")


def overrides(item: Capability, hook: str) -> bool:
    """Whether ``item``'s class overrides ``hook`` (a hook left alone is never called)."""
    return getattr(type(item), hook) is not getattr(Capability, hook)


class LargeOutputs(Capability):
    """What the model reads of a tool's long output, for tools without their own setting:
    the first ``max_chars`` characters (``mode="truncate"``), those with the size and a
    handle it reads further with the ``read_output`` tool it adds (``"store"``), or an
    error (``"error"``). The same as ``Agent(max_output_chars=..., large_output=...)``."""

    def __init__(self, max_chars: int | None = None, mode: LargeOutput = "truncate") -> None:
        check_output_limit(max_chars, mode)
        self.max_chars, self.mode = max_chars, mode

    def tools(self) -> Sequence[Any]:
        """The ``read_output`` tool, when long outputs are stored."""
        if self.mode != "store":
            return ()
        from tooldeck.tools.read_output import read_output  # only for the agents that store

        return (read_output,)

    def __repr__(self) -> str:
        return f"LargeOutputs(max_chars={self.max_chars!r}, mode={self.mode!r})"


def check_output_limit(max_output_chars: int | None, large_output: LargeOutput) -> None:
    """Refuse an output limit below 1 and a mode that is not one of ``LARGE_OUTPUTS``."""
    if max_output_chars is not None and (
        not isinstance(max_output_chars, int) or max_output_chars < 1
    ):
        raise ValueError(f"max_output_chars must be at least 1, got {max_output_chars!r}")
    if large_output not in LARGE_OUTPUTS:
        raise ValueError(
            f"large_output must be 'truncate', 'store' or 'error', got {large_output!r}"
        )


class Approvals(Capability):
    """Calls of the tools it names wait for a person's decision, as with
    ``@tool(requires_approval=...)``: a wrapper around those tools, for tools you did not
    write (an MCP server's, another module's) or a rule across many.

    Args:
        tools: The names of the tools whose calls need approval, or a function of a tool's
            entry that says whether they do (``lambda entry: entry.options.side_effects``).
        when: ``True`` (every call of those tools) or a predicate ``(ctx, arguments) ->
            bool`` deciding per call, as ``requires_approval`` takes.

    Examples:
        >>> from tooldeck import Agent, ScriptedModel
        >>> from tooldeck.run.capabilities import Approvals
        >>> agent = Agent(ScriptedModel([]), capabilities=[Approvals(["send_email"])])
    """

    run_level = True

    def __init__(
        self,
        tools: Iterable[str] | Callable[[ToolEntry], bool],
        when: RequiresApproval = True,
    ) -> None:
        if isinstance(tools, str):
            raise TypeError(f"Approvals takes a list of tool names, got the string {tools!r}")
        self._names = None if callable(tools) else frozenset(tools)
        self._chooses = tools if callable(tools) else None
        self.when = when

    def wrap_tool(self, entry: ToolEntry) -> ToolEntry:
        """The entry with its calls needing approval, if it is one of the tools named."""
        names, chooses = self._names, self._chooses
        named = entry.name in names if names is not None else bool(chooses and chooses(entry))
        if not named or entry.options.requires_approval:
            return entry  # a tool's own rule stays
        return replace(entry, options=replace(entry.options, requires_approval=self.when))

    def __repr__(self) -> str:
        shown = sorted(self._names) if self._names is not None else self._chooses
        return f"Approvals({shown!r}, when={self.when!r})"


class ForgetApprovals(Capability):
    """A run given it starts without the approvals remembered for ``tools`` (all when
    None): those a person gave with ``Approve(scope="run" | "session")``, which a session
    carries into its next runs and a checkpoint into its resume. Give it to the run —
    ``agent.run(..., session=..., capabilities=[ForgetApprovals()])`` or ``resume`` — and
    their calls ask again; the run's result no longer lists them, so the session's next runs
    do not have them either. An approval given in the same resume is kept.

    Examples:
        >>> from tooldeck.run.capabilities import ForgetApprovals
        >>> ForgetApprovals(["transfer"])
        ForgetApprovals(['transfer'])
    """

    def __init__(self, tools: Iterable[str] | None = None) -> None:
        if isinstance(tools, str):
            raise TypeError(f"ForgetApprovals takes a list of tool names, got {tools!r}")
        self.names = None if tools is None else tuple(tools)

    def instructions(self, ctx: RunView) -> str:
        """As the run starts (or resumes): drop the remembered approvals of its tools."""
        kept = None if ctx.states is None else ctx.states.get(APPROVALS_STATE)
        if isinstance(kept, dict):
            for name in list(kept) if self.names is None else self.names:
                kept.pop(name, None)
        return ""

    def __repr__(self) -> str:
        return f"ForgetApprovals({None if self.names is None else list(self.names)!r})"
