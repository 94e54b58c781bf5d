"""A run's journal: what a run in a session has done, written before what it does next.

In a session that keeps one (``RunJournal``: ``SQLiteSession`` and ``PostgresSession``), a
run is *opened* before its first request — an entry of the session's log holding its prompt
(or a resume's decisions) and the process that runs it, so two runs of one session never
interleave — and writes a *step* after each model response that holds calls, before they
run, and after each round of calls. Its ``side_effects`` calls are recorded as they start and
finish (``tooldeck.run._engine.once``), keyed by the run id and the call's place in the run. The
journal is dropped when the run commits (its stored run or its pause).

Whatever meets the run again goes on from its journal (``tooldeck.run._engine.in_session``) and
never asks the model for a round it already answered. Without a session nothing is
journaled, and nothing is paid for it.
"""

from __future__ import annotations

import copy
import os
import socket
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import PydanticSerializationError

from tooldeck.errors import RunStopped, SessionError
from tooldeck.messages import FROZEN, Message, ToolResult, Usage
from tooldeck.results import (
    ApprovalScope,
    Approve,
    Checkpoint,
    Decision,
    HistorySummary,
    Reject,
    RunCounters,
    ShownHistory,
    StopReason,
    ToolTrace,
    unstorable_state,
)
from tooldeck.run._engine.state import OpenTurn, RunState
from tooldeck.run.events import Event, ModelRequest, ModelResponse
from tooldeck.run.policy import RunPolicy
from tooldeck.run.session import History, RunJournal, UnfinishedRun
from tooldeck.safety import GuardrailDecision, UntrustedSource


class Writer(BaseModel):
    """The process that runs a journaled run: its host, process id and start time."""

    model_config = FROZEN

    host: str
    pid: int
    started: int | None = None
    """When the process started (clock ticks since boot, Linux), so that a new process given
    the same id later is not taken for it; None where the system does not say."""

    def alive(self) -> bool:
        """Whether that process is still there. A process on another host cannot be seen
        from here: it is taken to be alive (its run is left alone)."""
        if self.host != _HOST:
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # there, but another user's
            pass
        return self.started is None or _start_time(self.pid) in (None, self.started)

    def is_here(self) -> bool:
        """Whether it is this process."""
        return self.host == _HOST and self.pid == os.getpid()


_HOST = socket.gethostname()


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return int(fields[19])  # the 22nd field of the whole line
    except (IndexError, ValueError):
        return None


def this_process() -> Writer:
    """The Writer of the process asking (its pid is read each time: a fork is another)."""
    pid = os.getpid()
    return Writer(host=_HOST, pid=pid, started=_start_time(pid))


class StoredDecision(BaseModel):
    """One decision of a resume, as its journal keeps it."""

    model_config = FROZEN

    kind: Literal["approve", "reject", "result"]
    arguments: dict[str, Any] | None = None
    by: str = ""
    message: str = ""
    result: ToolResult | None = None
    scope: ApprovalScope = Field(default="once", exclude_if=lambda scope: scope == "once")
    """An approval's scope (left out when it is for this call only)."""

    @classmethod
    def of(cls, decision: Decision) -> StoredDecision:
        """The decision as the journal keeps it."""
        if isinstance(decision, Approve):
            return cls(
                kind="approve", arguments=decision.arguments, by=decision.by, scope=decision.scope
            )
        if isinstance(decision, Reject):
            return cls(kind="reject", message=decision.message, by=decision.by)
        return cls(kind="result", result=decision)

    def decision(self) -> Decision:
        """The decision it keeps."""
        if self.kind == "approve":
            return Approve(arguments=self.arguments, by=self.by, scope=self.scope)
        if self.kind == "reject":
            return Reject(message=self.message, by=self.by)
        if self.result is None:
            raise ValueError("a stored external result has no result")
        return self.result


class Opening(BaseModel):
    """A journaled run's opening (its step 0): who runs it, from which head of the session's
    log, and how it began."""

    model_config = FROZEN

    writer: Writer
    after: int
    """The head of the session's log the run started after (its commit goes after it)."""
    prompt: tuple[Message, ...] = ()
    """A run from a prompt: the messages it added first (its prompt)."""
    paused: Checkpoint | None = None
    """A resume: the pause it went on from."""
    decisions: dict[str, StoredDecision] | None = None
    """A resume: the decisions it went on with, by pending call id."""
    stopped: bool = False
    """The run stopped without finishing, in a process that went on (an error, a closed
    stream): no process runs it any more."""

    def decided(self) -> dict[str, Decision]:
        """A resume's decisions, by pending call id (none for a run from a prompt)."""
        return {key: stored.decision() for key, stored in (self.decisions or {}).items()}


