"""Running a program in pydantic-monty: a pool of worker processes (one per process, made
when code mode is first used), a program driven from snapshot to snapshot, each of its tool
calls answered by the host, and what it ends with as an observation — its value and what it
printed, or why it failed with the line and what went wrong.

pydantic_monty is imported here only, and this module only when a program runs.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic_monty as monty
from pydantic_core import to_json

from tooldeck.code._limits import CodeLimits, Mount
from tooldeck.errors import ErrorCode
from tooldeck.messages import ToolResult

MontyError = monty.MontyError
Complete = monty.MontyComplete
"""A program that ran to its end (``.output``: its last expression's value)."""
"""What a program's failure raises (its syntax, types, run, a limit, a crashed worker)."""
Settled = dict[str, Any]
"""A call's answer as monty takes it: ``{"return_value": v}`` or ``{"exc_type": ...,
"message": ...}`` (JSON-able, so a paused program's answers are kept in its checkpoint)."""


@dataclass(slots=True)
class Progress:
    """A program between two snapshots: what it printed, the answers it has not read yet."""

    printed: str = ""
    answers: dict[int, Settled] = field(default_factory=dict)
    calls: int = 0


@dataclass(frozen=True, slots=True)
class Wait:
    """Make the program wait at this call (for a person's decision): ``drive`` gives it back
    with the snapshot's dump (base64) to go on from."""

    record: Any
    """What the host keeps of the waiting call."""
    dump: str = ""
    at: int = -1
    """Where the call is in the program's source (a UTF-8 byte offset; -1: not known)."""
    source: str = ""
    """The source ``at`` indexes, as monty names it (``<python-input-N>``: the session's N-th
    program; a call inside a function an earlier program defined names that one); '' when
    the worker does not say."""


Answer = Callable[[str, dict[str, Any], int], Awaitable[Settled | ToolResult | Wait]]
"""Answers one tool call of the program (name, keyword arguments, the calls before it): its
answer, the program made to wait there, or a ToolResult to stop it with (a limit reached)."""


_pool: tuple[int, monty.AsyncMonty] | None = None


async def pool() -> monty.AsyncMonty:
    """This process's pool of workers (made on first use; a forked child makes its own)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        made = monty.AsyncMonty(min_processes=1)
        await made.__aenter__()
        _pool = (os.getpid(), made)
    return _pool[1]


def checkout(
    workers: monty.AsyncMonty, limits: CodeLimits, stubs: str | None = None
) -> monty.AsyncMontySession:
    """A worker for one program, with its limits; with ``stubs`` (the tools' signatures) the
    program is type-checked before it runs."""
    return workers.checkout(
        type_check=stubs is not None,
        type_check_stubs=stubs,
        type_check_format="concise",
        limits={
            "max_feed_duration_secs": float(limits.duration_s),
            "max_memory": int(limits.memory_bytes),
            "max_recursion_depth": int(limits.max_depth),
            "max_suspensions": int(limits.max_calls) * 3 + 20,
        },
        os_policy={"sleep": "zero"},
    )


def mounted(mounts: tuple[Mount, ...]) -> list[monty.MountDir]:
    return [
        monty.MountDir(host_path=m.host_path, virtual_path=m.virtual_path, mode=m.mode)
        for m in mounts
    ]


async def drive(
    snapshot: monty.AsyncSnapshot, answer: Answer, progress: Progress
) -> monty.MontyComplete | Wait | ToolResult:
    """Run the program on from ``snapshot``, answering each call, until it completes, waits
    or must stop."""
    while not isinstance(snapshot, monty.MontyComplete):
        if isinstance(snapshot, monty.AsyncFunctionSnapshot):
            if snapshot.is_os_function:  # files (the mounts), imports: monty answers
                snapshot = await snapshot.resume_auto()
                continue
            got = await answer(str(snapshot.function_name), dict(snapshot.kwargs), progress.calls)
            if isinstance(got, ToolResult):
                return got
            if isinstance(got, Wait):
                dump = base64.b64encode(snapshot.dump()).decode()
                where = snapshot.position
                return Wait(got.record, dump, where.start, str(where.filename))
            progress.calls += 1
            if snapshot.args:
                got = {"exc_type": "TypeError", "message": "tools take keyword arguments only"}
            progress.answers[snapshot.call_id] = got
            snapshot = await snapshot.resume({"future": ...})
        elif isinstance(snapshot, monty.AsyncFutureSnapshot):
            ids = snapshot.pending_call_ids
            settled: dict[int, Any] = {
                i: progress.answers.pop(i) for i in ids if i in progress.answers
            }
            snapshot = await snapshot.resume(settled)
        else:  # a name the program never defined
            snapshot = await snapshot.resume()
    return snapshot


def finished(value: Any, printed: str, limits: CodeLimits) -> ToolResult:
    """What the model reads of a program that completed: what it printed, then its value."""
    parts = [printed.rstrip("\n")] if printed else []
    if value is not None:
        shown = value if isinstance(value, str) else to_json(value, fallback=repr).decode()
        parts.append(f"result: {shown}")
    text = "\n".join(parts) or "(the program printed nothing and its last expression is None)"
    return ToolResult.success(_cut(text, limits.max_output_chars))


def failed(error: monty.MontyError, printed: str, limits: CodeLimits) -> ToolResult:
    """What the model reads of a program that failed: a code, the line, what went wrong."""
    code, text = _why(error, limits)
    if printed:
        text = f"{text}\nprinted before it stopped:\n{printed.rstrip()}"
    return ToolResult.failure(code, _cut(text, limits.max_output_chars))


def _why(error: monty.MontyError, limits: CodeLimits) -> tuple[ErrorCode, str]:
    if isinstance(error, monty.MontyCrashedError):
        return ErrorCode.CODE_CRASHED, (
            f"the sandbox's worker process stopped ({error}); the program did not finish and "
            "its effects beyond its tool calls are lost: run it again, smaller"
        )
    if isinstance(error, monty.MontyTypingError):
        return ErrorCode.CODE_TYPE, f"the program does not type-check:\n{error.display()}"
    if isinstance(error, monty.MontySyntaxError):
        return ErrorCode.CODE_SYNTAX, _located(error, "the program is not valid Python")
    if isinstance(error, monty.MontyRuntimeError):
        limit = _limit(error, limits)
        if limit:
            return ErrorCode.CODE_LIMIT, limit
        return ErrorCode.CODE_ERROR, _located(error, "the program raised")
    return ErrorCode.CODE_ERROR, f"the program failed: {error}"


def _limit(error: monty.MontyRuntimeError, limits: CodeLimits) -> str:
    """The limit a runtime error reports, in words ('' for any other error)."""
    inner = error.exception()
    message = error.display("msg")
    if isinstance(inner, TimeoutError) and "time limit exceeded" in message:
        return f"the program ran longer than its limit of {limits.duration_s:g} s and was stopped"
    if isinstance(inner, MemoryError) and f"> {_print_cap(limits)} bytes" in message:
        return (
            f"the program printed more than {_print_cap(limits)} bytes and was stopped: print "
            "less (a summary, or the value itself as the last expression)"
        )
    if isinstance(inner, MemoryError) and "memory limit exceeded" in message:
        mib = limits.memory_bytes / (1024 * 1024)
        return _located(error, f"the program used more than its {mib:g} MiB of memory")
    if isinstance(inner, RecursionError):
        return _located(error, f"the program nested calls deeper than {limits.max_depth}")
    if "suspension limit" in message:
        return f"the program made more than {limits.max_calls} tool calls and was stopped"
    return ""


def _located(error: monty.MontySyntaxError | monty.MontyRuntimeError, what: str) -> str:
    frames = error.traceback()
    head = f"{what}: {error.display('type-msg')}"
    if not frames:
        return head
    frame = frames[-1]
    source = (frame.source_line or "").strip()
    where = f"line {frame.line}" + (f" ({source})" if source else "")
    return f"{head}\nat {where}"


def print_sink(limits: CodeLimits) -> monty.CollectString:
    """Collects what a program prints, up to its cap."""
    return monty.CollectString(max_bytes=_print_cap(limits))


def _print_cap(limits: CodeLimits) -> int:
    return limits.max_output_chars * 4


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... (cut: {len(text):,} characters in all; print less)"
