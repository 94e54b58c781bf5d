"""Durable runs: an agent's runs as DBOS workflows, recovered after a crash.

``DurableAgent(agent, name="support")`` runs the agent's one loop as a DBOS workflow in
which every model request and every tool call is a step. DBOS records each step's result
in its system database (SQLite on one machine, PostgreSQL when several processes share the
work); when a process dies, the run is recovered and replayed: completed steps return their
recorded results instead of running again, and the run goes on from the first step that had
not completed. Declare the DurableAgent before ``DBOS.launch()``, in every process::

    DBOS(config={"name": "support", "system_database_url": "sqlite:///runs.sqlite"})
    durable = DurableAgent(agent, name="support", deps={"default": app_deps})
    DBOS.launch()
    result = durable.run_sync("Where is order 42?", deps="default")

Queues and workers: ``durable.start(prompt, queue="runs")`` enqueues a run on a DBOS queue
(``DBOS.register_queue("runs", worker_concurrency=8)``); every process that declared the
agent and launched DBOS on the same database takes runs from it. A worker restarted with
its executor id (``DBOS(config={..., "executor_id": "worker-1"})``) recovers its
unfinished runs; ``await recover_runs("worker-1", queue="runs")`` hands a dead worker's runs to
the others.

Approvals: a durable run that pauses (a tool with ``requires_approval``, an external tool)
publishes its pause and waits for decisions inside its workflow, durably: the wait
survives its process, and ``durable.resume(run_id, decisions)`` (or ``send_decisions``)
from any process delivers them, checked against the stored checkpoint as
``Agent.resume`` checks them.

Sessions: ``DurableAgent(agent, name=..., sessions=lambda session_id: PostgresSession(dsn,
session_id))`` opens a run's session where it executes; ``durable.run(prompt,
session="conversation-42")`` starts from that session's history (read once, as a step: a
replay starts from the same history) and commits the run's turn when it ends, after any
pauses, as a step too (a commit written just before a crash is recognised, not written
twice). A durable run does not store its pauses in the session (the workflow holds them);
if another run commits to the session meanwhile, the durable run ends with SessionConflict
carrying its result, as a plain run would.

Run control: the agent's token and cost limits hold as in a plain run; a shared budget is
named, ``durable.run(prompt, budget="team")`` with ``DurableAgent(..., budgets={"team":
budget})`` (a store's charges are steps: a recovery reads them back, never charges twice);
``durable.cancel(run_id, reason=...)`` cancels a run executing in this process
(stop reason ``cancelled``, the workflow's result), ``await durable.cancel_paused(run_id,
reason=...)`` one waiting for decisions, from any process.

Messages while it works: ``await durable.send(run_id, "Keep it short.")``, from any process,
delivers a user message to a working run as a DBOS message; it joins the conversation before
the run's next model request, once, in a recovered run too (``_mailbox`` says how).

An agent tool (``agent.as_tool``) runs its inner run in the same workflow, its requests and
calls steps too; in a durable run its calls run one at a time, so the inner runs' steps
keep their ids in a replay. A recorded model turn that would meet changed tools (gone,
other parameters, not shown then) stops the replay with a ModelError that names them.

What a tool must do to be safe
------------------------------
DBOS gives **exactly-once across completed steps** and **at-least-once inside a step**. A
tool call whose step completed (it returned, raised, or timed out) is never run again: a
recovery reads its recorded result. A call that was running when the process died has no
recorded result, so the recovered run runs it again, from its beginning. A tool that
changes the world (pays, sends, writes) must therefore be idempotent:

- derive an idempotency key from ``ctx.run_id`` and ``ctx.call_id`` (both the same in every
  execution of the run: the run id is the workflow id, the call id is recorded with the
  model's turn) and pass it to the service (``Idempotency-Key`` headers, a unique
  constraint, a "done" row written in the same transaction as the effect);
- or check first whether the effect already happened (look the transfer up by that key);
- keep the effect last in the tool, after everything that may fail.

Everything outside steps runs again during a recovery and must give the same answers:
approval predicates, output validators, ``on_error`` handlers, the agent's instructions.
Time limits count from the (re)start of the execution (``max_duration_s`` restarts, like a
resumed pause). A tool's exception is recorded with pickle; one that cannot be read back is
recorded as a RecordedError (its type's name and message). A durable run's results, in
every process, keep each exception of the trace as a RecordedError.

Layer 4: wraps an Agent (``Agent.wrapped``) and its tool handlers. May import the layers
below; the run never imports this package.
"""

from __future__ import annotations

from tooldeck.durable._agent import DepsSource, DurableAgent
from tooldeck.durable._recover import recover_runs
from tooldeck.durable._sessions import SessionSource

__all__ = ["DepsSource", "DurableAgent", "SessionSource", "recover_runs"]
