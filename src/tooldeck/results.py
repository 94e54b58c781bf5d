"""What a run produces for the host: stop reasons, call traces, pauses and the run's result.

``Checkpoint`` is a paused run as versioned JSON (its signing and restoring live in
``tooldeck.run._engine.checkpoint``). May import: ``tooldeck.errors``, ``tooldeck._untrusted``,
``tooldeck.messages``, ``tooldeck.safety``, ``tooldeck._traced``, ``tooldeck._decisions``
(the decisions on paused calls, re-exported here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    Field,
    PlainSerializer,
    PlainValidator,
    SerializationInfo,
    ValidationError,
)
from pydantic_core import PydanticSerializationError, to_json

from tooldeck._decisions import APPROVAL_SCOPES as APPROVAL_SCOPES
from tooldeck._decisions import APPROVALS_STATE as APPROVALS_STATE
from tooldeck._decisions import ApprovalScope as ApprovalScope
from tooldeck._decisions import Approve as Approve
from tooldeck._decisions import Decision as Decision
from tooldeck._decisions import Reject as Reject
from tooldeck._decisions import RememberedApproval as RememberedApproval
from tooldeck._decisions import remembered_approvals as remembered_approvals
from tooldeck._traced import RecordedError as RecordedError
from tooldeck._traced import TracedError
from tooldeck.errors import CheckpointError, ErrorCode
from tooldeck.messages import FROZEN, Message, ToolCall, ToolResult, Usage
from tooldeck.safety import GuardrailDecision, UntrustedSource, unsigned_safety_defaults

__all__ = [  # the decisions (tooldeck._decisions) are documented here, where users import them
    "ApprovalScope",
    "Approve",
    "Checkpoint",
    "Decision",
    "HistorySummary",
    "PausedTurn",
    "PendingCall",
    "Reject",
    "RememberedApproval",
    "RepeatRecord",
    "RunCounters",
    "RunResult",
    "ShownHistory",
    "StopReason",
    "ToolTrace",
    "remembered_approvals",
    "states_json",
    "unstorable_state",
]


class StopReason(StrEnum):
    """Why a run ended (``RunResult.stop_reason``); JSON keeps the plain text."""

    ANSWER = "answer"
    """The model answered."""
    PAUSED = "paused"
    """Calls wait for a person's decision or the application's result (``result.pending``)."""
    MAX_ROUNDS = "max_rounds"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_DURATION_S = "max_duration_s"
    RETRIES = "retries"
    """A tool's calls failed too many times in a row."""
    MODEL_ERROR = "model_error"
    TOOL_RAISED = "tool_raised"
    """A tool with ``on_error="raise"`` raised."""
    OUTPUT_RETRIES = "output_retries"
    """The model's typed answer did not validate too many times."""
    MIDDLEWARE_ERROR = "middleware_error"
    """A middleware hook raised (``MiddlewareError``)."""
    MAX_TOKENS = "max_tokens"
    """The run spent ``max_input_tokens``, ``max_output_tokens`` or ``max_total_tokens``."""
    MAX_COST = "max_cost"
    """The run spent ``max_cost_usd`` (or a response's cost was unknown under that limit)."""
    BUDGET = "budget"
    """A ``Budget`` shared with other runs was spent."""
    CANCELLED = "cancelled"
    """``RunHandle.cancel()`` stopped the run."""
    GUARDRAIL = "guardrail"
    """A guardrail stopped the run (``GuardrailTripped``)."""
    SESSION_ERROR = "session_error"
    """The run's session could not be written (its journal, before the run went on): the
    run stopped with what it had (``SessionError``)."""


class ToolTrace(BaseModel):
    """What happened to one call, for the host: the result and, if any, the real exception."""

    model_config = FROZEN

    call: ToolCall
    result: ToolResult
    duration_s: float
    error: TracedError = None
    """The exception behind a failure, even when the model only read a generic line.

    In JSON it is ``{"type": ..., "message": ...}``, read back as a RecordedError.
    """
    inner_trace: InnerTrace = None
    """For a call of an agent tool (``agent.as_tool``): every call of the inner run."""
    full_output: str | None = Field(default=None, exclude_if=lambda text: text is None)
    """The tool's whole output when the model read less of it (``max_output_chars``); None
    when the model read it all."""
    untrusted: bool = Field(default=False, exclude_if=lambda tainted: not tainted)
    """The run made inside the call (an agent tool's) read untrusted content: the result
    may carry it, so it taints the conversation as an untrusted tool's result does."""


