"""Property tests over each stored format's reader: any change to valid stored data (a value
replaced, a key removed or added, the text cut or garbled) either loads equal or raises the
reader's documented error, naming what is wrong — never another exception, never data
dropped without a word. Checkpoint JSON, session rows, run log rows, and what a durable run
keeps in the DBOS database (its published pauses, its recorded model turns)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from _mutations import mutated, mutated_text
from _stores import Store, execute
from helpers import answer, call, calls
from test_pause_resume import agent_for, mixed_turn, paused_run
from tooldeck import AssistantOutput, Checkpoint, Message, Reject, ScriptedModel
from tooldeck.durable._pauses import stored_pause
from tooldeck.durable._steps import RecordedTurn, _recorded_turn
from tooldeck.errors import CheckpointError, ModelError, RunLogError, SessionError
from tooldeck.run._engine.checkpoint import check_decisions, verify
from tooldeck.run.session import StoredRun

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _steady(checkpoint: Checkpoint, key: bytes | None = None) -> Checkpoint:
    """The checkpoint with its timings fixed, so each run of the suite draws the same cases
    (its run id is random, but always 32 characters)."""
    from tooldeck.run._engine.checkpoint import _sign

    trace = tuple(item.model_copy(update={"duration_s": 0.25}) for item in checkpoint.trace)
    counters = checkpoint.counters.model_copy(update={"elapsed_s": 0.5})
    steady = checkpoint.model_copy(update={"trace": trace, "counters": counters, "signature": None})
    return steady if key is None else steady.model_copy(update={"signature": _sign(steady, key)})


_CHECKPOINT = _steady(paused_run()[1])
_SIGNED_AGENT, _signed = paused_run(checkpoint_key=b"secret")
_SIGNED = _steady(_signed, b"secret")


def _changed(text: str, draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return draw(mutated_text(text))
    return json.dumps(draw(mutated(json.loads(text))), ensure_ascii=draw(st.booleans()))


def _rejections(checkpoint: Checkpoint) -> dict[str, Reject]:
    return {pending.id: Reject("no") for pending in checkpoint.pending}


@PROPERTY
@given(st.data())
def test_a_changed_signed_checkpoint_is_refused_or_is_the_same_checkpoint(
    data: st.DataObject,
) -> None:
    text = _changed(_SIGNED.to_json(), data.draw)
    try:
        loaded = Checkpoint.from_json(text)
        _SIGNED_AGENT.check_resumable(loaded)
    except CheckpointError:
        return
    assert loaded.to_json() == _SIGNED.to_json()


@PROPERTY
@given(st.data())
def test_a_changed_checkpoint_is_refused_or_resumes(data: st.DataObject) -> None:
    text = _changed(_CHECKPOINT.to_json(), data.draw)
    try:
        loaded = Checkpoint.from_json(text)
        agent = agent_for(ScriptedModel([answer("ok")] * 3))
        agent.check_resumable(loaded)
        decisions = _rejections(loaded)
    except CheckpointError:
        return
    stored_again = loaded.to_json()
    assert Checkpoint.from_json(stored_again).to_json() == stored_again  # nothing lost
    try:
        result = agent.resume_sync(loaded, decisions)
    except CheckpointError:
        return
    assert result.stop_reason is not None


# --- session rows -------------------------------------------------------------------------

_MESSAGES = TypeAdapter(tuple[Message, ...])
_CELLS = (
    st.none()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(max_size=6)
)
"""What an SQLite cell can hold."""


def _copy(template: Path, folder: Path) -> Path:
    """A copy of the template database, whole (its WAL included), in a file of its own."""
    path = folder / f"{uuid.uuid4().hex}.db"
    source, copy = sqlite3.connect(template), sqlite3.connect(path)
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    return path


def _session_template(folder: Path) -> Path:
    from tooldeck.sessions import SQLiteSession, stored_run_cache

    path = folder / "template.db"

    async def write() -> None:
        session = SQLiteSession(path, "chat")
        turns = [
            (Message.user("one"), Message.assistant(AssistantOutput(content="first"))),
            _CHECKPOINT.messages,
            (Message.user("three \u00e9"), Message.assistant(AssistantOutput(content="third"))),
        ]
        for after, messages in enumerate(turns):
            await session.append(StoredRun(f"run-{after}", messages), after=after)
        await session.append(StoredRun("run-paused", checkpoint=_CHECKPOINT), after=3)
        await session.aclose()

    asyncio.run(write())
    stored_run_cache.clear()
    return path


@pytest.fixture(scope="module")
def session_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _session_template(tmp_path_factory.mktemp("sessions"))


@st.composite
def _session_change(draw: st.DrawFn) -> tuple[int, str, Any]:
    seq = draw(st.integers(1, 4))
    column = draw(st.sampled_from(["body", "body", "body", "schema_version", "run_id", "seq"]))
    if column != "body":
        return seq, column, draw(_CELLS)
    way = draw(st.sampled_from(["json", "text", "cell", "utf8"]))
    return seq, column, way


def _body_change(draw: st.DrawFn, body: str, way: str) -> Any:
    if way == "json":
        return json.dumps(draw(mutated(json.loads(body))), ensure_ascii=draw(st.booleans()))
    if way == "text":
        return draw(mutated_text(body))
    if way == "utf8":
        return body.encode()
    return draw(_CELLS)


def _expected_history(path: Path) -> tuple[tuple[Message, ...], int, Checkpoint | None]:
    """What the session holds, read by other means: any failure here must be a SessionError
    of load()."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT seq, run_id, kind, schema_version, body FROM tooldeck_session_log "
            "WHERE kind = 'turn' OR seq = (SELECT max(seq) FROM tooldeck_session_log) ORDER BY seq"
        ).fetchall()
    messages: list[Message] = []
    for seq, run_id, kind, version, body in rows:
        sound = type(seq) is int and seq > 0 and type(run_id) is str and type(version) is int
        if not sound or version > 2 or not isinstance(body, str | bytes):
            raise ValueError("not a row tooldeck writes")
        text = body.decode() if isinstance(body, bytes) else body
        if kind == "turn":
            messages.extend(_MESSAGES.validate_json(text))
    head_kind, head_body = rows[-1][2], rows[-1][4]
    pending = None
    if head_kind == "paused":
        pending = Checkpoint.from_json(head_body)
    return tuple(messages), rows[-1][0], pending