class JournalStep(BaseModel):
    """What a run added since its previous step, and its counters now."""

    model_config = FROZEN

    round: int
    messages: tuple[Message, ...]
    """The messages added since the previous step (a model turn, or a round's results)."""
    trace: tuple[ToolTrace, ...] = ()
    """The calls answered since the previous step."""
    open_turn: bool = False
    """The last message is a model turn whose calls had not run when the step was written."""
    usage: Usage
    counters: RunCounters
    guardrails: tuple[GuardrailDecision, ...] = ()
    """The guardrails' decisions made since the previous step."""
    tainted_by: UntrustedSource | None = None
    agent: str = ""
    """The agent that held the run (it changes at each handoff)."""
    shown: ShownHistory | None = None
    summary: HistorySummary | None = None
    capability_states: dict[str, Any] | None = None
    """The states of the run's capabilities when the step was written."""


@dataclass(frozen=True, slots=True)
class Journaled:
    """An unfinished run of a session, read back from its journal."""

    run_id: str
    opening: Opening
    steps: tuple[JournalStep, ...]

    @property
    def paused(self) -> Checkpoint | None:
        """For a resume: the pause it went on from."""
        return self.opening.paused

    @property
    def in_progress(self) -> bool:
        """Whether a process still runs it (then nothing else may touch it)."""
        if self.opening.stopped:
            return False
        writer = self.opening.writer
        if writer.is_here():
            return self.run_id in _running
        return writer.alive()

    @property
    def rounds(self) -> int:
        """The model rounds it had (its last step's count)."""
        if self.steps:
            return self.steps[-1].counters.rounds
        return self.paused.counters.rounds if self.paused is not None else 0

    @property
    def holder(self) -> str:
        """The name of the agent that held it last ('' : the agent it started on)."""
        if self.steps:
            return self.steps[-1].agent
        return self.paused.agent if self.paused is not None else ""


_running: set[str] = set()
"""The ids of the journaled runs this process drives now."""


def running(run_id: str) -> None:
    """This process drives run ``run_id`` from now on (until ``done``)."""
    _running.add(run_id)


def done(run_id: str) -> None:
    """This process no longer drives run ``run_id``."""
    _running.discard(run_id)


def read_unfinished(unfinished: UnfinishedRun | None, head: int) -> Journaled | None:
    """The session's unfinished run, if its latest opened run is one (it started after the
    log's head as it is now: it never committed), each body read and checked.

    Raises:
        SessionError: a body is not what tooldeck writes (naming the run and the step).
    """
    if unfinished is None:
        return None
    where = f"run {unfinished.run_id!r} of {unfinished.where}"
    opening: Opening = _read(Opening, unfinished.opened, f"the opening of {where}")
    if opening.after != head:  # it lost the head to another run, which committed
        return None
    steps = tuple(
        _read(JournalStep, body, f"step {number} of {where}")
        for number, body in enumerate(unfinished.steps, start=1)
    )
    return Journaled(unfinished.run_id, opening, steps)


def read_steps(bodies: Sequence[str], run_id: str, where: str) -> tuple[JournalStep, ...]:
    """The steps of run ``run_id`` (an agent tool's inner run) read back."""
    return tuple(
        _read(JournalStep, body, f"step {number} of run {run_id!r} of {where}")
        for number, body in enumerate(bodies, start=1)
    )


def _read(kind: type[Any], body: str, what: str) -> Any:
    try:
        return kind.model_validate_json(body)
    except ValidationError as error:
        detail = error.errors()[0]
        place = ".".join(map(str, detail["loc"]))
        problem = f"{place}: {detail['msg']}" if place else detail["msg"]
        raise SessionError(f"{what} cannot be read: {problem}") from None


