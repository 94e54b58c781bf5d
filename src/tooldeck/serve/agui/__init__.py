"""An agent served over the AG-UI protocol (``ag-ui-protocol``'s own types, over SSE).

``app(agent)`` is a Starlette application: ``POST /`` takes a ``RunAgentInput`` and answers
with the run's events as server-sent events, so any AG-UI client can drive a tooldeck
agent. Mount it in a Starlette or FastAPI application (``Mount("/agent", app=app(agent))``
or ``fastapi_app.mount("/agent", app(agent))``). It adds no authentication of its own:
put it behind the application's.

- **Threads are sessions.** A thread id names a tooldeck session (by default a
  ``SQLiteSession`` in ``sessions.db`` under ``data_dir``, else ``$TOOLDECK_HOME``), so a
  conversation goes on across page reloads and server restarts. The session holds the
  conversation: a new run reads only the input's last message (a user message, the
  prompt); of the earlier messages a client sends back only the user messages' ids are
  read (to name the prompts in the snapshot as the client does); its ``tools``, ``context``
  and ``state`` are not read. A new run takes the client's ``runId`` as its id, so a run
  the client sends again after the thread stored it (a retry after a lost response) is
  known: its stored answer comes back (``tooldeck.recovered``, ``how: "stored"``) and
  nothing is asked or run again (the same ``runId`` with another prompt is a
  ``session_conflict``); a prompt sent again after its
  run was cut off (the page closed, the server killed) goes on with that run. A client that
  goes away mid-run stops it as it stood: what it awaited is cancelled, and its sync tools
  still running are told (``ctx.cancelled``), at any depth.
- **Streaming.** Text and tool arguments stream as the model writes them
  (``TEXT_MESSAGE_*``, ``TOOL_CALL_START`` / ``ARGS`` / ``END``); each call's result is a
  ``TOOL_CALL_RESULT`` whose ``metadata.tooldeck`` says ``ok``, ``errorCode`` and
  ``durationS``. Before ``RUN_FINISHED`` come a ``MESSAGES_SNAPSHOT`` of the conversation
  (a prompt keeps the id its client gave it; tooldeck's own messages are named by their
  position, ``msg-1``..., the same in the events that streamed them and in later snapshots) and
  a ``STATE_SNAPSHOT`` (``tooldeck``: the run id, the model, the stop reason, the usage,
  the calls it waits for). ``RUN_FINISHED.result`` is the answer (a typed answer as data).
- **Approvals are interrupts.** A call that needs approval ends the run with the interrupt
  outcome: one ``Interrupt`` per call (``reason: "tool_call"``, ``toolCallId``, and an
  ``id`` that is the stored call's digest; its ``message`` says why when the
  untrusted-content policy asks, as ``metadata.tooldeck.reason`` does). The next input
  answers each with a resume entry,
  payload ``{"approved": true}``, ``{"approved": true, "editedArgs": {...}}`` or
  ``{"approved": false, "reason": "..."}`` (status ``cancelled`` rejects it); an approval
  may add ``"scope": "run"`` or ``"session"`` (``Approve(scope=...)``: the tool's later
  calls run without an interrupt, for the run or the session too; offered, in the
  ``response_schema``, for the run's own calls — a code-mode program's included, whose
  interrupt names the program's line — never for a call inside an agent tool); a call run
  under such an approval says so in its result's ``metadata.tooldeck.decision``
  (``remembered:run`` or ``remembered:session``); the decisions
  go through ``agent.resume(session=...)``, which runs the stored call and checks its
  digest. An interrupt left unanswered stays open: the run pauses again at once.
- **External tools are the client's.** A call of an ``external_tool`` is left without a
  result (the success outcome's ``pendingToolCallIds`` names it); the next input answers it
  with a tool message (``toolCallId``, ``content``, or ``error`` for a failure).
- **Messages while a run works.** ``POST /messages`` (tooldeck's own: AG-UI has none)
  adds a user message to a thread's run going on; it joins the conversation before the
  run's next model request and streams as a user text message under the client's id
  (``tooldeck.serve.agui._send`` documents the body and the answers).
- **Errors.** What cannot run is a ``RUN_ERROR`` with a ``code`` (``interrupt_pending``,
  ``unknown_interrupt``, ``invalid_payload``, ``no_prompt``, ``thread_busy``, a stop
  reason such as ``max_rounds``, ``session_conflict``, ...) and a message saying what to
  send instead; a body that is not a ``RunAgentInput`` is refused with status 422, and one
  over ``max_body_bytes`` (default 1 MiB) with 413, unread.

Needs the ``web`` extra: ``pip install 'tooldeck[web]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.routing import Route

    from tooldeck.serve.agui._endpoint import AguiEndpoint, SessionFactory, Sessions
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        f"serving an agent over AG-UI needs ag-ui-protocol and Starlette ({error}): "
        "pip install 'tooldeck[web]'"
    ) from error

from collections.abc import Sequence

from tooldeck.messages import Message
from tooldeck.results import Checkpoint
from tooldeck.run.agent import Agent
from tooldeck.run.session import Session
from tooldeck.serve.agui._input import describe, interrupts
from tooldeck.serve.agui._messages import as_agui, with_answered
from tooldeck.serve.limits import DEFAULT_MAX_BODY_BYTES, BodyLimit, checked
from tooldeck.tools.registry import ToolView

__all__ = ["AguiEndpoint", "SessionFactory", "app", "thread_snapshot"]


def app(
    agent: Agent[Any, Any],
    *,
    sessions: Session | SessionFactory | None = None,
    data_dir: str | Path | None = None,
    deps: Any = None,
    show_exceptions: bool = False,
    decided_by: str = "ag-ui",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    """A Starlette application serving ``agent`` over AG-UI at ``POST /``.

    Args:
        agent: The agent; every thread's runs use it.
        sessions: Where threads are kept: a factory ``thread_id -> Session`` (each session
            is closed after its request), or one Session (serving its own thread only).
            Default: a ``SQLiteSession`` per thread in ``sessions.db`` under ``data_dir``.
        data_dir: The folder of the default sessions database (default
            ``$TOOLDECK_HOME``, else the user's data directory).
        deps: What every run passes its tools as ``ctx.deps``.
        show_exceptions: Put a failed call's exception (``Type: message``) in its result's
            metadata, for a client used by the host itself (the model never reads it).
        decided_by: Who the run log says decided on calls (``Approve(by=...)``).
        max_body_bytes: The largest request body taken (default 1 MiB); a larger one is
            answered 413 without being read (``tooldeck.serve.limits``).
    """
    where = Path(data_dir) if data_dir is not None else None
    endpoint = AguiEndpoint(
        agent,
        Sessions(sessions, where),
        deps=deps,
        show_exceptions=show_exceptions,
        decided_by=decided_by,
    )
    return Starlette(
        routes=[
            Route("/", endpoint.handle, methods=["POST"]),
            Route("/messages", endpoint.send, methods=["POST"]),
        ],
        middleware=[Middleware(BodyLimit, max_bytes=checked(max_body_bytes))],
    )


def thread_snapshot(
    messages: Sequence[Message], paused: Checkpoint | None, tools: ToolView | None
) -> dict[str, Any]:
    """A thread as a client of ``app`` last saw it, as JSON: ``messages`` (those of the
    MESSAGES_SNAPSHOT, under the same ids), ``pending`` (the calls a paused run waits for)
    and ``interrupts`` (those the RUN_FINISHED carried; none without ``tools``, which give
    each edit's schema).

    ``messages`` are the session's committed messages (``History.messages``); a paused run's
    own come from its checkpoint.
    """
    if paused is None:
        return {"messages": _dumped(as_agui(messages)), "pending": [], "interrupts": []}
    asked = interrupts(paused, tools) if tools is not None else []
    return {
        "messages": _dumped(with_answered(paused.messages, paused.turn.answered)),
        "pending": [describe(p) for p in paused.pending],
        "interrupts": [i.model_dump(mode="json", by_alias=True) for i in asked],
    }


def _dumped(messages: Sequence[Any]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json", by_alias=True) for m in messages]