@PROPERTY
@given(change=_session_change(), data=st.data())
def test_a_changed_session_row_loads_as_stored_or_is_a_session_error(
    session_template: Path, tmp_path: Path, change: tuple[int, str, Any], data: st.DataObject
) -> None:
    from tooldeck.sessions import SQLiteSession, stored_run_cache

    path = _copy(session_template, tmp_path)
    seq, column, value = change
    with sqlite3.connect(path) as db:
        if column == "body":
            (body,) = db.execute(
                "SELECT body FROM tooldeck_session_log WHERE seq = ?", (seq,)
            ).fetchone()
            value = _body_change(data.draw, body, value)
        try:
            db.execute(f"UPDATE tooldeck_session_log SET {column} = ? WHERE seq = ?", (value, seq))
        except (sqlite3.IntegrityError, UnicodeEncodeError):
            return  # the database itself refused the change (or sqlite3 cannot write it)
    stored_run_cache.clear()

    async def read() -> tuple[Any, Any]:
        async with SQLiteSession(path, "chat") as session:
            return await session.load(), await session.pending()

    try:
        expected: Any = _expected_history(path)
    except Exception:
        expected = None
    try:
        history, pending = asyncio.run(read())
    except SessionError:
        assert expected is None, "a session that reads by other means was refused"
        return
    assert expected is not None, "a row that does not read was loaded without a word"
    assert (history.messages, history.head, history.pending) == expected
    assert pending == expected[2]


# --- run log rows -------------------------------------------------------------------------

_TABLES = {"runs": 17, "model_turns": 9, "tool_calls": 17}
"""The run log's tables and how many columns each has (tool_calls' first is its rowid)."""