def apply_steps(
    state: RunState, policy_counters: RunCounters | None, steps: Sequence[JournalStep]
) -> RunCounters | None:
    """``state`` brought to where the steps leave the run; the counters its policy resumes
    with (those given when there are no steps)."""
    counters = policy_counters
    for step in steps:
        state.messages.extend(step.messages)
        state.trace.extend(step.trace)
        state.guardrails = (*state.guardrails, *step.guardrails)
        counters = step.counters
    if not steps:
        return counters
    last = steps[-1]
    usage = last.usage
    state.input_tokens, state.output_tokens = usage.input_tokens, usage.output_tokens
    state.requests = usage.requests
    state.cost_usd, state.cost_known = usage.cost_usd or 0.0, usage.cost_usd is not None
    state.tainted_by = last.tainted_by or state.tainted_by
    state.agent, state.shown = last.agent or state.agent, last.shown
    state.summary = last.summary or state.summary
    if last.capability_states is not None:
        state.states = copy.deepcopy(last.capability_states)
    state.turn = None
    if last.open_turn:
        state.turn = OpenTurn(last.round, state.messages[-1].tool_calls)
    return counters


class JournalWriter:
    """Writes one run's steps as the run goes (``journaled``)."""

    __slots__ = ("_guardrails", "_journal", "_messages", "_trace", "run_id", "step")

    def __init__(self, journal: RunJournal, run_id: str, step: int = 0) -> None:
        self._journal = journal
        self.run_id = run_id
        self.step = step
        """The number of the last step written."""
        self._messages = self._trace = self._guardrails = -1

    def start_at(self, state: RunState) -> None:
        """What ``state`` holds as the run (re)starts is written already."""
        self._messages, self._trace = len(state.messages), len(state.trace)
        self._guardrails = len(state.guardrails)

    async def write(
        self, state: RunState, policy: RunPolicy, open_turn: bool, asking: bool = False
    ) -> None:
        """Write what the run added since the last step, if anything (``asking``: as its
        next request is made, which the policy has counted already, and a run going on from
        this step makes again)."""
        if len(state.messages) == self._messages:
            return
        counters = policy.counters()
        if asking:
            counters = counters.model_copy(update={"rounds": counters.rounds - 1})
        step = JournalStep(
            round=counters.rounds,
            messages=tuple(state.messages[self._messages :]),
            trace=tuple(state.trace[self._trace :]),
            open_turn=open_turn,
            usage=state.usage,
            counters=counters,
            guardrails=state.guardrails[self._guardrails :],
            tainted_by=state.tainted_by,
            agent=state.agent,
            shown=state.shown,
            summary=state.summary,
            capability_states=state.states,
        )
        try:
            body = step.model_dump_json()
        except PydanticSerializationError as error:
            raise unstorable_state(state.states, error) from error
        await self._journal.write_step(self.run_id, self.step + 1, body)
        self.step += 1
        self.start_at(state)


async def journaled(
    events: AsyncGenerator[Event, None], state: RunState, policy: RunPolicy, writer: JournalWriter
) -> AsyncGenerator[Event, None]:
    """The run's events, its journal written ahead: a model turn with calls before they run
    (on its ModelResponse), a round's results before the next request (on its ModelRequest).
    The stream is suspended at each of these events until its step is written."""
    if writer._messages < 0:
        writer.start_at(state)
    async with aclosing(events):
        try:
            async for event in events:
                kind = type(event)
                if kind is ModelResponse and state.turn is not None:
                    await writer.write(state, policy, open_turn=True)
                elif kind is ModelRequest:
                    await writer.write(state, policy, open_turn=False, asking=True)
                yield event
        except RunStopped:  # the run stopped where it stands: keep what it did
            await writer.write(state, policy, open_turn=state.turn is not None)
            raise
        except SessionError as error:  # a step could not be written: nothing more runs
            if error.result is None:
                error.result = state.result("", StopReason.SESSION_ERROR)
                error.add_note(
                    "the run stopped: its journal could not be written, so nothing after its "
                    "last step was asked or run (the run so far is in this error's .result)"
                )
            raise


def decisions_body(decisions: Mapping[str, Decision]) -> dict[str, StoredDecision]:
    """A resume's decisions as its opening keeps them."""
    return {key: StoredDecision.of(decision) for key, decision in decisions.items()}


def conversation(history: History) -> tuple[Message, ...]:
    """A session's conversation as it stands, for a person to read: its stored runs, then
    what its unfinished run (killed, or stopped) did so far — its prompt and every round
    it wrote — which the session's next run closes into the stored conversation."""
    unfinished = read_unfinished(history.unfinished, history.head)
    if unfinished is None:
        return history.messages
    if unfinished.paused is not None:
        base: tuple[Message, ...] = unfinished.paused.messages
    else:
        base = (*history.messages, *unfinished.opening.prompt)
    added = tuple(message for step in unfinished.steps for message in step.messages)
    return (*base, *added)