def _inner_from_python(value: Any) -> tuple[ToolTrace, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):  # a stored checkpoint may hold anything here
        raise ValueError(f"expected a list of tool traces or null, got {type(value).__name__}")
    return tuple(t if isinstance(t, ToolTrace) else ToolTrace.model_validate(t) for t in value)


def _inner_to_python(
    value: tuple[ToolTrace, ...] | None, info: SerializationInfo
) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    return [trace.model_dump(mode=info.mode) for trace in value]


InnerTrace = Annotated[
    tuple["ToolTrace", ...] | None,
    PlainValidator(_inner_from_python),
    PlainSerializer(_inner_to_python),
]
"""Traces of an inner run. Validated and serialized by functions, so that ToolTrace is not a
recursive schema: pydantic validates recursive models through an indirection that costs
every ToolTrace, nested or not, about 15% more to build."""


PendingKind = Literal["approval", "external", "agent"]


class PendingCall(BaseModel):
    """A call the run paused for: a person must decide on it, or the application run it."""

    model_config = FROZEN

    call: ToolCall
    """The call exactly as stored; a decision approves this call and no other."""
    kind: PendingKind
    """``approval``: Approve or Reject it; ``external``: send back its ToolResult; ``agent``:
    a call of an agent tool whose run paused (stored only: ``Checkpoint.pending`` shows the
    inner run's pending calls in its place)."""
    digest: str
    """SHA-256 of (run id, call id, tool name, canonical JSON of the arguments)."""
    nested: Checkpoint | None = None
    """For an ``agent`` call: the checkpoint of the inner run, which goes on when this one does."""
    path: tuple[str, ...] = ()
    """For a call made inside other calls — agent tools, or a code-mode program's
    ``run_code`` — their names, outermost first (``("planner", "researcher")``); empty for
    the calls the model made."""
    call_ids: tuple[str, ...] = ()
    """The ids of those calls, in the same order as ``path``."""
    reason: str = ""
    """Why it waits, when its tool does not ask (``Agent(after_untrusted="ask")``)."""
    own: bool = True
    """The paused run made it: its model, or a program in one of its calls (code mode).
    False for a call of an agent tool's run, which ends with the call: only the run's own
    calls may be approved with a scope (``Approve(scope="run")``)."""
    where: str = ""
    """For a call a code-mode program makes: the program's line that makes it (``"line 3:
    total += await refund(order=3)"``), for the person who decides."""
    reaches: tuple[str, ...] = ()
    """For a call of a tool that calls tools (code mode's ``run_code`` approved as a whole):
    the tools it may call, which ask no more once it is approved."""

    @property
    def id(self) -> str:
        """The key of this call's decision: its call id, after those of the agent-tool calls
        it runs inside (``"c1/c7"``). A bare call id is accepted too when it is unique."""
        if not self.call_ids:
            return self.call.id
        return "/".join((*self.call_ids, self.call.id))


class RunCounters(BaseModel):
    """What the run policy has counted so far, as a checkpoint keeps it."""

    model_config = FROZEN

    rounds: int = 0
    tool_calls: int = 0
    failures: dict[str, tuple[ErrorCode, ...]] = {}
    """Per tool: the codes of its consecutive failed calls."""
    repeats: tuple[RepeatRecord, ...] = ()
    output_failures: int = 0
    """Typed answers refused so far."""
    elapsed_s: float = 0.0
    """Time the run has used; the time spent paused does not count."""
    calls_by_tool: dict[str, int] = Field(default={}, exclude_if=lambda counts: not counts)
    """Per tool with ``max_calls``: its calls so far (left out of JSON when empty)."""


class RepeatRecord(BaseModel):
    """How often the model made one exact call, and what that call returned last."""

    model_config = FROZEN

    name: str
    arguments: dict[str, Any] = {}
    raw_arguments: str | None = None
    count: int
    last_output: str | None = None


class PausedTurn(BaseModel):
    """The model turn a run paused in: the calls answered so far and those that wait."""

    model_config = FROZEN

    round: int
    answered: dict[str, ToolResult] = {}
    """Call id -> result, for the turn's calls that already ran or were refused."""
    pending: tuple[PendingCall, ...]
    untrusted: tuple[str, ...] = ()
    """The answered calls of the turn whose results are untrusted content."""


class HistorySummary(BaseModel):
    """The model's summary of a conversation's first ``covers`` messages, sent in their place.

    Made by the ``Summarize`` history strategy and kept (in the run, its checkpoint and its
    result) so it is not asked for again.
    """

    model_config = FROZEN

    text: str
    covers: int
    """How many messages, from the start of the conversation, it stands for."""
    digest: str
    """SHA-256 chain over those messages: the summary applies to them and no others."""


