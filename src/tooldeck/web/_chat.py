"""The chat page and the conversations page: a conversation is a session in ``sessions.db``.

The chat page is the conversation so far (embedded as the JSON an AG-UI client would hold:
its messages, and what a paused run waits for) and a small script (``static/chat.js``)
that renders it and talks to the AG-UI endpoint at ``/agui/``: it sends the prompts, shows
the run as its events come, and sends the decisions on calls that wait for approval.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from tooldeck.errors import RunLogError, SessionError
from tooldeck.serve.agui import thread_snapshot
from tooldeck.sessions import SessionInfo, SQLiteSession
from tooldeck.web._marks import run_marks
from tooldeck.web._site import clipped, page, site_of

CONVERSATIONS_SHOWN = 200


async def new_chat(request: Request) -> Response:
    """A new conversation: a fresh id, as ``tooldeck run`` draws one."""
    return RedirectResponse(f"/chat/{secrets.token_hex(4)}", 303)


async def chat(request: Request) -> Response:
    site = site_of(request)
    thread = request.path_params["thread"]
    session = SQLiteSession(site.sessions_path, thread)
    try:
        history = await session.load()
    except SessionError as error:
        return page(request, "error.html", 500, title="Conversation", error=str(error))
    finally:
        await session.aclose()
    tools = site.agent.tools if site.agent is not None else None
    snapshot = thread_snapshot(history.messages, history.pending, tools)
    snapshot["messages"] = [_shown(message) for message in snapshot["messages"]]
    try:
        shown = len(snapshot["messages"])
        marks = await run_in_threadpool(run_marks, site, thread, history, shown)
    except RunLogError as error:  # the conversation is shown; the page says what is missing
        marks = {"runs": [], "decisions": [], "logProblem": str(error)}
    data: dict[str, Any] = {
        "threadId": thread,
        "endpoint": "/agui/",
        "readOnly": site.agent is None,
        **snapshot,
        **marks,
    }
    title = _title(snapshot["messages"]) or "New conversation"
    return page(request, "chat.html", thread=thread, title=title, data=data, section="chat")


def _shown(message: dict[str, Any]) -> dict[str, Any]:
    """A message as the page shows it: its text and calls' arguments clipped (the page's
    script never sends them back: the session holds the conversation)."""
    shown = dict(message)
    if isinstance(shown.get("content"), str):
        shown["content"] = clipped(shown["content"])
    if shown.get("toolCalls"):
        shown["toolCalls"] = [
            {
                **call,
                "function": {
                    **call["function"],
                    "arguments": clipped(call["function"]["arguments"]),
                },
            }
            for call in shown["toolCalls"]
        ]
    return shown


def _title(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message["role"] == "user" and isinstance(message["content"], str):
            return " ".join(message["content"].split())[:80]
    return ""


async def conversations(request: Request) -> Response:
    site = site_of(request)
    try:
        listed: list[SessionInfo] = await SQLiteSession.list_sessions(
            site.sessions_path, limit=CONVERSATIONS_SHOWN
        )
    except SessionError as error:
        return page(request, "error.html", 500, title="Conversations", error=str(error))
    return page(
        request,
        "conversations.html",
        title="Conversations",
        conversations=listed,
        limit=CONVERSATIONS_SHOWN,
        section="conversations",
    )


async def delete_conversation(request: Request) -> Response:
    """Clear the session: it is no longer listed, and its id starts afresh if used again."""
    site = site_of(request)
    session = SQLiteSession(site.sessions_path, request.path_params["thread"])
    try:
        await session.clear()
    except SessionError as error:
        return page(request, "error.html", 500, title="Conversations", error=str(error))
    finally:
        await session.aclose()
    return RedirectResponse("/conversations", 303)
