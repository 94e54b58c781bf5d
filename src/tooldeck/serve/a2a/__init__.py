"""An agent served over the Agent2Agent protocol (A2A), on ``a2a-sdk``'s server.

``app(agent, url=..., auth=BearerToken(...))`` is a Starlette application built from the
SDK's request handler and routes: JSON-RPC at ``/``, HTTP+JSON under ``/rest``, the agent
card at ``/.well-known/agent-card.json``. ``tooldeck a2a serve --tools MODULE`` serves one
from the command line.

- **A task is a run; a context is a session.** A message starts a run in the session named
  by its context id (kept in ``store``: a SQLite file or a PostgreSQL database, with the
  tasks), so a conversation goes on across tasks and server restarts. SendMessage,
  streaming, GetTask, ListTasks, CancelTask (the run's cancellation) and SubscribeToTask
  are the SDK's.
- **Streaming.** The run's text arrives as chunks of the artifact ``text-<round>``; each
  call's start and result as a ``WORKING`` status whose message has a data part
  (``tooldeck.tool_call``, ``tooldeck.tool_result``); the answer as the artifact
  ``answer`` and the ``COMPLETED`` status's message.
- **Many server processes, one store.** A message to a working task joins its run
  (``RunHandle.send``) before its next model request, whichever server process it is sent
  to; CancelTask to any process cancels the run where it runs; SubscribeToTask on any
  process streams the task's updates (the SDK's cluster store and event stream). Each
  process renews a lease on the tasks it runs every ``heartbeat_s`` seconds; a task whose
  server was killed, or stopped renewing its lease (on any machine), is marked ``FAILED``,
  saying why (leases on the database's clock on PostgreSQL). A finished task's streamed
  events leave the store's log ``keep_events_s`` after it finished, but its last.
- **Approvals and external tools over the hop.** A run that pauses leaves its task in
  ``INPUT_REQUIRED``, its status message listing the pending calls in a data part
  ``{"kind": "tooldeck.pending", "calls": [{"id", "name", "arguments", "kind", "why",
  "digest", "path"}]}``. A reply to the task with a data part ``{"kind":
  "tooldeck.decisions", "decisions": [...]}`` (approve, approve with edited ``arguments``,
  reject with a ``reason``, or an external tool's ``result``) resumes the run from the
  checkpoint stored in the session, in any server process on the same store; a decision
  for a call that is not pending is refused (``InvalidParams``), never guessed.
- **Auth and limits.** ``auth`` (``BearerToken`` or ``ApiKey``) is declared in the card and
  enforced on every route but the card's (401 without it); a request body over
  ``max_body_bytes`` is refused with 413, unread.

Needs the ``a2a`` extra: ``pip install 'tooldeck[a2a]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

try:
    from a2a.server.routes import (
        create_agent_card_routes,
        create_jsonrpc_routes,
        create_rest_routes,
    )
    from a2a.types import AgentCard, AgentSkill
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    from tooldeck.remote._pending import DECISIONS_KIND, PENDING_KIND
    from tooldeck.serve.a2a._auth import ApiKey, Auth, BearerToken, Guard
    from tooldeck.serve.a2a._beat import beat_forever
    from tooldeck.serve.a2a._card import JSONRPC_PATH, REST_PATH, make_card
    from tooldeck.serve.a2a._executor import RunExecutor
    from tooldeck.serve.a2a._handler import TaskHandler
    from tooldeck.serve.a2a._store import Store
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        f"serving an agent over A2A needs a2a-sdk ({error}): pip install 'tooldeck[a2a]'"
    ) from error

from tooldeck.run.agent import Agent
from tooldeck.serve.limits import DEFAULT_MAX_BODY_BYTES, BodyLimit, checked

__all__ = [
    "DECISIONS_KIND",
    "PENDING_KIND",
    "ApiKey",
    "Auth",
    "BearerToken",
    "Store",
    "app",
    "default_store",
]


def default_store() -> Path:
    """``a2a.db`` under ``$TOOLDECK_HOME`` (else the user's data directory)."""
    from tooldeck.runlog import tooldeck_home

    return tooldeck_home() / "a2a.db"


def app(
    agent: Agent[Any, Any],
    *,
    url: str,
    auth: Auth | None,
    store: str | Path | Store | None = None,
    card: AgentCard | None = None,
    description: str | None = None,
    version: str | None = None,
    skills: Sequence[AgentSkill] | None = None,
    deps: Any = None,
    decided_by: str = "a2a",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    heartbeat_s: float = 2.0,
    lease_s: float | None = None,
    keep_events_s: float | None = 600.0,
) -> Starlette:
    """A Starlette application serving ``agent`` over A2A.

    Args:
        agent: The agent; every task's run uses it (give it a ``checkpoint_key`` to sign
            the checkpoints of paused runs the store keeps).
        url: Where clients reach this server (``http://host:port``), as the card says.
        auth: The scheme clients must use (declared in the card, enforced: 401 without
            it); None serves anyone, for a server behind the application's own auth.
        store: Where tasks and conversations are kept: a SQLite file, a
            ``postgresql://`` URL or a ``Store`` (default ``default_store()``). Servers on
            one store go on with each other's tasks.
        card: An agent card to start from (name, description, skills, provider...); its
            interfaces, capabilities and security are set to what this server does.
        description: What the agent does, for the card.
        version: The agent's version, for the card (default: tooldeck's).
        skills: The card's skills (default: one per tool).
        deps: What every run passes its tools as ``ctx.deps``.
        decided_by: Who the run log says decided on calls (``Approve(by=...)``).
        max_body_bytes: The largest request body taken (default 1 MiB); a larger one is
            answered 413 without being read.
        heartbeat_s: How often this process renews the lease on the tasks it runs, and
            looks for cancels of and messages to them sent to other processes.
        lease_s: How long a task's lease holds without renewal (default 5 heartbeats);
            after it, any server on the store takes the process for stopped and fails the
            task. Servers on one store should be given the same figures.
        keep_events_s: How long the streamed events of a finished task stay in the store's
            event log (``task_events``) after a server first sees it finished (default 10
            minutes): then all but its last are deleted (the task itself, with its history,
            stays). None keeps every event.
    """
    lease = _lease(heartbeat_s, lease_s)
    where = store if isinstance(store, Store) else Store(store or default_store())
    executor = RunExecutor(
        agent,
        where,
        deps=deps,
        decided_by=decided_by,
        heartbeat_s=heartbeat_s,
        lease_s=lease,
        keep_events_s=keep_events_s,
    )
    agent_card = make_card(
        agent,
        url=url,
        auth=auth,
        card=card,
        description=description,
        version=version,
        skills=skills,
    )
    handler = TaskHandler(executor, agent_card)
    routes = [
        *create_agent_card_routes(agent_card),
        *create_jsonrpc_routes(handler, JSONRPC_PATH),
        *create_rest_routes(handler, path_prefix=REST_PATH),
    ]
    middleware = [Middleware(BodyLimit, max_bytes=checked(max_body_bytes))]
    if auth is not None:
        card_path = frozenset({AGENT_CARD_WELL_KNOWN_PATH})
        middleware.insert(0, Middleware(Guard, auth=auth, open_paths=card_path))

    served = Starlette(routes=routes, middleware=middleware, lifespan=_lifespan(handler))
    served.state.card = agent_card
    return served


def _lifespan(handler: TaskHandler) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """What the server does as it starts and stops: make the store's tables, fail the tasks
    whose server was killed mid-run, and beat (``_beat``) until it stops."""
    executor = handler.executor

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await executor.store.versioned().initialize()  # the tasks, their versions and events
        await executor.fail_orphans()
        heart = asyncio.create_task(beat_forever(executor), name="tooldeck a2a heartbeat")
        try:
            yield
        finally:
            heart.cancel()
            await handler.aclose()
            await executor.store.aclose()

    return lifespan


def _lease(heartbeat_s: float, lease_s: float | None) -> float:
    """The lease (default 5 heartbeats); ValueError unless 0 < heartbeat < lease."""
    lease = 5 * heartbeat_s if lease_s is None else lease_s
    if not 0 < heartbeat_s < lease:
        raise ValueError(
            f"heartbeat_s={heartbeat_s:g} and lease_s={lease:g}: a heartbeat is over 0 s "
            "and shorter than the lease"
        )
    return lease