CHECKPOINT_VERSION = 1


class ShownHistory(BaseModel):
    """What the agent a run was handed to is shown in place of the conversation before the
    handoff (its handoff's ``history``, other than ``"all"``)."""

    model_config = FROZEN

    messages: tuple[Message, ...]
    """Shown in place of the first ``since`` messages: the history chosen, then the
    transfer call and its result."""
    since: int
    """How many messages of the conversation there were at the handoff."""


class Checkpoint(BaseModel):
    """A paused run: everything needed to go on later, in any process, as plain JSON.

    ``deps`` are not stored: pass them again to ``agent.resume(...)``.
    """

    model_config = FROZEN

    version: int = CHECKPOINT_VERSION
    run_id: str
    messages: tuple[Message, ...]
    """The conversation; the last message is the assistant turn with the waiting calls."""
    trace: tuple[ToolTrace, ...]
    usage: Usage
    counters: RunCounters
    turn: PausedTurn
    history_summary: HistorySummary | None = None
    """The summary of the earlier conversation, with ``Agent(history_strategy=Summarize(...))``."""
    guardrails: tuple[GuardrailDecision, ...] = ()
    """The guardrails' decisions so far."""
    tainted_by: UntrustedSource | None = None
    """The call that first brought untrusted content into the conversation, if one did."""
    agent: str = ""
    """The name of the agent the run paused in (a resume goes on in it, found through the
    resuming agent's handoffs); empty in a checkpoint made before handoffs."""
    shown: ShownHistory | None = None
    """What that agent is shown of the conversation before its handoff, if not all of it."""
    capability_states: dict[str, Any] | None = None
    """The states of the run's capabilities by name (``Capability.initial_state``)."""
    queued: tuple[Message, ...] = ()
    """Messages sent to the run (``RunHandle.send``) that had not joined its conversation
    when it paused: they join it before the resumed run's first request."""
    signature: str | None = None
    """HMAC-SHA256 of the rest, when the agent has a ``checkpoint_key``."""

    @property
    def approvals(self) -> tuple[RememberedApproval, ...]:
        """The approvals the paused run remembers (``Approve(scope=...)``)."""
        return remembered_approvals(self.capability_states)

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """The calls that wait for a decision, in the model's order; a paused agent tool's
        call is replaced by the pending calls of its inner run (with ``path`` and ``call_ids``)."""
        if not any(pending.nested is not None for pending in self.turn.pending):
            return self.turn.pending
        return tuple(_leaves(self, (), (), own=True))

    def to_json(self) -> str:
        """The checkpoint as JSON text (``Checkpoint.from_json`` reads it back).

        Raises:
            TypeError: a capability's state is not JSON-able (naming the capability).
        """
        try:
            return self.model_dump_json()
        except PydanticSerializationError as error:
            raise unstorable_state(self.capability_states, error) from error

    def signed_payload(self) -> bytes:
        """The canonical bytes the signature covers: every field but the signature."""
        # Without a summary the payload is the one checkpoints had before the field existed.
        unsigned = {"signature"} if self.history_summary else {"signature", "history_summary"}
        body = unsigned_safety_defaults(self.model_dump(mode="json", exclude=unsigned))
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8", "surrogatepass")

    @classmethod
    def from_json(cls, text: str | bytes) -> Checkpoint:
        """Read a checkpoint; a broken one, or one of an unknown version, is a CheckpointError."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise CheckpointError(f"the checkpoint is not valid JSON: {error}") from None
        if not isinstance(data, dict) or "version" not in data:
            raise CheckpointError(
                "not a tooldeck checkpoint: expected a JSON object with 'version'"
            )
        if data["version"] != CHECKPOINT_VERSION:
            raise CheckpointError(
                f"checkpoint version {data['version']!r} is not one this tooldeck reads "
                f"(version {CHECKPOINT_VERSION}); resume it with the tooldeck that made it"
            )
        try:
            checkpoint = cls.model_validate(data)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'checkpoint'}: {e['msg']}"
                for e in error.errors()[:5]
            )
            raise CheckpointError(f"the checkpoint is broken: {problems}") from None
        except RecursionError:  # traces of agent tools inside agent tools, hundreds deep
            raise CheckpointError(
                "the checkpoint is broken: it nests deeper than any run makes it"
            ) from None
        try:  # what is read must be writable again: signed, stored with a session, paused
            checkpoint.to_json()
        except (ValueError, RecursionError) as error:
            raise CheckpointError(
                f"the checkpoint is broken: it holds what no run makes (data nested too deep, "
                f"text that is not valid Unicode) and cannot be written again: {error}"
            ) from None
        return checkpoint


def states_json(states: Mapping[str, Any]) -> str:
    """Capability states as JSON text, each written as a checkpoint writes it (``set`` as a
    list, ``datetime`` as ISO text...).

    Raises:
        TypeError: a state is not a dict, or holds what JSON cannot (naming the capability).
    """
    for key, state in states.items():
        if not isinstance(state, dict):
            raise TypeError(
                f"the state of capability {key!r} cannot be stored: it is "
                f"{type(state).__name__} {state!r}, not a dict (initial_state and "
                "next_run_state return a dict)"
            )
    try:
        return to_json(states).decode()
    except PydanticSerializationError as error:
        raise unstorable_state(states, error) from error


def unstorable_state(
    states: Mapping[str, Any] | None, error: PydanticSerializationError
) -> Exception:
    """What to raise when a record holding capability states cannot be written as JSON: a
    TypeError naming the capability whose state is the cause, or ``error`` if none is."""
    for key, state in (states or {}).items():
        try:
            to_json(state)
        except PydanticSerializationError as cause:
            return TypeError(
                f"the state of capability {key!r} cannot be stored as JSON ({cause}): keep "
                "JSON values in it (dicts, lists, text, numbers, true, false, None), as "
                "checkpoints, journals and sessions store it"
            )
    return error


def _leaves(
    paused: Checkpoint, path: tuple[str, ...], call_ids: tuple[str, ...], own: bool
) -> Iterator[PendingCall]:
    """The calls that wait inside ``paused``; ``own`` while every checkpoint on the way is
    the top run's (a code-mode program's has its run id; an agent tool's run has its own)."""
    for item in paused.turn.pending:
        if item.nested is not None:
            inner = item.nested
            still_own = own and inner.run_id == paused.run_id
            yield from _leaves(inner, (*path, item.call.name), (*call_ids, item.call.id), still_own)
        elif path:
            yield item.model_copy(update={"path": path, "call_ids": call_ids, "own": own})
        else:
            yield item


