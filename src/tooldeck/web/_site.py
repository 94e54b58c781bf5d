"""What every page of the web app shares: the site's settings and the rendering of templates.

Templates are Jinja2 (autoescaped: nothing a model, a tool or a stored row wrote is ever
read as markup); the filters format times, durations and JSON the same way on every page.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from tooldeck.run.agent import Agent
from tooldeck.runlog import RunLog


@dataclass
class Site:
    """The web app's settings, kept on ``app.state.site``."""

    agent: Agent[Any, Any] | None
    """The agent the chat runs; None serves the run log and the conversations only."""
    home: Path
    """The data folder: ``sessions.db`` (conversations) and ``logs.db`` (the run log)."""
    run_log: RunLog | None = None
    """The agent's run log, flushed before the runs pages read it."""

    @property
    def sessions_path(self) -> Path:
        return self.home / "sessions.db"

    @property
    def log_path(self) -> Path:
        return self.run_log.path if self.run_log is not None else self.home / "logs.db"


def site_of(request: Request) -> Site:
    site: Site = request.app.state.site
    return site


def _when(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


def _pretty(value: Any) -> str:
    """JSON text pretty-printed (a value, or text that parses as JSON; other text as is)."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return str(value)
        return json.dumps(parsed, indent=2, ensure_ascii=False)
    return json.dumps(value, indent=2, ensure_ascii=False)


PAGE_TEXT_LIMIT = 20_000
"""The most characters of one text a page shows (a prompt, an answer, a call's arguments or
result, a message of a conversation); the rest is cut, and the page says how much."""
RAW_RECORD_LIMIT = 200_000
"""The most characters of a run's raw record a page shows."""


def clipped(text: str, limit: int = PAGE_TEXT_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and a line saying how many are not shown
    (a 48 MiB prompt must not make a 96 MiB page)."""
    if len(text) <= limit:
        return text
    return (
        f"{text[:limit]}\n[… {len(text) - limit:,} more characters not shown, of "
        f"{len(text):,}: `tooldeck logs show RUN_ID --json` prints the whole run]"
    )


templates = Environment(
    loader=PackageLoader("tooldeck.web", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def dollars(cost: float) -> str:
    """``$0.0021``: US dollars to six decimals at most, without trailing zeros."""
    return "$" + f"{cost:.6f}".rstrip("0").rstrip(".")


templates.filters.update(
    when=_when, duration=_duration, pretty=_pretty, dollars=dollars, clipped=clipped
)


def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """The template ``name`` rendered for ``request``, with the site and the current section."""
    site = site_of(request)
    html = templates.get_template(name).render(
        site=site, path=request.url.path, chat_enabled=site.agent is not None, **context
    )
    return HTMLResponse(html, status_code=status_code)
