"""DurableAgent: an Agent whose runs are DBOS workflows."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypedDict

from dbos import DBOS, Queue, SetWorkflowID, WorkflowHandle, WorkflowHandleAsync
from dbos import error as dbos_errors
from typing_extensions import Unpack

from tooldeck.durable._budget import durable_budget
from tooldeck.durable._mailbox import SentMessages, deliver
from tooldeck.durable._named import Named, checked_name, looked_up
from tooldeck.durable._pauses import (
    Cancel,
    LocalPauses,
    current_pause,
    next_stop,
    portable,
    publish,
    receive,
    send,
    send_cancel,
)
from tooldeck.durable._sessions import SessionSource, commit_turn, load_history
from tooldeck.durable._steps import DurableModel, durable_entries, reserved_steps
from tooldeck.errors import RunStopped
from tooldeck.messages import Message
from tooldeck.models.base import Model
from tooldeck.results import Decision, RunResult
from tooldeck.run._engine._sync import run_sync
from tooldeck.run.agent import Agent, DepsT, OutputT
from tooldeck.run.budget import Budget
from tooldeck.run.handle import RunHandle, start_carrying, user_message
from tooldeck.run.history import give_back
from tooldeck.sessions import Session


class DurableRunArgs(TypedDict, total=False):
    """The keyword options of a durable run (``run``, ``run_sync``, ``start``,
    ``start_async``): like ``RunArgs``, but what cannot be stored is named."""

    deps: str | None
    """The name of the run's deps (a key of ``DurableAgent(deps=...)``); the process that
    executes the run builds them."""
    history: Sequence[Message]
    """An earlier conversation to continue; not with ``session``."""
    run_id: str | None
    """The workflow id (random by default): starting an id again joins that run."""
    session: str | None
    """A session id (opened by ``DurableAgent(sessions=...)`` where the run executes): the
    run starts from its history, read once, and commits its turn when it ends — after its
    pauses — or raises SessionConflict if another run committed first."""
    budget: str | None
    """The name of a shared budget (a key of ``DurableAgent(budgets=...)``, found where the
    run executes) the run draws on; it stops with stop reason ``budget`` when spent."""


DepsSource = Named[DepsT]
"""Where a worker finds a run's deps by name: a mapping, or a function of the name."""

_LOCAL_FIRST_S = 1.0
"""How long a caller waits for a pause told in-process before it also watches the database
(a run it started usually executes in its own process)."""
_LANE = "durable"
"""The loop ``run_sync`` and ``resume_sync`` use, apart from plain runs' (DBOS changes it)."""
_DECLARED: dict[str, DurableAgent[Any, Any]] = {}