OutputT = TypeVar("OutputT")


class RunResult(BaseModel, Generic[OutputT]):
    """Everything a run produced; ``output`` is the typed answer (``Agent(output_type=T)``)."""

    model_config = FROZEN

    answer: str
    """The model's final text (for a typed answer, the JSON it wrote); empty when the run
    stopped before it answered (but for a turn of calls that spent a limit under
    ``on_limit="final_answer"``: the text it wrote beside them, which is no answer)."""
    output: OutputT | None = None
    """The validated answer: an ``output_type`` value, or the answer text without one; None
    when the run stopped before it answered (a spent limit or budget under
    ``on_limit="final_answer"`` included: the model is not asked again)."""
    messages: tuple[Message, ...]
    """The whole conversation, starting with the given history and the prompt."""
    tool_trace: tuple[ToolTrace, ...]
    """Every call in order, with its result, duration and exception."""
    usage: Usage
    stop_reason: StopReason
    """``answer`` when the model answered; ``paused``; otherwise the limit or error."""
    run_id: str = ""
    """The run's id: the same across a pause and its resumes."""
    pending: tuple[PendingCall, ...] = ()
    """For a paused run: the calls that wait, in the model's order."""
    checkpoint: Checkpoint | None = None
    """For a paused run: what ``agent.resume(...)`` goes on from."""
    history_summary: HistorySummary | None = None
    """The summary the ``Summarize`` history strategy sent in place of the earliest turns
    (store it and give it back with ``Summarize.remember`` so it is not made again)."""
    guardrails: tuple[GuardrailDecision, ...] = ()
    """Every guardrail's decision, in order (``Agent(input_guardrails=...)`` and the rest)."""
    tainted_by: UntrustedSource | None = None
    """The call that first brought untrusted content into the conversation (or an earlier one)."""
    agent: str = ""
    """The name of the agent that answered (or paused, or stopped): with handoffs, the last
    one the conversation was handed to; without, the agent's own ``name``."""
    capability_states: dict[str, Any] | None = None
    """The states of the run's capabilities as it ended, by ``state_key`` (None: none keeps
    one); a session keeps them for its next run (``Capability.next_run_state``)."""

    @property
    def approvals(self) -> tuple[RememberedApproval, ...]:
        """The approvals the run remembers (``Approve(scope="run" | "session")``): the
        later calls of those tools run without pausing; a session keeps the ``session`` ones
        for its next runs."""
        return remembered_approvals(self.capability_states)
