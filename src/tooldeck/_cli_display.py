"""How ``tooldeck`` shows a run as it happens: each call, its result, the answer, the timing.

Uses rich when it is installed (the ``local`` and ``cli`` extras) and plain lines otherwise.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TextIO

from tooldeck.contracts import RunResult, ToolCall
from tooldeck.events import (
    Event,
    FinalAnswer,
    ModelRequest,
    ModelResponse,
    ToolCallFinished,
    ToolCallStarted,
)
from tooldeck.tools.registry import ToolEntry, ToolView

_RESULT_CHARS = 300


class Console:
    """Styled lines on stdout: rich when available, plain text otherwise."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._rich: Any = None
        try:
            from rich.console import Console as RichConsole
        except ImportError:
            return
        self._rich = RichConsole(file=self._stream, highlight=False, soft_wrap=True)

    def line(self, text: str, style: str = "") -> None:
        if self._rich is None:
            print(text, file=self._stream, flush=True)
            return
        from rich.text import Text

        self._rich.print(Text(text, style=style))

    def status(self, text: str) -> AbstractContextManager[Any]:
        """A spinner while something runs (on a terminal with rich); nothing otherwise."""
        if self._rich is None or not self._rich.is_terminal:
            return nullcontext()
        return self._rich.status(text, spinner="dots")  # type: ignore[no-any-return]


def call_text(call: ToolCall) -> str:
    """``name(a=1, b="x")``, or the model's raw text when it was not a JSON object."""
    if call.raw_arguments is not None:
        return f"{call.name}({call.raw_arguments})"
    arguments = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in call.arguments.items()
    )
    return f"{call.name}({arguments})"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _RESULT_CHARS else flat[: _RESULT_CHARS - 3] + "..."


class RunDisplay:
    """Turns the events of ``Agent.stream()`` into lines as they come."""

    def __init__(self, console: Console, model_name: str) -> None:
        self.console = console
        self.model_name = model_name
        self._asked_at = 0.0
        self._started: set[str] = set()
        self._status: AbstractContextManager[Any] | None = None
        self.model_s = 0.0

    def show(self, event: Event) -> None:
        if isinstance(event, ModelRequest):
            self._asked_at = time.perf_counter()
            self._spin(f"round {event.round}: {self.model_name} is thinking...")
        elif isinstance(event, ModelResponse):
            self._spin(None)
            self._model_answered(event)
        elif isinstance(event, ToolCallStarted):
            self._started.add(event.call.id)
            self.console.line(f"  → {call_text(event.call)}", "cyan")
        elif isinstance(event, ToolCallFinished):
            self._call_finished(event)
        elif isinstance(event, FinalAnswer):
            self._spin(None)
            for pending in event.result.pending:
                waits = "approval" if pending.kind == "approval" else "the application's result"
                self.console.line(f"  ⏸ {call_text(pending.call)} waits for {waits}", "yellow")

    def close(self) -> None:
        self._spin(None)

    def _spin(self, text: str | None) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
            self._status = None
        if text is not None:
            self._status = self.console.status(text)
            self._status.__enter__()

    def _model_answered(self, event: ModelResponse) -> None:
        seconds = time.perf_counter() - self._asked_at
        self.model_s += seconds
        usage = event.output.usage
        tokens = f", {usage.input_tokens} in / {usage.output_tokens} out tokens" if usage else ""
        calls = len(event.output.tool_calls)
        what = _count(calls, "tool call") if calls else "answer"
        self.console.line(f"round {event.round}: {what} ({seconds:.2f} s{tokens})", "dim")

    def _call_finished(self, event: ToolCallFinished) -> None:
        trace = event.trace
        if trace.call.id not in self._started:  # refused before it ran
            self.console.line(f"  → {call_text(trace.call)}", "cyan")
        mark, style = ("←", "green") if trace.result.ok else ("✗", "red")
        timing = f"  ({trace.duration_s * 1000:.1f} ms)"
        self.console.line(f"  {mark} {_short(trace.result.output)}{timing}", style)

    def summary(self, result: RunResult[Any], seconds: float) -> None:
        self.console.line(f"answer: {result.answer}", "bold")
        usage = result.usage
        turns = _count(usage.requests, "model turn")
        calls = _count(len(result.tool_trace), "tool call")
        self.console.line(
            f"{seconds:.2f} s total, {self.model_s:.2f} s in the model; {turns}, {calls}, "
            f"{usage.input_tokens} input / {usage.output_tokens} output tokens; "
            f"stop: {result.stop_reason}",
            "dim",
        )


def show_specs(console: Console, view: ToolView) -> None:
    """The tool specs the model would see, one block each, marked when a call waits."""
    for entry in view.dispatch.values():
        spec = entry.spec
        console.line(spec.name + _marks(entry), "bold cyan")
        if spec.description:
            console.line(f"  {spec.description}")
        schema = json.dumps(spec.parameters, indent=2, ensure_ascii=False)
        for line in schema.splitlines():
            console.line(f"  {line}", "dim")
        console.line("")


def _marks(entry: ToolEntry) -> str:
    if entry.external:
        return "  [external: the application runs its calls]"
    rule = entry.options.requires_approval
    if rule is True:
        return "  [asks for approval]"
    return "  [asks for approval of some calls]" if rule else ""
