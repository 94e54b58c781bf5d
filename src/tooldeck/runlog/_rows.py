"""Records (what the observer puts on the tape) to rows and statements (what the writer
executes).

The tape is one flat list: a record is its kind followed by that kind's fields (``FIELDS``
of them), appended in one ``list.extend`` (atomic under the GIL, and no object kept per
record). Making rows is the writer thread's work, so it is kept lean: JSON through
pydantic-core, settings JSON made once per settings object, and a run whose start and end
come in the same batch written as one row.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from itertools import chain
from typing import Any

from pydantic_core import to_json

from tooldeck.messages import ToolCall
from tooldeck.models.base import ModelSettings
from tooldeck.results import Approve, RecordedError, Reject, RememberedApproval

START, TURN, PENDING, CALL, END, FLUSH, GUARD, TAINT, HAND, SENT = range(10)
"""Record kinds."""
FIELDS = {
    START: 12,
    TURN: 11,
    PENDING: 5,
    CALL: 11,
    END: 10,
    FLUSH: 1,
    GUARD: 8,
    TAINT: 3,
    HAND: 6,
    SENT: 5,
}
"""How many values follow each kind on the tape (see the observer for what they are)."""

Record = tuple[Any, ...]
"""A record: its kind, then its fields."""
Row = tuple[Any, ...]
Statements = list[tuple[str, list[Row]]]
"""(SQL, the parameters of each execution), in the order to execute them."""

_NULL_TEXT = "nullif(?, '')"
_NULL_NUMBER = "nullif(?, -1)"
"""Optional values travel as '' or -1 and become NULL in SQL: Python 3.11's sqlite3 binds
None through its adapter protocol (two failed attribute lookups, each raising and clearing
an AttributeError), which costs more than the rest of the value's binding."""

_ROWS_PER_STATEMENT = 64
"""Rows one INSERT carries at most: a batch takes few statements, so few releases of the GIL
(SQLite releases it per statement step)."""
_MAX_VALUES = 999
"""The fewest values one statement may bind (SQLite before 3.32); fewer rows when wider."""


