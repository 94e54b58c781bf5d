"""``tooldeck web``: the agent, its approvals, its conversations and its run log in a browser.

Server-rendered pages (Jinja2 templates) with one small script of our own for the chat
(``static/chat.js``, no build step, nothing from a CDN: every asset is in the package):

- ``/chat/ID``: a conversation (a session in ``sessions.db``), driven over the AG-UI
  endpoint mounted at ``/agui/`` (``tooldeck.serve.agui``): answers stream, each call shows
  its arguments, result and duration, approvals are answered in the page, typed answers
  are shown as data;
- ``/conversations``: every conversation, to open, continue or delete;
- ``/runs`` and ``/runs/ID``: the run log, filtered by tool, failures, session and date; a
  run's rounds and calls as a timeline of durations with tokens, and its raw record;
- ``/tools``: each tool's schema and how its calls run.

Every request needs the token printed at start (see ``tooldeck.web._guard``). Needs the
``web`` extra: ``pip install 'tooldeck[web]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import RedirectResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from tooldeck.serve.agui import app as agui_app
    from tooldeck.serve.limits import DEFAULT_MAX_BODY_BYTES, BodyLimit, checked
    from tooldeck.web._chat import chat, conversations, delete_conversation, new_chat
    from tooldeck.web._guard import Guard, allowed_hosts
    from tooldeck.web._runs import run_page, runs
    from tooldeck.web._site import Site
    from tooldeck.web._tools import tools
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        f"tooldeck web needs Starlette, Jinja2 and ag-ui-protocol ({error}): "
        "pip install 'tooldeck[web]'"
    ) from error

from tooldeck.run.agent import Agent
from tooldeck.runlog import RunLog

__all__ = ["Site", "create_app"]

_STATIC = Path(__file__).resolve().parent / "static"


def create_app(
    *,
    agent: Agent[Any, Any] | None,
    home: str | Path,
    token: str,
    port: int,
    host: str = "127.0.0.1",
    run_log: RunLog | None = None,
    deps: Any = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    """The web app of ``agent`` (None: the run log and the conversations only).

    Args:
        home: The data folder: conversations in ``sessions.db``, the run log ``logs.db``.
        token: What every request must carry (``?token=`` once, then its cookie).
        port: The port the server listens on: requests for another ``Host`` are refused.
        host: The address it listens on (any ``Host`` is taken when it is ``0.0.0.0``).
        run_log: The agent's run log, flushed before a runs page reads it.
        deps: What every run passes its tools as ``ctx.deps``.
        max_body_bytes: The largest request body taken (default 1 MiB); a larger one is
            answered 413 without being read.
    """
    site = Site(agent, Path(home), run_log)
    routes: list[Route | Mount] = [
        Route("/", _home),
        Route("/chat", new_chat),
        Route("/chat/{thread:str}", chat),
        Route("/conversations", conversations),
        Route("/conversations/{thread:str}/delete", delete_conversation, methods=["POST"]),
        Route("/runs", runs),
        Route("/runs/{run_id:str}", run_page),
        Route("/tools", tools),
        Mount("/static", app=StaticFiles(directory=_STATIC), name="static"),
    ]
    if agent is not None:
        endpoint = agui_app(
            agent,
            data_dir=site.home,
            deps=deps,
            show_exceptions=True,
            decided_by="web",
            max_body_bytes=max_body_bytes,
        )
        routes.append(Mount("/agui", app=endpoint))
    guard = Middleware(Guard, token=token, port=port, hosts=allowed_hosts(host, port))
    bounded = Middleware(BodyLimit, max_bytes=checked(max_body_bytes))
    app = Starlette(routes=routes, middleware=[guard, bounded])
    app.state.site = site
    return app


async def _home(request: Request) -> Response:
    chat_enabled = request.app.state.site.agent is not None
    return RedirectResponse("/chat" if chat_enabled else "/runs", 303)
