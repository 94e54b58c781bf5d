"""Records (what the observer queues) to rows and statements (what the writer executes).

A record is a tuple whose first item is its kind. Making rows is the writer thread's work,
so it is kept lean: JSON through pydantic-core, settings JSON made once per settings
object, and a run whose start and end come in the same batch written as one row.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic_core import to_json

from tooldeck.checkpoint import Approve, Reject
from tooldeck.contracts import (
    AssistantOutput,
    PendingCall,
    RecordedError,
    ToolCall,
    ToolTrace,
    Usage,
)
from tooldeck.models.base import ModelSettings

START, TURN, PENDING, CALL, END, FLUSH = range(6)
"""Record kinds."""

Record = tuple[Any, ...]
Row = tuple[Any, ...]

_RUN = (
    "INSERT INTO runs (run_id, session_id, model, prompt, instructions, started_at, ended_at,"
    " duration_s, stop_reason, answer, error, input_tokens, output_tokens, model_turns)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_START = (
    "INSERT INTO runs (run_id, session_id, model, prompt, instructions, started_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET parts = parts + 1,"
    " ended_at = NULL, stop_reason = NULL"
)
_TURN = "INSERT OR REPLACE INTO model_turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_PENDING = (
    "INSERT INTO tool_calls (run_id, round, call_id, name, arguments, waited_for, waited_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_CALL = (
    "INSERT INTO tool_calls (run_id, round, call_id, name, arguments, edited_arguments,"
    " started_at, finished_at, duration_s, result, error_code, error, decision, decided_by)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET"
    " edited_arguments = excluded.edited_arguments, started_at = excluded.started_at,"
    " finished_at = excluded.finished_at, duration_s = excluded.duration_s,"
    " result = excluded.result, error_code = excluded.error_code, error = excluded.error,"
    " decision = excluded.decision, decided_by = excluded.decided_by"
)
_END = (
    "UPDATE runs SET ended_at = ?, duration_s = coalesce(duration_s, 0) + ?,"
    " stop_reason = ?, answer = ?, error = ?, input_tokens = coalesce(?, input_tokens),"
    " output_tokens = coalesce(?, output_tokens), model_turns = coalesce(?, model_turns)"
    " WHERE run_id = ?"
)

Statements = list[tuple[str, list[Row]]]


class RowMaker:
    """Turns a batch of records into statements, in an order that keeps what matters."""

    def __init__(self) -> None:
        self._settings_json: dict[ModelSettings, str] = {}

    def statements(self, batch: list[Record]) -> Statements:
        """Whole runs first, then starts, turns, pending calls, calls, and ends: a run's row
        exists before its end is written, a pending call's before its decision, and a
        run's ends stay in order."""
        starts: list[Record] = []
        ends: list[Record] = []
        turns: list[Row] = []
        pending: list[Row] = []
        calls: list[Row] = []
        for record in batch:
            kind = record[0]
            if kind == CALL:
                calls.append(_call_row(*record[1:]))
            elif kind == TURN:
                turns.append(self._turn_row(*record[1:]))
            elif kind == START:
                starts.append(record)
            elif kind == END:
                ends.append(record)
            elif kind == PENDING:
                pending.append(_pending_row(*record[1:]))
        whole, start_rows, end_rows = _runs(starts, ends)
        planned = [
            (_RUN, whole),
            (_START, start_rows),
            (_TURN, turns),
            (_PENDING, pending),
            (_CALL, calls),
            (_END, end_rows),
        ]
        return [(sql, rows) for sql, rows in planned if rows]

    def _turn_row(
        self,
        run_id: str,
        round_: int,
        started_at: float,
        duration_s: float,
        settings: ModelSettings,
        output: AssistantOutput,
    ) -> Row:
        text = self._settings_json.get(settings)
        if text is None:
            text = self._settings_json[settings] = json.dumps(dataclasses.asdict(settings))
        usage = output.usage
        return (
            run_id,
            round_,
            started_at,
            duration_s,
            usage.input_tokens if usage is not None else None,
            usage.output_tokens if usage is not None else None,
            text,
            output.content,
            len(output.tool_calls),
        )


def _runs(starts: list[Record], ends: list[Record]) -> tuple[list[Row], list[Row], list[Row]]:
    """A new run whose first end is in the batch becomes one whole row; the rest stay."""
    fresh = {record[1]: record for record in starts if not record[7]}
    whole: list[Row] = []
    end_rows: list[Row] = []
    for end in ends:
        start = fresh.pop(end[1], None)
        if start is None:
            end_rows.append(_end_row(*end[1:]))
        else:
            ended_at, duration_s, reason, answer, error, *tokens = _end_row(*end[1:])[:-1]
            counted = [0 if count is None else count for count in tokens]
            whole.append((*start[1:7], ended_at, duration_s, reason, answer, error, *counted))
    open_starts = [record[1:7] for record in starts if record[7] or record[1] in fresh]
    return whole, open_starts, end_rows


def arguments_text(call: ToolCall) -> str:
    """The arguments as the model sent them: its raw text, or the object as compact JSON."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return to_json(call.arguments).decode()


def _call_row(
    run_id: str,
    round_: int,
    trace: ToolTrace,
    started_at: float | None,
    finished_at: float,
    decision: object,
) -> Row:
    call, result = trace.call, trace.result
    edited = decided = by = None
    if decision is not None:
        if isinstance(decision, Approve):
            decided, by = "approved", decision.by or None
            if decision.arguments is not None:
                edited = to_json(decision.arguments).decode()
        elif isinstance(decision, Reject):
            decided, by = "rejected", decision.by or None
        else:
            decided = "result"
    code = result.error_code
    error = trace.error
    return (
        run_id,
        round_,
        call.id,
        call.name,
        arguments_text(call),
        edited,
        started_at,
        finished_at,
        trace.duration_s,
        result.output,
        None if code is None else code.value,
        None if error is None else _error_text(error),
        decided,
        by,
    )


def _error_text(error: BaseException) -> str:
    name = error.type_name if isinstance(error, RecordedError) else type(error).__name__
    return f"{name}: {error}"


def _pending_row(run_id: str, round_: int, pending: PendingCall, paused_at: float) -> Row:
    call = pending.call
    return (run_id, round_, call.id, call.name, arguments_text(call), pending.kind, paused_at)


def _end_row(
    run_id: str,
    ended_at: float,
    duration_s: float,
    stop_reason: str,
    answer: str | None,
    error: str | None,
    usage: Usage | None,
) -> Row:
    """The end of a run, or of a part of it (a pause); without usage the tokens stay."""
    tokens: tuple[int | None, ...] = (None, None, None)
    if usage is not None:
        tokens = (usage.input_tokens, usage.output_tokens, usage.requests)
    return (ended_at, duration_s, str(stop_reason), answer, error, *tokens, run_id)