@dataclass(frozen=True, slots=True)
class _Insert:
    """An INSERT whose VALUES group repeats, to write many rows in one statement."""

    head: str
    values: tuple[str, ...]
    """Each column's value expression: ``?``, or one of the NULL mappings above."""
    tail: str = ""

    def statements(self, rows: list[Row]) -> Statements:
        if not rows:
            return []
        size = min(_ROWS_PER_STATEMENT, _MAX_VALUES // len(self.values))
        full, rest = divmod(len(rows), size)
        planned: Statements = []
        if full:
            groups = [_flat(rows[i * size : (i + 1) * size]) for i in range(full)]
            planned.append((self._sql(size), groups))
        if rest:
            planned.append((self._sql(rest), [_flat(rows[full * size :])]))
        return planned

    def _sql(self, count: int) -> str:
        group = "(" + ", ".join(self.values) + ")"
        return f"{self.head} VALUES {', '.join([group] * count)}{self.tail}"


def _flat(rows: list[Row]) -> Row:
    return tuple(chain.from_iterable(rows))


_T, _N = _NULL_TEXT, _NULL_NUMBER
_WRITER = ("?", "?", _N)
"""writer_host, writer_pid, writer_started (-1: the system does not say)."""
_RUN = _Insert(
    "INSERT INTO runs (run_id, session_id, model, prompt, instructions, started_at,"
    " parent_run_id, parent_call_id, writer_host, writer_pid, writer_started, ended_at,"
    " duration_s, stop_reason, answer, error, input_tokens, output_tokens, model_turns,"
    " cost_usd)",
    ("?", _T, "?", "?", "?", "?", _T, _T, *_WRITER, "?", "?", "?", "?", _T, "?", "?", "?", _N),
)
_START = _Insert(
    "INSERT INTO runs (run_id, session_id, model, prompt, instructions, started_at,"
    " parent_run_id, parent_call_id, writer_host, writer_pid, writer_started)",
    ("?", _T, "?", "?", "?", "?", _T, _T, *_WRITER),
    " ON CONFLICT (run_id) DO UPDATE SET parts = parts + 1, ended_at = NULL, stop_reason = NULL,"
    " writer_host = excluded.writer_host, writer_pid = excluded.writer_pid,"
    " writer_started = excluded.writer_started",
)
_TURN = _Insert(
    "INSERT OR REPLACE INTO model_turns (run_id, round, started_at, duration_s, input_tokens,"
    " output_tokens, settings, content, tool_calls, cost_usd, model)",
    ("?", "?", "?", "?", _N, _N, "?", "?", "?", _N, _T),
)
_PENDING = _Insert(
    "INSERT INTO tool_calls (run_id, round, call_id, name, arguments, waited_for, waited_at)",
    ("?",) * 7,
    " ON CONFLICT DO NOTHING",
)
_CALL = _Insert(
    "INSERT INTO tool_calls (run_id, round, call_id, name, arguments, edited_arguments,"
    " started_at, finished_at, duration_s, result, error_code, error, decision, decided_by,"
    " full_output)",
    ("?", "?", "?", "?", "?", _T, _N, "?", "?", "?", _T, _T, _T, _T, _T),
    " ON CONFLICT DO UPDATE SET"
    " edited_arguments = excluded.edited_arguments, started_at = excluded.started_at,"
    " finished_at = excluded.finished_at, duration_s = excluded.duration_s,"
    " result = excluded.result, error_code = excluded.error_code, error = excluded.error,"
    " decision = excluded.decision, decided_by = excluded.decided_by,"
    " full_output = excluded.full_output",
)
_GUARD = _Insert(
    "INSERT INTO guardrails (run_id, round, call_id, stage, name, verdict, message, at)",
    ("?", "?", _T, "?", "?", "?", "?", "?"),
)
_HAND = _Insert("INSERT INTO handoffs (run_id, round, call_id, source, target, at)", ("?",) * 6)
_SENT = _Insert("INSERT INTO sent_messages (run_id, round, content, sent, at)", ("?",) * 5)
_TAINT = "UPDATE runs SET untrusted_call_id = ?, untrusted_tool = ? WHERE run_id = ?"
_END = (
    "UPDATE runs SET ended_at = ?, duration_s = coalesce(duration_s, 0) + ?,"
    " stop_reason = ?, answer = ?, error = ?, input_tokens = coalesce(?, input_tokens),"
    " output_tokens = coalesce(?, output_tokens), model_turns = coalesce(?, model_turns),"
    " cost_usd = CASE WHEN ? IS NULL THEN cost_usd ELSE nullif(?, -1) END"
    " WHERE run_id = ?"
)


def read_tape(tape: list[Any]) -> tuple[list[Record], list[Any]]:
    """The records on a stretch of tape, and the flush requests' events among them."""
    records: list[Record] = []
    flushes: list[Any] = []
    position, end = 0, len(tape)
    while position < end:
        kind = tape[position]
        following = position + 1 + FIELDS[kind]
        if kind == FLUSH:
            flushes.append(tape[position + 1])
        else:
            records.append(tuple(tape[position:following]))
        position = following
    return records, flushes


class RowMaker:
    """Turns a batch of records into statements, in an order that keeps what matters."""

    def __init__(self) -> None:
        self._settings_json: dict[int, tuple[ModelSettings, str]] = {}
        """By the settings' id (an agent's settings are a few long-lived objects; hashing a
        dataclass is a Python call); the entry keeps the object, so its id stays its own."""

    def statements(self, batch: list[Record]) -> Statements:
        """Whole runs first, then starts, turns, pending calls, calls, and ends: a run's row
        exists before its end is written, a pending call's before its decision, and a
        run's ends stay in order."""
        starts: list[Record] = []
        ends: list[Record] = []
        turns: list[Row] = []
        pending: list[Row] = []
        calls: list[Row] = []
        guards: list[Row] = []
        taints: list[Row] = []
        handoffs: list[Row] = []
        sent: list[Row] = []
        for record in batch:
            kind = record[0]
            if kind == CALL:
                calls.append(_call_row(record))
            elif kind == TURN:
                turns.append(self._turn_row(record))
            elif kind == START:
                starts.append(record)
            elif kind == END:
                ends.append(record)
            elif kind == PENDING:
                pending.append(_pending_row(record))
            elif kind == GUARD:  # (kind, run id, round, call id, stage, name, verdict,
                guards.append(record[1:])  # message, at)
            elif kind == TAINT:  # (kind, run id, call id, tool name)
                taints.append((record[2], record[3], record[1]))
            elif kind == HAND:  # (kind, run id, round, call id, source, target, at)
                handoffs.append(record[1:])
            elif kind == SENT:  # (kind, run id, round, content, sent, at)
                sent.append(record[1:])
        whole, start_rows, end_rows = _runs(starts, ends)
        planned = [
            *_RUN.statements(whole),
            *_START.statements(start_rows),
            *_TURN.statements(turns),
            *_PENDING.statements(pending),
            *_CALL.statements(calls),
            *_GUARD.statements(guards),
            *_HAND.statements(handoffs),
            *_SENT.statements(sent),
        ]
        if end_rows:  # only runs whose start was written in an earlier batch, or resumed
            planned.append((_END, end_rows))
        if taints:  # after every run row exists
            planned.append((_TAINT, taints))
        return planned

    def _turn_row(self, record: Record) -> Row:
        """TURN: (kind, run id, round, asked at, duration, input tokens or -1, output tokens
        or -1, ModelSettings, text, number of calls, cost in dollars or -1, the model that
        answered or "")."""
        settings = record[7]
        known = self._settings_json.get(id(settings))
        if known is None:
            text = _settings_text(settings)
            known = self._settings_json[id(settings)] = (settings, text)
        return (*record[1:7], known[1], *record[8:])


def _runs(starts: list[Record], ends: list[Record]) -> tuple[list[Row], list[Row], list[Row]]:
    """A new run whose first end is in the batch becomes one whole row; the rest stay."""
    fresh = {record[1]: record for record in starts if not record[7]}
    whole: list[Row] = []
    end_rows: list[Row] = []
    for end in ends:
        start = fresh.pop(end[1], None)
        if start is None:
            end_rows.append(_end_row(end))
        else:
            _, _, ended_at, duration_s, reason, answer, error, *tokens, cost = end
            counted = [0 if count is None else count for count in tokens]
            whole.append(
                (
                    *_start_row(start),
                    *(ended_at, duration_s, reason, answer, error or ""),
                    *counted,
                    -1.0 if cost is None else cost,
                )
            )
    open_starts = [_start_row(record) for record in starts if record[7] or record[1] in fresh]
    return whole, open_starts, end_rows


def _start_row(record: Record) -> Row:
    """START: (kind, run id, session id or None, model, prompt, instructions, started at,
    resumed, parent run id or "", parent call id or "", the process's host, id, and start
    time or -1)."""
    session_id = record[2]
    return (record[1], session_id or "", *record[3:7], *record[8:])


def _settings_text(settings: ModelSettings) -> str:
    """The settings as JSON; a typed answer's schema by its name (the run's model knows it).
    ``tool_search`` is left out: ToolSearch sets it on the way to the model, per request."""
    fields = dataclasses.asdict(dataclasses.replace(settings, output_schema=None, tool_search=None))
    del fields["tool_search"]
    schema = settings.output_schema
    fields["output_schema"] = None if schema is None else schema.name
    return json.dumps(fields)


def arguments_text(call: ToolCall) -> str:
    """The arguments as the model sent them: its raw text, or the object as compact JSON."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return to_json(call.arguments).decode()


def _approved(scope: str) -> str:
    """A person's approval as the run log names it: ``approved``, or with its scope
    (``approved:run``, ``approved:session``)."""
    return "approved" if scope == "once" else f"approved:{scope}"


def _call_row(record: Record) -> Row:
    """CALL: (kind, run id, round, ToolCall, started at or -1, finished at, duration, result
    text, error code or "", error text or "", the decision on it or None, the whole output
    or "")."""
    _, run_id, round_, call, started_at, finished_at, duration_s, output, code, error, *rest = (
        record
    )
    decision, full_output = rest
    edited = decided = by = ""
    if decision is not None:
        if isinstance(decision, Approve):
            decided, by = _approved(decision.scope), decision.by
            if decision.arguments is not None:
                edited = to_json(decision.arguments).decode()
        elif isinstance(decision, RememberedApproval):  # no one was asked: it was remembered
            decided, by = f"remembered:{decision.scope}", decision.by
        elif isinstance(decision, Reject):
            decided, by = "rejected", decision.by
        else:
            decided = "result"
    return (
        run_id,
        round_,
        call.id,
        call.name,
        arguments_text(call),
        edited,
        started_at,
        finished_at,
        duration_s,
        output,
        code,
        error,
        decided,
        by,
        full_output,
    )


def error_text(error: BaseException) -> str:
    """A call's exception as the log keeps it: its type's name and its message."""
    name = error.type_name if isinstance(error, RecordedError) else type(error).__name__
    return f"{name}: {error}"


def _pending_row(record: Record) -> Row:
    """PENDING: (kind, run id, round, ToolCall, "approval" or "external", paused at)."""
    _, run_id, round_, call, kind, paused_at = record
    return (run_id, round_, call.id, call.name, arguments_text(call), kind, paused_at)


def _end_row(record: Record) -> Row:
    """END: (kind, run id, ended at, duration, stop reason, answer or None, error or None,
    input tokens, output tokens, requests — the three None when the run's usage is unknown:
    then the tokens already logged stay —, cost in dollars, -1 when unknown, None to keep
    the logged one)."""
    _, run_id, *fields, cost = record
    return (*fields, cost, cost, run_id)