class DurableAgent(Generic[DepsT, OutputT]):
    """Runs an Agent as DBOS workflows: each model request and tool call is a step.

    Declare it before ``DBOS.launch()`` in every process that runs or starts its runs (the
    workers find the workflow by ``name``). What cannot be stored — the model, clients,
    ``deps`` — stays in each process: a run names its deps (``deps="default"``), and the
    worker executing it looks the name up in ``deps``.

    Args:
        agent: The agent (each process builds its own, with its own model).
        name: Names the workflow and its steps; the same in every process, unique in each.
        deps: Named deps for runs to use: a mapping, or a function from a name to deps.
        sessions: How this process opens a session by its id (``lambda session_id:
            PostgresSession(dsn, session_id)``), for runs started with ``session=ID``.
        budgets: Named shared budgets (``tooldeck.run.budget.Budget``, or a store such as
            ``SQLiteBudget``) for runs started with ``budget=NAME``: a mapping, or a
            function from a name to a budget.
    """

    def __init__(
        self,
        agent: Agent[DepsT, OutputT],
        *,
        name: str,
        deps: DepsSource[DepsT] | None = None,
        sessions: SessionSource | None = None,
        budgets: Named[Budget] | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"DurableAgent wraps an Agent, got {type(agent).__name__}")
        _check_name(name)
        self.agent = agent
        self.name = name
        self._deps = deps
        self._sessions = sessions
        self._budgets = budgets
        self._running: dict[str, RunHandle[OutputT]] = {}
        self._twin = agent.wrapped(model=self._durable_model, tool=durable_entries(name))
        _claim(name, self)
        self._pauses = LocalPauses()
        self._workflow = self._declare()

    def _durable_model(self, model: Model) -> Model:
        return DurableModel(model, self.name)

    def _declare(self) -> Callable[..., Any]:
        async def tooldeck_run(
            prompt: str,
            history: tuple[Message, ...],
            deps: str | None,
            session: str | None = None,
            budget: str | None = None,
        ) -> RunResult[OutputT]:
            return await self._execute(prompt, history, deps, session, budget)

        return DBOS.workflow(name=f"tooldeck.run:{self.name}")(tooldeck_run)

    async def run(self, prompt: str, **options: Unpack[DurableRunArgs]) -> RunResult[OutputT]:
        """Run as a workflow until the model answers or the run pauses (then it waits,
        durably, for ``resume``); a RunStopped is raised as by ``Agent.run``. ``options``:
        see ``DurableRunArgs`` (``deps`` and ``session`` by name)."""
        run_id = options.get("run_id") or uuid.uuid4().hex
        args = self._arguments(prompt, options)
        told = self._pauses.expect(run_id, 1)
        try:
            with _launched(self.name), SetWorkflowID(run_id):
                handle = await DBOS.start_workflow_async(self._workflow, *args)
            return await next_stop(handle, told, run_id, 1, _LOCAL_FIRST_S)
        finally:
            self._pauses.forget(run_id, 1, told)

    def run_sync(self, prompt: str, **options: Unpack[DurableRunArgs]) -> RunResult[OutputT]:
        """``run()`` for synchronous code."""
        return run_sync(self.run(prompt, **options), lane=_LANE)

    def start(
        self,
        prompt: str,
        *,
        queue: Queue | str | None = None,
        **options: Unpack[DurableRunArgs],
    ) -> WorkflowHandle[RunResult[OutputT]]:
        """Start the run and return DBOS's handle at once (``get_workflow_id()``,
        ``get_result()`` waits for the end, through any pauses). With ``queue`` the run
        waits on that DBOS queue for a worker (``DBOS.register_queue(name, ...)``)."""
        args = self._arguments(prompt, options)
        run_id = options.get("run_id")
        with _launched(self.name), SetWorkflowID(run_id) if run_id else nullcontext():
            if queue is None:
                return DBOS.start_workflow(self._workflow, *args)
            return DBOS.enqueue_workflow(_queue_name(queue), self._workflow, *args)

    async def start_async(
        self,
        prompt: str,
        *,
        queue: Queue | str | None = None,
        **options: Unpack[DurableRunArgs],
    ) -> WorkflowHandleAsync[RunResult[OutputT]]:
        """``start()`` for async code (without a queue the run executes on this loop)."""
        args = self._arguments(prompt, options)
        run_id = options.get("run_id")
        with _launched(self.name), SetWorkflowID(run_id) if run_id else nullcontext():
            if queue is None:
                return await DBOS.start_workflow_async(self._workflow, *args)
            return await DBOS.enqueue_workflow_async(_queue_name(queue), self._workflow, *args)

    async def resume(self, run_id: str, decisions: Mapping[str, Decision]) -> RunResult[OutputT]:
        """Send ``decisions`` to the paused run (``send_decisions``) and wait until it answers
        or pauses again, wherever it executes."""
        pause = await self.send_decisions(run_id, decisions)
        told = self._pauses.expect(run_id, pause + 1)
        try:
            handle: WorkflowHandleAsync[RunResult[OutputT]]
            handle = await DBOS.retrieve_workflow_async(run_id)
            return await next_stop(handle, told, run_id, pause + 1, 0.0)
        finally:
            self._pauses.forget(run_id, pause + 1, told)

    def resume_sync(self, run_id: str, decisions: Mapping[str, Decision]) -> RunResult[OutputT]:
        """``resume()`` for synchronous code."""
        return run_sync(self.resume(run_id, decisions), lane=_LANE)

    async def send_decisions(self, run_id: str, decisions: Mapping[str, Decision]) -> int:
        """Deliver decisions for the calls a run waits on, from any process, and return at
        once (the number of the pause they answer). They are checked first against the
        run's stored pause, as ``Agent.resume`` checks them: CheckpointError if the run is
        not paused, or a decision does not fit a pending call."""
        with _launched(self.name):
            return await send(run_id, decisions, self.agent.checkpoint_key)

    async def send(self, run_id: str, message: str | Message) -> None:
        """Add a user message to durable run ``run_id`` while it works, from any process,
        and return at once: it joins the conversation before the run's next model request
        (sent while the run answers, it makes the run ask again; while it waits at a pause,
        after the pause), once, wherever the run executes and however often it is
        recovered. It is a DBOS message to the workflow (``tooldeck.durable._mailbox``).

        Args:
            run_id: The run's id (its workflow id).
            message: The text, or a ``Message`` with role ``"user"``.

        Raises:
            RunEnded: the run has ended (answered, stopped, cancelled, failed); nothing
                was sent.
            LookupError: no run has that id; ValueError: the run is another agent's.
            TypeError: ``message`` is neither text nor a user ``Message``.
        """
        sent = user_message(message)
        with _launched(self.name):
            await deliver(run_id, sent, f"tooldeck.run:{self.name}")

    def send_sync(self, run_id: str, message: str | Message) -> None:
        """``send()`` for synchronous code."""
        run_sync(self.send(run_id, message), lane=_LANE)

    async def paused(self, run_id: str) -> RunResult[Any] | None:
        """The run's current pause (``pending``, ``checkpoint``), or None if it does not wait."""
        with _launched(self.name):
            found = await current_pause(run_id)
        return found[1] if found is not None else None

    async def _execute(
        self,
        prompt: str,
        history: tuple[Message, ...],
        key: str | None,
        session_id: str | None,
        budget_name: str | None,
    ) -> RunResult[OutputT]:
        """The workflow's body: the agent's run, and its pauses, as one workflow."""
        run_id = DBOS.workflow_id
        if run_id is None:
            raise RuntimeError("a durable run executes only as its DBOS workflow")
        reserved_steps.set({})
        deps = looked_up(self._deps, key, "deps", self.name)
        budget = durable_budget(
            looked_up(self._budgets, budget_name, "budgets", self.name), self.name
        )
        run = RunIn(run_id, deps, budget, session_id)
        if session_id is None:
            return await self._run_and_wait(prompt, history, run)
        session = self._open_session(session_id)
        try:
            loaded = await load_history(self.name, session)
            give_back(self._twin.history_strategy, loaded.summary)
            # a step recorded by a tooldeck before kept states has no such slot
            carried = getattr(loaded, "capability_states", None)
            result = await self._run_and_wait(prompt, loaded.messages, run, carried)
            await commit_turn(self.name, session, result, loaded)
            return result
        finally:
            await session.aclose()

    async def _run_and_wait(
        self,
        prompt: str,
        history: tuple[Message, ...],
        run: RunIn,
        carried: dict[str, Any] | None = None,
    ) -> RunResult[OutputT]:
        """Run, and wait durably through each pause for its decisions, until the end (the
        run log notes ``session_id``, the session the run's history came from; ``carried``:
        the capability states its last committed run ended with)."""
        twin, run_id = self._twin, run.run_id
        deps, budget, session_id = run.deps, run.budget, run.session_id
        sent = [SentMessages(run_id)]  # what DurableAgent.send delivers joins the run
        try:
            result = await self._watched(
                run_id,
                start_carrying(
                    twin,
                    prompt,
                    carried,
                    deps=deps,
                    history=history,
                    run_id=run_id,
                    session_id=session_id,
                    budget=budget,
                    capabilities=sent,
                ),
            )
            pause = 0
            while result.checkpoint is not None:
                pause += 1
                paused = portable(result)
                await publish(pause, paused)
                self._pauses.paused(run_id, pause, paused)
                answer = await receive(pause, result.checkpoint)
                decisions = {} if isinstance(answer, Cancel) else answer
                resumed = twin.start_resume(
                    result.checkpoint,
                    decisions,
                    deps=deps,
                    session_id=session_id,
                    budget=budget,
                    capabilities=sent,
                )
                if isinstance(answer, Cancel):  # its waiting calls answered cancelled
                    resumed.cancel(answer.reason)
                result = await self._watched(run_id, resumed)
        except RunStopped as stopped:
            if stopped.result is not None:
                stopped.result = portable(stopped.result)
            raise
        return portable(result)

    def cancel(self, run_id: str, reason: str = "cancelled by the application") -> bool:
        """Cancel run ``run_id`` if it executes in this process (from any task or thread): it
        ends as a plain run cancelled through its handle does, with stop reason ``cancelled``
        (its unfinished calls answered ``error[cancelled]``), and that result is the
        workflow's. False if no model request or call of it runs here: it ended, waits for
        decisions, or executes in another process (``DBOS.cancel_workflow`` stops it there,
        without a result)."""
        handle = self._running.get(run_id)
        if handle is None:
            return False
        handle.cancel(reason)
        return True

    async def cancel_paused(
        self, run_id: str, reason: str = "cancelled by the application"
    ) -> bool:
        """Cancel run ``run_id`` while it waits for decisions, from any process: it ends with
        stop reason ``cancelled``, the calls it waited on answered ``error[cancelled]`` (none
        runs), and that is the workflow's result. False if it does not wait at a pause."""
        with _launched(self.name):
            return await send_cancel(run_id, reason)

    async def _watched(self, run_id: str, handle: RunHandle[OutputT]) -> RunResult[OutputT]:
        """The run's result, ``cancel`` reaching it meanwhile."""
        self._running[run_id] = handle
        try:
            return await handle
        except asyncio.CancelledError:  # the workflow's execution itself was cancelled
            handle.cancel("the durable run's execution was cancelled")
            raise
        finally:
            self._running.pop(run_id, None)

    def _arguments(self, prompt: str, options: DurableRunArgs) -> tuple[Any, ...]:
        """The workflow's arguments, checked before anything starts."""
        unknown = set(options) - set(DurableRunArgs.__annotations__)
        if unknown:
            raise TypeError(
                f"unknown durable run option(s) {', '.join(map(repr, sorted(unknown)))}; the "
                f"options are: {', '.join(DurableRunArgs.__annotations__)}"
            )
        key = checked_name(self._deps, options.get("deps"), "deps", self.name)
        budget = checked_name(self._budgets, options.get("budget"), "budgets", self.name)
        history = tuple(options.get("history") or ())
        session = options.get("session")
        if session is None:
            return (
                (prompt, history, key) if budget is None else (prompt, history, key, None, budget)
            )
        if not isinstance(session, str) or not session:
            raise TypeError(
                "a durable run takes its session by id (DurableAgent(sessions=...) opens it "
                f"where the run executes), got {type(session).__name__}: {session!r}"
            )
        if history:
            raise ValueError("pass history= or session=, not both: a session has its history")
        return (prompt, (), key, session) if budget is None else (prompt, (), key, session, budget)

    def _open_session(self, session_id: str) -> Session:
        if self._sessions is None:
            raise LookupError(
                f"the run keeps session {session_id!r}, but DurableAgent {self.name!r} opens "
                "no sessions in this process: declare it with DurableAgent(..., "
                "sessions=lambda session_id: SQLiteSession(path, session_id))"
            )
        return self._sessions(session_id)