@pytest.fixture(scope="module")
def run_log_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tooldeck.runlog import RunLog

    path = tmp_path_factory.mktemp("runlog") / "template.db"
    with RunLog(path) as log:
        model = ScriptedModel([calls(call("add_numbers", "c1", left=1, right=2)), answer("3")])
        agent_for(model, run_log=log).run_sync("add them")
        agent_for(ScriptedModel([answer("hi")]), run_log=log).run_sync("hello")
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@st.composite
def _run_log_change(draw: st.DrawFn) -> tuple[str, int, int, Any]:
    table = draw(st.sampled_from(sorted(_TABLES)))
    row = draw(st.integers(0, 1))
    column = draw(st.integers(0, _TABLES[table] - 1))
    value = draw(_CELLS | st.sampled_from(["{}", '{"temperature": 0.5}', "[]", "{"]))
    return table, row, column, value


def _stored_runs(path: Path) -> dict[str, tuple[int, int]]:
    """Run id -> how many model turns and tool calls the database holds for it."""
    with sqlite3.connect(path) as db:
        ids = [run_id for (run_id,) in db.execute("SELECT run_id FROM runs")]
        return {
            run_id: tuple(
                db.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", (run_id,)).fetchone()[
                    0
                ]
                for table in ("model_turns", "tool_calls")
            )
            for run_id in ids
            if isinstance(run_id, str)
        }


@PROPERTY
@given(change=_run_log_change())
def test_a_changed_run_log_row_reads_whole_or_is_a_run_log_error(
    run_log_template: Path, tmp_path: Path, change: tuple[str, int, int, Any]
) -> None:
    from tooldeck.runlog import list_runs, load_run

    path = _copy(run_log_template, tmp_path)
    table, row, column, value = change
    with sqlite3.connect(path) as db:
        name = db.execute(f"SELECT name FROM pragma_table_info('{table}') WHERE cid = ?", (column,))
        (column_name,) = name.fetchone()
        rowid = db.execute(f"SELECT rowid FROM {table} ORDER BY rowid LIMIT 1 OFFSET ?", (row,))
        found = rowid.fetchone()
        if found is None:
            return
        try:
            db.execute(f"UPDATE {table} SET {column_name} = ? WHERE rowid = ?", (value, found[0]))
        except (sqlite3.IntegrityError, UnicodeEncodeError):
            return
    stored = _stored_runs(path)
    try:
        listed = list_runs(path, None)
        loaded = {run_id: load_run(path, run_id) for run_id in stored}
    except RunLogError:
        return
    assert sorted(run.run_id for run in listed) == sorted(stored)
    for run_id, (turns, tool_calls) in stored.items():
        assert (len(loaded[run_id].turns), len(loaded[run_id].calls)) == (turns, tool_calls)
        json.dumps(loaded[run_id].to_json())  # what `tooldeck logs --json` prints


def test_the_unchanged_checkpoints_resume() -> None:
    _SIGNED_AGENT.check_resumable(Checkpoint.from_json(_SIGNED.to_json()))
    agent = agent_for(ScriptedModel([answer("ok")]))
    result = agent.resume_sync(_CHECKPOINT.to_json(), _rejections(_CHECKPOINT))
    assert result.output == "ok"


_PG_SETTINGS = settings(PROPERTY, max_examples=40)


