"""The runs pages, over the run log: the latest runs (filtered by tool, failures, session and
date) and one run: its rounds and calls on a timeline of durations, with tokens, then what
was said and done, then the raw record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from tooldeck.runlog import LoggedRun, RunLogError
from tooldeck.runlog.read import list_runs, load_run
from tooldeck.search import Searched
from tooldeck.web._site import RAW_RECORD_LIMIT, Site, clipped, dollars, page, site_of

RUNS_SHOWN = 100


@dataclass(frozen=True, slots=True)
class Bar:
    """One row of a run's timeline: a model turn or a call, placed in percent of the run."""

    label: str
    detail: str
    left: float
    width: float
    kind: str
    """``model``, ``call``, ``search``, ``failed``, ``rejected`` or ``waiting`` (the CSS
    class)."""


@dataclass(frozen=True, slots=True)
class Filters:
    tool: str = ""
    errors: bool = False
    session: str = ""
    since: str = ""
    until: str = ""

    @classmethod
    def of(cls, request: Request) -> Filters:
        query = request.query_params
        return cls(
            tool=query.get("tool", "").strip(),
            errors=query.get("errors") == "1",
            session=query.get("session", "").strip(),
            since=query.get("since", "").strip(),
            until=query.get("until", "").strip(),
        )

    def times(self) -> tuple[float | None, float | None]:
        """The date range as Unix seconds (local days: ``until`` is included whole).

        Raises:
            ValueError: a date that is not YYYY-MM-DD.
        """
        since = _day_start(self.since) if self.since else None
        until = _day_start(self.until, days_after=1) if self.until else None
        return since, until


def _day_start(text: str, days_after: int = 0) -> float:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD)") from None
    return datetime.combine(day + timedelta(days=days_after), datetime.min.time()).timestamp()


async def runs(request: Request) -> Response:
    site = site_of(request)
    filters = Filters.of(request)
    try:
        since, until = filters.times()
        found = await run_in_threadpool(_listed, site, filters, since, until)
    except (ValueError, RunLogError) as error:
        found, problem = [], str(error)
    else:
        problem = ""
    return page(
        request,
        "runs.html",
        title="Runs",
        runs=found,
        filters=filters,
        problem=problem,
        limit=RUNS_SHOWN,
        section="runs",
    )


def _listed(site: Site, filters: Filters, since: float | None, until: float | None) -> list[Any]:
    options: dict[str, Any] = {
        "tool": filters.tool or None,
        "errors": filters.errors,
        "session": filters.session or None,
        "since": since,
        "until": until,
    }
    if site.run_log is not None:  # the agent's own log: flushed first, so its last run shows
        return site.run_log.runs(RUNS_SHOWN, **options)
    return list_runs(site.log_path, RUNS_SHOWN, **options)


async def run_page(request: Request) -> Response:
    site = site_of(request)
    run_id = request.path_params["run_id"]
    try:
        run = await run_in_threadpool(_loaded, site, run_id)
    except RunLogError as error:
        return page(request, "error.html", 404, title="Run", error=str(error), section="runs")
    raw = clipped(json.dumps(run.to_json(), indent=2, ensure_ascii=False), RAW_RECORD_LIMIT)
    return page(
        request,
        "run.html",
        title=f"Run {run.run_id[:12]}",
        run=run,
        bars=timeline(run),
        span=_span(run),
        rounds=_rounds(run),
        raw=raw,
        section="runs",
    )


def _loaded(site: Site, run_id: str) -> LoggedRun:
    if site.run_log is not None:
        return site.run_log.run(run_id)
    return load_run(site.log_path, run_id)


def _span(run: LoggedRun) -> float:
    """Seconds from the run's start to the end of the last thing it did."""
    start = run.started_at
    ends = [t.started_at + t.duration_s for t in run.turns]
    ends += [c.finished_at for c in run.calls if c.finished_at is not None]
    return max([*ends, run.ended_at or start, start + 1e-6]) - start


def timeline(run: LoggedRun) -> list[Bar]:
    """The run's model turns and calls as bars, from its start to its last end."""
    start, span = run.started_at, _span(run)
    bars: list[Bar] = []
    for turn in run.turns:
        tokens = _tokens(turn.input_tokens, turn.output_tokens)
        if turn.cost_usd is not None:
            tokens += f", {dollars(turn.cost_usd)}"
        what = f"{turn.tool_calls} call{'s' if turn.tool_calls != 1 else ''}"
        bars.append(
            _bar(f"round {turn.round}: model", f"{what}{tokens}", turn.started_at, turn.duration_s)
        )
        for call in (c for c in run.calls if c.round == turn.round):
            kind = _call_kind(call.error_code, call.started_at, call.result)
            detail = call.error_code or ("waits" if kind == "waiting" else "ok")
            search = call.search()
            if search is not None and kind == "call":  # a tool search, with what it revealed
                kind, detail = "search", search_text(search)
            bars.append(_bar(call.name, detail, call.started_at, call.duration_s, kind))
    return [_placed(bar, start, span) for bar in bars]


def _bar(
    label: str, detail: str, started: float | None, duration: float | None, kind: str = "model"
) -> Bar:
    return Bar(label, detail, started if started is not None else -1.0, duration or 0.0, kind)


def _placed(bar: Bar, start: float, span: float) -> Bar:
    """Absolute times to percents; a call that never ran sits at its round's start."""
    left = 0.0 if bar.left < 0 else (bar.left - start) / span * 100
    width = bar.width / span * 100
    from_time = f"{_ms(bar.width)}" if bar.left >= 0 else "did not run"
    detail = f"{from_time} · {bar.detail}" if bar.detail else from_time
    return Bar(bar.label, detail, min(left, 99.5), max(width, 0.5), bar.kind)


def search_text(search: Searched) -> str:
    """``"refund a payment" → revealed refund_order, ...`` (or ``→ no tool found``)."""
    query = json.dumps(search.query, ensure_ascii=False)
    found = f"revealed {', '.join(search.revealed)}" if search.revealed else "no tool found"
    return f"{query} → {found}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _call_kind(error_code: str | None, started: float | None, result: str | None) -> str:
    if result is None:
        return "waiting"
    if error_code == "rejected":
        return "rejected"
    return "failed" if error_code else "call"


def _tokens(input_tokens: int | None, output_tokens: int | None) -> str:
    if input_tokens is None and output_tokens is None:
        return ""
    return f", {input_tokens or 0} in / {output_tokens or 0} out tokens"


def _rounds(run: LoggedRun) -> list[dict[str, Any]]:
    """What each round said and did: the model's text, then its calls."""
    return [
        {
            "turn": turn,
            "calls": [c for c in run.calls if c.round == turn.round],
            "searches": {
                c.call_id: search_text(search)
                for c in run.calls
                if c.round == turn.round and (search := c.search()) is not None and not c.failed
            },
        }
        for turn in run.turns
    ]
