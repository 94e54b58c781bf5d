"""``tooldeck logs``: list the logged runs, show one as it was shown live, print the path.

tooldeck logs [-n N] [--tool NAME] [--errors] [--session ID] [--since WHEN] [--cost] [--json]
tooldeck logs show RUN_ID [--json]
tooldeck logs path
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from typing import Any

from tooldeck.cli.display import Console, RunDisplay, call_text
from tooldeck.cli.totals import count, dollars
from tooldeck.messages import Message, ToolCall, Usage
from tooldeck.run.events import MessageJoined
from tooldeck.runlog import LoggedCall, LoggedRun, LoggedTurn, default_path
from tooldeck.runlog.read import list_runs, load_run

_PROMPT_CHARS = 60
_ID_CHARS = 12


def add_logs_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """The ``logs`` command and its ``show`` and ``path`` subcommands."""
    logs = commands.add_parser(
        "logs", parents=parents, help="list the runs tooldeck run/chat/demo logged (newest first)"
    )
    logs.add_argument("-n", type=int, default=20, metavar="N", help="at most N runs (default 20)")
    logs.add_argument("--tool", metavar="NAME", help="only runs that called the tool NAME")
    logs.add_argument("--errors", action="store_true", help="only runs with a failed tool call")
    logs.add_argument("--session", metavar="ID", help="only runs of the session ID")
    logs.add_argument(
        "--since",
        metavar="WHEN",
        type=since_time,
        help="only runs started in the last WHEN (30m, 12h, 1d, 2w) or since a date (2026-01-31)",
    )
    logs.add_argument(
        "--cost",
        action="store_true",
        help="print what the matching runs cost in total (all of them: -n does not apply)",
    )
    logs.add_argument("--json", action="store_true", help="print the runs as JSON")
    logs.set_defaults(handler=_list)
    actions = logs.add_subparsers(dest="logs_command", metavar="ACTION")
    show = actions.add_parser(
        "show", parents=parents, help="print one run as the live display showed it"
    )
    show.add_argument("run_id", metavar="RUN_ID", help="a run id, or the start of one")
    show.add_argument("--json", action="store_true", help="print the run as JSON")
    show.set_defaults(handler=_show)
    path = actions.add_parser("path", parents=parents, help="print the path of the log database")
    path.set_defaults(handler=_path)


def _list(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise ValueError(f"-n must be at least 1, got {args.n}")
    path = default_path()
    filters = {"tool": args.tool, "errors": args.errors, "session": args.session}
    if args.cost:
        return _total_cost(list_runs(path, None, since=args.since, **filters), args.json)
    runs = list_runs(path, args.n, since=args.since, **filters)
    if args.json:
        listed = [run.to_json(details=False) for run in runs]
        print(json.dumps(listed, indent=2, ensure_ascii=False))
        return 0
    if not runs:
        filtered = args.tool or args.errors or args.session or args.since
        print(f"no {'matching ' if filtered else ''}runs in the log at {path}")
        return 0
    for line in _table(runs):
        print(line.rstrip())
    return 0


def _total_cost(runs: list[LoggedRun], as_json: bool) -> int:
    """What the runs cost: the sum of the known costs, and how many runs had none."""
    known = [run.cost_usd for run in runs if run.cost_usd is not None]
    total = sum(known)
    unknown = len(runs) - len(known)
    if as_json:
        print(json.dumps({"runs": len(runs), "cost_usd": total, "unknown_cost_runs": unknown}))
        return 0
    line = f"{dollars(total)} for {count(len(runs), 'run')}"
    if unknown:
        line += f" ({unknown} of unknown cost, not counted)"
    print(line)
    return 0


_UNITS = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def since_time(text: str) -> float:
    """``--since``: ``30m``, ``12h``, ``1d``, ``2w`` ago, or a date (``2026-01-31``, local
    time), as Unix seconds."""
    amount, unit = text[:-1], text[-1:]
    if unit in _UNITS and amount.isdigit():
        return time.time() - int(amount) * _UNITS[unit]
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no time: give 30m, 12h, 1d, 2w or a date such as 2026-01-31"
        ) from None


def _show(args: argparse.Namespace) -> int:
    run = load_run(default_path(), args.run_id)
    if args.json:
        print(json.dumps(run.to_json(), indent=2, ensure_ascii=False))
    else:
        replay(run, Console())
    return 0


def _path(args: argparse.Namespace) -> int:
    print(default_path())
    return 0


def _table(runs: list[LoggedRun]) -> Iterator[str]:
    """One line a run; a COST column when some run's cost is known."""
    priced = any(run.cost_usd is not None for run in runs)
    rows = [("RUN", "STARTED", "MODEL", "CALLS", "STOP", "TIME", *_cost_cell(priced), "PROMPT")]
    for run in runs:
        calls = str(run.tool_calls) + (f" ({run.failed_calls} failed)" if run.failed_calls else "")
        duration = f"{run.duration_s:.2f} s" if run.duration_s is not None else "-"
        rows.append(
            (
                run.run_id[:_ID_CHARS],
                _when(run.started_at),
                run.model,
                calls,
                _status(run),
                duration,
                *_cost_cell(priced, run),
                _short(run.prompt),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        yield "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))


def _status(run: LoggedRun) -> str:
    """The STOP column: the stop reason, else whether the run goes on or its process is gone."""
    if run.stop_reason is not None:
        return run.stop_reason
    return "interrupted (process gone)" if run.process_gone else run.status


def _no_end(run: LoggedRun) -> str:
    """What a run with no end logged is, by its process."""
    process = f"process {run.writer_pid} on {run.writer_host}"
    if run.process_gone:
        return (
            f"stopped: interrupted (process gone): no end was logged and {process}, which ran "
            "it, is gone (killed, or crashed mid-run); it will not go on"
        )
    if run.writer_pid is not None:
        return f"(no end logged yet: the run is still going in {process})"
    return "(no end was logged: the run is still going, or its process ended)"


def _cost_cell(priced: bool, run: LoggedRun | None = None) -> tuple[str, ...]:
    if not priced:
        return ()
    if run is None:
        return ("COST",)
    return ("-" if run.cost_usd is None else dollars(run.cost_usd),)


def replay(run: LoggedRun, console: Console) -> None:
    """Print a logged run with the live display's lines, in the order they were shown."""
    session = f" · session {run.session_id}" if run.session_id else ""
    if run.parent_run_id:  # an agent tool's run
        session += f" · called by run {run.parent_run_id} (call {run.parent_call_id})"
    console.line(f"run {run.run_id} · {_when(run.started_at)} · {run.model}{session}", "bold")
    console.line("")
    console.line(f"user: {run.prompt}", "bold")
    display = RunDisplay(console, run.model)
    for _, _, show in sorted(_moments(run, display), key=lambda moment: moment[:2]):
        show()
    if run.untrusted_call_id is not None:
        display.untrusted(f"{run.untrusted_tool!r} (call {run.untrusted_call_id!r})")
    if run.ended_at is None:
        console.line(_no_end(run), "red" if run.process_gone else "dim")
        return
    if run.error:
        console.line(f"stopped: {run.error}", "red")
    elif run.answer:
        console.line(f"answer: {run.answer}", "bold")
    else:  # stopped at a limit, a guardrail, a cancel: no empty "answer:" to read as one
        console.line(f"the run stopped without an answer ({run.stop_reason or run.status})", "red")
    usage = Usage(
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        requests=run.model_turns,
        cost_usd=run.cost_usd,
    )
    display.totals(run.duration_s or 0.0, usage, run.tool_calls, run.stop_reason or "-")


_Moment = tuple[float, int, Any]
"""(when, order among things logged at the same time, what prints it)."""


def _moments(run: LoggedRun, display: RunDisplay) -> Iterator[_Moment]:
    for turn in run.turns:
        usage = None
        if turn.input_tokens is not None and turn.output_tokens is not None:
            usage = Usage(input_tokens=turn.input_tokens, output_tokens=turn.output_tokens)

        def answered(turn: LoggedTurn = turn, usage: Usage | None = usage) -> None:
            display.tally.model_s += turn.duration_s  # the totals line's time in the model
            display.model_answered(turn.round, turn.duration_s, usage, turn.tool_calls)

        yield turn.started_at + turn.duration_s, 0, answered
    for call in run.calls:
        yield from _call_moments(call, display)
    for decided in run.guardrails:
        yield decided.at, 2, lambda decided=decided: display.guardrail(decided)
    for handed in run.handoffs:
        yield handed.at, 4, lambda h=handed: display.handed_off(h.source, h.target)
    for sent in run.messages_sent:
        joined = MessageJoined(sent.round, (Message.user(sent.content),), sent.sent)
        yield sent.at, 4, lambda joined=joined: display.joined(joined)


def _call_moments(logged: LoggedCall, display: RunDisplay) -> Iterator[_Moment]:
    call = ToolCall.from_json(logged.call_id, logged.name, logged.arguments)
    if logged.waited_at is not None:
        kind = logged.waited_for or ""
        yield logged.waited_at, 3, lambda: display.call_waits(call, kind)
    decided_at = logged.started_at or logged.finished_at
    if logged.decision is not None and decided_at is not None:
        decided = f"  {_decision_text(logged)}: {call_text(call)}"
        yield decided_at, 1, lambda: display.console.line(decided, "yellow")
    ran = call
    if logged.edited_arguments is not None:
        ran = ToolCall.from_json(logged.call_id, logged.name, logged.edited_arguments)
    if logged.started_at is not None:
        yield logged.started_at, 2, lambda: display.call_started(ran)
    if logged.finished_at is not None and logged.result is not None:
        result, duration = logged.result, logged.duration_s or 0.0

        def finished() -> None:
            display.call_finished(ran, logged.error_code is None, result, duration)

        yield logged.finished_at, 3, finished


def _decision_text(call: LoggedCall) -> str:
    verb = {
        "approved": "✓ approved",
        "approved:run": "✓ approved for the run",
        "approved:session": "✓ approved for the session",
        "remembered:run": "✓ approved (remembered for the run)",
        "remembered:session": "✓ approved (remembered for the session)",
        "rejected": "✗ rejected",
        "result": "✓ result sent",
    }
    text = verb.get(call.decision or "", call.decision or "")
    if call.edited_arguments is not None:
        text += " with edited arguments"
    return text + (f" by {call.decided_by}" if call.decided_by else "")


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PROMPT_CHARS else flat[: _PROMPT_CHARS - 3] + "..."