@dataclass(frozen=True)
class RunIn:
    """What one execution of a durable run runs with (looked up where it executes)."""

    run_id: str
    deps: Any
    budget: Budget | None
    session_id: str | None


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValueError(f"name must be a non-empty string without outer spaces, got {name!r}")
    if name in _DECLARED:
        raise ValueError(
            f"a DurableAgent named {name!r} is already declared in this process; its runs "
            "would execute the wrong agent: give each DurableAgent its own name"
        )


def _claim(name: str, agent: DurableAgent[Any, Any]) -> None:
    _DECLARED[name] = agent


def _queue_name(queue: Queue | str) -> str:
    return queue if isinstance(queue, str) else queue.name


_NOT_READY = ("No DBOS was created", "before DBOS was launched")
"""How DBOS says it was not created or not launched in this process."""


@contextmanager
def _launched(name: str) -> Iterator[None]:
    """DBOS's refusal of a run when it is not launched, with what to do about it."""
    try:
        yield
    except dbos_errors.DBOSException as error:
        if not any(words in str(error) for words in _NOT_READY):
            raise
        raise RuntimeError(
            f"DurableAgent {name!r} runs on DBOS, which is not launched in this process "
            f"({error}): create DBOS(config=...), declare every DurableAgent, then call "
            "DBOS.launch() before running, starting or resuming a run"
        ) from error