@_PG_SETTINGS
@given(data=st.data())
async def test_a_changed_turn_body_loads_as_stored_or_is_a_session_error_in_both_stores(
    store: Store, data: st.DataObject
) -> None:
    from tooldeck.sessions import stored_run_cache

    session_id = uuid.uuid4().hex
    writer = store.session(session_id)
    turns = [(Message.user("one"),), _CHECKPOINT.messages, (Message.user("three"),)]
    for after, messages in enumerate(turns):
        await writer.append(StoredRun(f"run-{after}", messages), after=after)
    await writer.append(StoredRun("run-paused", checkpoint=_CHECKPOINT), after=3)
    await writer.aclose()  # a PostgreSQL session holds a pool: one at a time
    seq = data.draw(st.integers(1, 4))
    ((body,),) = execute(
        store,
        "SELECT body FROM tooldeck_session_log WHERE session_id = ? AND seq = ?",
        (session_id, seq),
    )
    way = data.draw(st.sampled_from(["json", "text", "null"]))
    changed = None if way == "null" else _body_change(data.draw, body, way)
    try:
        execute(
            store,
            "UPDATE tooldeck_session_log SET body = ? WHERE session_id = ? AND seq = ?",
            (changed, session_id, seq),
        )
    except Exception:
        return
    stored_run_cache.clear()
    rows = execute(
        store,
        "SELECT kind, body FROM tooldeck_session_log WHERE session_id = ? ORDER BY seq",
        (session_id,),
    )
    try:
        expected: Any = _expected_from(rows)
    except Exception:
        expected = None
    reader = store.session(session_id)
    try:
        history = await reader.load()
    except SessionError:
        assert expected is None, "a session that reads by other means was refused"
        return
    finally:
        await reader.aclose()
    assert expected is not None, "a row that does not read was loaded without a word"
    assert (history.messages, history.pending) == expected


def _expected_from(rows: list[tuple[Any, ...]]) -> tuple[tuple[Message, ...], Checkpoint | None]:
    messages = [m for kind, body in rows if kind == "turn" for m in _MESSAGES.validate_json(body)]
    head_kind, head_body = rows[-1]
    return tuple(messages), Checkpoint.from_json(head_body) if head_kind == "paused" else None


# --- a durable run's pauses and recorded turns ---------------------------------------------


def _steady_pause() -> str:
    """A paused result as a durable run publishes it, its timings fixed."""
    paused = agent_for(mixed_turn()).run_sync("tidy up")
    assert paused.checkpoint is not None
    trace = tuple(item.model_copy(update={"duration_s": 0.25}) for item in paused.tool_trace)
    update = {"checkpoint": _steady(paused.checkpoint), "tool_trace": trace}
    return paused.model_copy(update=update).model_dump_json()


_PAUSE = _steady_pause()
_WHERE = "pause 2 of durable run 'r-1' (stored in the DBOS system database)"


@PROPERTY
@given(st.data())
def test_a_changed_durable_pause_reads_whole_or_is_a_checkpoint_error(
    data: st.DataObject,
) -> None:
    text = _changed(_PAUSE, data.draw)
    try:
        result = stored_pause("r-1", 2, text)
    except CheckpointError as error:
        refused: CheckpointError | None = error
    else:
        refused = None
    if refused is not None:
        assert str(refused).startswith(_WHERE), refused
        return
    assert result.checkpoint is not None
    again = result.model_dump_json()
    assert stored_pause("r-1", 2, again).model_dump_json() == again  # nothing lost
    try:  # what sending decisions to the run checks next
        verify(result.checkpoint, None)
        check_decisions(result.checkpoint, _rejections(result.checkpoint))
    except CheckpointError:
        return


@pytest.mark.parametrize(
    ("stored", "said"),
    [
        (None, "is not JSON text"),
        (b"\xff", "is not JSON text"),
        ("[]", "is broken: it holds no checkpoint"),
        ('{"checkpoint": null}', "is broken: it holds no checkpoint"),
    ],
)
def test_a_durable_pause_that_is_no_paused_result_is_a_checkpoint_error(
    stored: object, said: str
) -> None:
    with pytest.raises(CheckpointError) as refused:
        stored_pause("r-1", 2, stored)
    assert str(refused.value).startswith(f"{_WHERE} {said}")


_TURN = RecordedTurn(
    turn=AssistantOutput(tool_calls=[call("delete_file", "c1", path="a.txt")]),
    called={"delete_file": "0123456789abcdef"},
).model_dump_json()


@PROPERTY
@given(st.data())
def test_a_changed_recorded_turn_reads_whole_or_is_a_model_error(data: st.DataObject) -> None:
    text = _changed(_TURN, data.draw)
    try:
        kept = _recorded_turn(text)
    except ModelError as error:
        refused: ModelError | None = error
    else:
        refused = None
    if refused is not None:
        assert "cannot be replayed: the model turn its step" in str(refused), refused
        return
    again = kept.model_dump_json()
    assert _recorded_turn(again).model_dump_json() == again
