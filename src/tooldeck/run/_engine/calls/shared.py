"""What every call of a round shares, and the small records the call modules pass around."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tooldeck._untrusted import repaired, valid_text
from tooldeck.errors import ErrorCode
from tooldeck.messages import Message, ToolCall, ToolResult
from tooldeck.results import RememberedApproval, ToolTrace
from tooldeck.run._engine.contexts import run_context
from tooldeck.run._engine.hooks import Hooks
from tooldeck.run._engine.inherited import NOTHING, AfterUntrusted, Inherited
from tooldeck.run._engine.records import traced
from tooldeck.run.budget import Budget
from tooldeck.run.events import Event, nest
from tooldeck.run.observer import RunObserver
from tooldeck.run.policy import CallSignature, RunPolicy
from tooldeck.run.session import CallRecords
from tooldeck.safety import UntrustedSource
from tooldeck.tools.context import Resumption, RunContext, ToolCaller, ToolChanges
from tooldeck.tools.guardrails import ToolGuardrail
from tooldeck.tools.outputs import LargeOutput, OutputStore
from tooldeck.tools.registry import ToolEntry, ToolView

Emit = Callable[[Event], None]
"""Passes an event of a call (a run made inside it) to the round's stream."""


@dataclass(frozen=True, slots=True)
class CallOptions:
    """The agent's settings that shape how calls run."""

    include_error_details: bool = False
    max_concurrency: int | None = None
    hooks: Hooks | None = None
    """The call hooks of the agent's capabilities (its middleware among them; None: none)."""
    registry: ToolChanges | None = None
    """The agent's registry, which tools may change (``ctx.tools``)."""
    max_output_chars: int | None = None
    """The agent's default for a tool without its own ``max_output_chars``."""
    large_output: LargeOutput = "truncate"
    """The agent's default for a tool without its own ``large_output``."""
    tool_guardrails: tuple[ToolGuardrail, ...] = ()
    """``Agent(tool_guardrails=...)``: judge every tool's calls."""
    after_untrusted: AfterUntrusted = "allow"
    """What calls of tools with side effects (or sensitive ones) need once the conversation
    holds untrusted content: nothing more, a person's approval, or they are refused."""


@dataclass(slots=True)  # not frozen: the loop makes one per run and moves it to each round
class CallRound:
    """What every call of one round shares (a run's rounds share one: the loop moves its
    ``view``, ``round`` and ``tainted_by`` on as each round starts)."""

    view: ToolView
    policy: RunPolicy
    options: CallOptions
    deps: Any
    round: int
    """The model turn whose calls these are, counting from 1."""
    run_id: str
    observer: RunObserver | None = None
    """Told about each call when the run is observed (traced)."""
    messages: Sequence[Message] = ()
    """The conversation, ending with the turn that made the round's calls."""
    outputs: OutputStore | None = None
    """The run's stored outputs, when its tools may store some."""
    cancelled: threading.Event | None = None
    """Set when the run is cancelled (a run started with ``Agent.start``)."""
    records: CallRecords | None = None
    """Where ``side_effects`` calls are recorded (the run's session, when it can)."""
    tainted_by: UntrustedSource | None = None
    """The call whose result first brought untrusted content into the conversation."""
    inherits: Inherited | None = None
    """The run-level rules the runs made inside its calls inherit (None: none)."""
    budget: Budget | None = None
    """The budget the runs made inside its calls draw on: the run's shared one, and what is
    left of its own spending limits (``run.spending.left_for_calls``)."""
    states: dict[str, Any] | None = None
    """The states of the run's capabilities (``RunContext.states``)."""

    def passed_on(self) -> Inherited | None:
        """What a run made inside a call of this round starts with: the run-level rules, the
        taint, the cancel signal and the call records of the moment (None when there is none
        of these)."""
        if (
            self.inherits is None
            and self.tainted_by is None
            and self.cancelled is None
            and self.records is None
        ):
            return None
        return (self.inherits or NOTHING).at(self.tainted_by, self.cancelled, self.records)

    def context(
        self,
        call: ToolCall,
        emit: Emit | None = None,
        resumed: Resumption | None = None,
        caller: ToolCaller | None = None,
    ) -> RunContext[Any]:
        """The RunContext a tool (or a middleware hook, or an approval rule) is given; a call
        that may emit events (an agent tool, ``emit`` given) is passed on what a run made
        inside it inherits (``passed_on``); one that calls tools, the ``caller`` it calls
        them with."""
        return run_context(  # in RunContext's field order (contexts.py says why)
            call.id,
            call.name,
            self.deps,
            self.round,
            self.run_id,
            self.options.registry,
            self.messages,
            emit,
            resumed,
            self.outputs,
            self.cancelled,
            self.budget,
            None if emit is None else self.passed_on(),
            self.states,
            caller,
        )


@dataclass(slots=True)
class Ready:
    """A call that passed its checks, ready to run."""

    index: int
    """Its place in the model's turn."""
    call: ToolCall
    entry: ToolEntry
    arguments: dict[str, Any]
    """The validated arguments."""
    signature: CallSignature | None
    """Its key for the policy's repeat counting (None: not counted)."""
    edited: bool = False
    """The arguments are a person's edit (the model is told, before the result)."""
    resumed: Resumption | None = None
    """For a call that paused: what it paused with, and the decisions made since."""
    ask: str = ""
    """Why a person must approve it though its tool does not ask (untrusted content)."""
    caller: ToolCaller | None = None
    """For a tool that calls tools (``calls_tools``): the caller its handler is given."""
    remembered: RememberedApproval | None = None
    """The approval it runs under without asking (``Approve(scope="run" | "session")``)."""


def trace(
    call: ToolCall, result: ToolResult, duration_s: float, error: BaseException | None = None
) -> ToolTrace:
    """The trace of a call; a result's text is echoed and saved, so no lone surrogates."""
    output = result.output
    if not output.isascii() and not valid_text(output):
        result = result.model_copy(update={"output": repaired(output)})
    return traced(call, result, duration_s, error)


def refused(
    call: ToolCall, code: ErrorCode, text: str, error: BaseException | None = None
) -> ToolTrace:
    """The trace of a call answered without running."""
    return trace(call, ToolResult.failure(code, text), 0.0, error)


def emitter(item: Ready, put: Emit) -> Emit | None:
    """How a call passes on the events of the run inside it (an agent tool's): nested under
    the call — a model's call, or a code-mode program's call of an agent tool alike."""
    if not item.entry.emits_events:
        return None
    path, call_ids = (item.entry.name,), (item.call.id,)
    return lambda event: put(nest(path, call_ids, event))
