"""How ``tooldeck`` shows a run as it happens: each call, its result, the answer, the timing.

While the model writes, its text and tool arguments show as they come: in a live region on
a terminal with rich (the ``local`` and ``cli`` extras), else as plain text written piece by
piece. Uses rich when it is installed and plain lines otherwise.

A run whose answer is judged (output guardrails: ``run.handoff.judges_answers``) shows no text
while the model writes it: the answer shows once the guardrails passed it, and a text they
stop is never shown (what reached a terminal or a log cannot be taken back).
"""

from __future__ import annotations

import copy
import json
import sys
import traceback
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TextIO

from tooldeck.cli.load import is_own_code
from tooldeck.cli.totals import Tally, count, duration_text, stop_text, totals_line, unanswered
from tooldeck.errors import ErrorCode, ModelRetry
from tooldeck.messages import ToolCall, Usage
from tooldeck.results import RecordedError, RememberedApproval, RunResult, ToolTrace
from tooldeck.run.events import (
    Event,
    FinalAnswer,
    GuardrailChecked,
    HandedOff,
    MessageJoined,
    ModelRequest,
    ModelResponse,
    NestedEvent,
    RunRecovered,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    UntrustedContent,
)
from tooldeck.runlog.read import LoggedGuardrail
from tooldeck.safety import GuardrailDecision
from tooldeck.search import Searched, searched
from tooldeck.tools.registry import ToolEntry, ToolView, deferred

_RESULT_CHARS = 300


class Console:
    """Styled lines on stdout: rich when available, plain text otherwise."""

    def __init__(self, stream: TextIO | None = None, *, terminal: bool | None = None) -> None:
        """``terminal`` overrides whether ``stream`` is taken for a terminal (rich only)."""
        self._stream = stream or sys.stdout
        self._rich: Any = None
        self._label = ""
        """For the lines of a run inside an agent tool's call: the agent tools' names."""
        self._depth = 0
        try:
            from rich.console import Console as RichConsole
        except ImportError:
            return
        self._rich = RichConsole(
            file=self._stream, highlight=False, soft_wrap=True, force_terminal=terminal
        )

    def line(self, text: str, style: str = "") -> None:
        """Print one line, styled when rich is installed."""
        if self._label:
            text = _under(text, self._label, self._depth)
        if self._rich is None:
            print(text, file=self._stream, flush=True)
            return
        from rich.text import Text

        self._rich.print(Text(text, style=style))

    @property
    def terminal(self) -> bool:
        """Whether the lines go to a terminal (where a Ctrl-C shows as ``^C``)."""
        return self._stream.isatty()

    @property
    def live(self) -> bool:
        """Whether the console can redraw a region in place (rich on a terminal)."""
        return self._rich is not None and bool(self._rich.is_terminal) and not self._label

    def status(self, text: str) -> AbstractContextManager[Any]:
        """A spinner while something runs (on a terminal with rich); nothing otherwise."""
        if not self.live:
            return nullcontext()
        return self._rich.status(text, spinner="dots")  # type: ignore[no-any-return]

    def write(self, text: str) -> None:
        """Plain text as it is, no newline added, shown at once."""
        self._stream.write(text)
        self._stream.flush()

    def live_region(self) -> LiveRegion:
        """A region redrawn in place until closed, then erased (needs ``live``)."""
        return LiveRegion(self._rich)

    def under(self, path: tuple[str, ...]) -> Console:
        """This console for the lines of the run inside the agent tools ``path`` (outermost
        first): each indented a step a tool and named after them, nothing redrawn in place
        (the runs of two calls may write at once)."""
        inner = copy.copy(self)
        inner._label, inner._depth = " › ".join(path), len(path)
        return inner


def _under(text: str, label: str, depth: int) -> str:
    """``text`` (a line of the run display: ``"  → price(...)"``) as a line of the run inside
    the agent tools ``label`` names, ``depth`` deep: ``"    clerk: → price(...)"``."""
    body = text.lstrip(" ")
    more = max(len(text) - len(body) - 2, 0)  # its own indent beyond a call's line
    return "  " * (depth + 1) + " " * more + f"{label}: {body}"


class LiveRegion:
    """Lines redrawn in place on a rich terminal while the model writes them."""

    def __init__(self, rich_console: Any) -> None:
        from rich.live import Live

        self._live = Live(console=rich_console, transient=True, refresh_per_second=12)
        self._live.start()

    def show(self, lines: list[tuple[str, str]]) -> None:
        """Replace the region's content with ``(text, style)`` lines."""
        from rich.text import Text

        text = Text()
        for index, (line, style) in enumerate(lines):
            text.append(("\n" if index else "") + line, style=style)
        self._live.update(text)

    def close(self) -> None:
        """Stop redrawing and clear the region."""
        self._live.stop()


def call_text(call: ToolCall) -> str:
    """``name(a=1, b="x")``, or the model's raw text when it was not a JSON object (whole:
    a person approving a call reads all of it)."""
    if call.raw_arguments is not None:
        return f"{call.name}({call.raw_arguments})"
    arguments = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in call.arguments.items()
    )
    return f"{call.name}({arguments})"


def _short_call(call: ToolCall) -> str:
    """``call_text`` as long as a shown result at most, for the run display (a model may send
    megabytes of arguments)."""
    return _short(call_text(call))


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _RESULT_CHARS else flat[: _RESULT_CHARS - 3] + "..."


class _Writing:
    """One turn while the model writes it: a live region, or plain text piece by piece."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._text: list[str] = []
        self._calls: dict[int, tuple[str, list[str]]] = {}
        self._region = console.live_region() if console.live else None
        self._open: tuple[str, int] | None = None
        """Plain text: what the line being written shows (the text, or call ``index``)."""

    def add(self, event: TextDelta | ToolCallDelta) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
            where, head, piece = ("text", 0), "  … ", event.text
        else:
            name, pieces = self._calls.setdefault(event.index, (event.name, []))
            pieces.append(event.arguments_delta)
            where, head = ("call", event.index), f"  … {name or event.name} "
            piece = event.arguments_delta
        if self._region is not None:
            self._region.show(self._lines())
            return
        if self._open != where:
            self.console.write(("\n" if self._open else "") + head)
            self._open = where
        self.console.write(piece)

    def _lines(self) -> list[tuple[str, str]]:
        lines = [("  … " + "".join(self._text), "")] if self._text else []
        lines.extend(
            (f"  … {name} {''.join(pieces)}", "cyan") for name, pieces in self._calls.values()
        )
        return lines

    def close(self) -> None:
        if self._region is not None:
            self._region.close()
        elif self._open is not None:
            self.console.write("\n")


class RunDisplay:
    """Turns the events of ``Agent.stream()`` into lines as they come."""

    def __init__(
        self,
        console: Console,
        model_name: str,
        *,
        verbose: bool = False,
        hold_text: bool = False,
    ) -> None:
        """``verbose``: a tool's traceback under its call's line. ``hold_text``: show none
        of the model's text as it is written (the run judges its answer first)."""
        self.console = console
        self.model_name = model_name
        self.verbose = verbose
        self.hold_text = hold_text
        self._held_round = 0
        """The round whose text was last held back (said once per round)."""
        self.tally = Tally()
        self._started: set[str] = set()
        self._status: AbstractContextManager[Any] | None = None
        self._writing: _Writing | None = None
        self._inner: dict[tuple[str, ...], _InnerDisplay] = {}
        """The runs inside agent tools' calls, by the ids of the calls they run in."""

    def show(self, event: Event) -> None:
        """Show what the event adds: the model's writing, a spinner, calls that wait."""
        self.tally.show(event)
        if isinstance(event, NestedEvent):
            self._nested(event)
        elif isinstance(event, TextDelta) and self.hold_text:
            self._hold(event.round)
        elif isinstance(event, TextDelta | ToolCallDelta):
            if self._writing is None:
                self._spin(None)
                self._writing = _Writing(self.console)
            self._writing.add(event)
        elif isinstance(event, ModelRequest):
            self._spin(f"round {event.round}: {self.model_name} is thinking...")
        elif isinstance(event, ModelResponse):
            self._spin(None)
            output = event.output
            seconds = self.tally.last_turn_s
            self.model_answered(event.round, seconds, output.usage, len(output.tool_calls))
        elif isinstance(event, ToolCallStarted):
            if event.remembered is not None:
                self.remembered(event.call, event.remembered)
            self.call_started(event.call)
        elif isinstance(event, ToolCallFinished):
            trace = event.trace
            outcome = trace.result
            raised = raised_by_tool(trace)
            self.call_finished(trace.call, outcome.ok, outcome.output, trace.duration_s, raised)
        elif isinstance(event, GuardrailChecked):
            self.guardrail(event.decision)
        elif isinstance(event, UntrustedContent):
            self.untrusted(event.source.describe())
        elif isinstance(event, HandedOff):
            self.handed_off(event.source, event.target)
        elif isinstance(event, RunRecovered):
            self.recovered(event)
        elif isinstance(event, MessageJoined):
            self.joined(event)
        elif isinstance(event, FinalAnswer):
            self._spin(None)
            for pending in event.result.pending:
                self.call_waits(pending.call, pending.kind)

    def close(self) -> None:
        """Stop the spinner and the live region, if any."""
        self._spin(None)

    def _nested(self, event: NestedEvent) -> None:
        """An event of the run inside an agent tool's call (called by the model or by a
        program): shown by that run's display, in lines indented under the call."""
        inner = self._inner.get(event.call_ids)
        if inner is None:
            console = self.console.under(event.path)
            inner = _InnerDisplay(console, event.path[-1], verbose=self.verbose)
            self._inner[event.call_ids] = inner
        inner.show(event.event)

    def _hold(self, round_: int) -> None:
        """The model writes text the output guardrails will judge: say so, once a round."""
        if self._held_round == round_:
            return
        self._held_round = round_
        said = "its text shows once the output guardrails passed it"
        if self.console.live:
            self._spin(f"round {round_}: {self.model_name} is writing ({said})")
        else:
            self._spin(None)  # end a line of call arguments being written
            self.console.line(f"  … {self.model_name} is writing ({said})", "dim")

    def _spin(self, text: str | None) -> None:
        if self._writing is not None:
            self._writing.close()
            self._writing = None
        if self._status is not None:
            self._status.__exit__(None, None, None)
            self._status = None
        if text is not None:
            self._status = self.console.status(text)
            self._status.__enter__()

    def model_answered(self, round_: int, seconds: float, usage: Usage | None, calls: int) -> None:
        """The line of a finished round: what the turn asked for, its time and tokens."""
        tokens = f", {usage.input_tokens} in / {usage.output_tokens} out tokens" if usage else ""
        what = count(calls, "tool call") if calls else "answer"
        self.console.line(f"round {round_}: {what} ({seconds:.2f} s{tokens})", "dim")

    def remembered(self, call: ToolCall, approval: RememberedApproval) -> None:
        """The line of a call not asked about: it runs under an approval a person gave an
        earlier call of its tool for the run or the session."""
        by = f" by {approval.by}" if approval.by else ""
        line = f"  ✓ approved (remembered for the {approval.scope}){by}: {call_text(call)}"
        self.console.line(line, "yellow")

    def call_started(self, call: ToolCall) -> None:
        """The line of a call about to run."""
        self._started.add(call.id)
        self.console.line(f"  → {_short_call(call)}", "cyan")

    def call_finished(
        self,
        call: ToolCall,
        ok: bool,
        output: str,
        duration_s: float,
        raised: BaseException | None = None,
    ) -> None:
        """The call's result; for a tool that raised, the exception (the person at the
        terminal is the host), what the model read, and with ``verbose`` the traceback."""
        if call.id not in self._started:  # refused before it ran
            self.console.line(f"  → {_short_call(call)}", "cyan")
        timing = f"  ({duration_text(duration_s)})"
        search = searched(call.name, call.arguments, output) if ok else None
        if search is not None and raised is None:
            self.console.line(f"  ⌕ {search_line(search, output)}{timing}", "green")
            return
        if raised is None:
            mark, style = ("←", "green") if ok else ("✗", "red")
            self.console.line(f"  {mark} {_short(output)}{timing}", style)
            return
        shown = exception_line(raised)
        self.console.line(f"  ✗ {_short(shown)}{timing}", "red")
        if (str(raised) or shown) not in output:  # the model read other words
            self.console.line(f"    the model read: {_short(output)}", "dim")
        if self.verbose and raised.__traceback__ is not None:
            for line in traceback_lines(raised):
                self.console.line(f"    {line}", "dim")

    def guardrail(self, decision: GuardrailDecision | LoggedGuardrail) -> None:
        """A guardrail's decision: a dim line when it passed, else what it decided and why."""
        what = f"{decision.stage} guardrail {decision.name}"
        if decision.verdict == "passed":
            self.console.line(f"  ✓ {what} passed", "dim")
            return
        style = "red" if decision.verdict == "tripped" else "yellow"
        self.console.line(f"  ⛔ {what} {decision.verdict}: {_short(decision.message)}", style)

    def untrusted(self, source: str) -> None:
        """Untrusted content entered the conversation, from ``source`` (a call)."""
        self.console.line(f"  ⚠ untrusted content entered the conversation: {source}", "yellow")

    def handed_off(self, source: str, target: str) -> None:
        """The agent ``source`` handed the conversation to ``target``, which goes on."""
        self.console.line(f"  ⇢ {source} handed to {target}", "magenta")

    def joined(self, event: MessageJoined) -> None:
        """Messages sent to the run while it worked joined its conversation (or, ``sent``
        false, were kept at its end unanswered: it ended first)."""
        how = "joined before the next request" if event.sent else "kept, not sent: the run ended"
        for message in event.messages:
            self.console.line(f"  ✉ message {how}: {_short(message.content)}", "cyan")

    def recovered(self, event: RunRecovered) -> None:
        """A run the session held unfinished (or finished already), met again."""
        for line in recovered_lines(event):
            self.console.line(line, "yellow")

    def call_waits(self, call: ToolCall, kind: str) -> None:
        """A call the run paused for: a person's approval, or the application's result."""
        waits = "approval" if kind == "approval" else "the application's result"
        self.console.line(f"  ⏸ {_short_call(call)} waits for {waits}", "yellow")

    def summary(self, result: RunResult[Any], seconds: float) -> None:
        """The answer and the totals line of a run that ended. A run a limit left without
        an answer (``--on-limit final-answer``) shows none, not an empty one: the command's
        error line says why, as at any stop."""
        if unanswered(result) is None:
            self.console.line(f"answer: {result.answer}", "bold")
        self.totals(seconds, result.usage, len(result.tool_trace), stop_text("", result))

    def totals(self, seconds: float, usage: Usage, calls: int, stop: str) -> None:
        """The totals line: time, model turns, calls, tokens, why the run ended."""
        line = totals_line(seconds, self.tally.model_s, usage, calls, stop, self.tally.unmetered)
        self.console.line(line, "dim")


class _InnerDisplay(RunDisplay):
    """The run inside an agent tool's call, as lines under the call: each turn whole when
    answered, with the words it says beside its calls; its answer is the call's result, shown
    by the outer run (after the agent's output guardrails passed it); a pause inside it, with
    the outer run's."""

    def show(self, event: Event) -> None:
        if isinstance(event, TextDelta | ToolCallDelta | FinalAnswer):
            return
        super().show(event)
        if isinstance(event, ModelResponse) and event.output.tool_calls:
            said = event.output.content.strip()
            if said:
                self.console.line(f"  {_short(said)}")


def search_line(search: Searched, output: str) -> str:
    """A search as a person reads it: ``searched "refund": revealed refund_order, ...``, or
    what the model read when it revealed nothing (no match, an empty query...)."""
    query = json.dumps(search.query, ensure_ascii=False)
    if not search.revealed:
        return f"searched {_short(query)}: {_short(output)}"
    return _short(f"searched {query}: revealed {', '.join(search.revealed)}")


def recovered_lines(event: RunRecovered) -> list[str]:
    """What became of a run the session held unfinished (or finished already), and each of
    its calls that had not reported, as the model now reads it."""
    rounds = count(event.rounds, "model round")
    if event.how == "continued":
        text = f"↻ run {event.run_id} goes on from its journal ({rounds} kept, not asked again)"
    elif event.how == "closed":
        text = (
            f"↻ the session's last run ({event.run_id}) stopped before it finished: kept as "
            f"it stood ({rounds})"
        )
    else:
        text = f"↻ run {event.run_id} had finished already: its stored answer (nothing run)"
    lines = [text]
    for trace in event.settled:
        mark = "←" if trace.result.ok else "✗"
        lines.append(f"    {mark} {_short_call(trace.call)}: {_short(trace.result.output)}")
    return lines


def raised_by_tool(trace: ToolTrace) -> BaseException | None:
    """The exception a tool's own code raised (not a ModelRetry, which speaks to the model)."""
    error = trace.error
    if trace.result.error_code != ErrorCode.TOOL_ERROR or isinstance(error, ModelRetry):
        return None
    return error


def traceback_lines(error: BaseException) -> list[str]:
    """The traceback from the first frame of the person's own code (tooldeck's left out)."""
    frames = error.__traceback__
    while frames is not None and not is_own_code(frames.tb_frame.f_code.co_filename):
        frames = frames.tb_next
    shown = traceback.format_exception(type(error), error, frames or error.__traceback__)
    return "".join(shown).rstrip().splitlines()


def exception_line(error: BaseException) -> str:
    """``KeyError: 'Oslo'`` (the type as it was, for an exception read back from JSON)."""
    name = error.type_name if isinstance(error, RecordedError) else type(error).__name__
    message = str(error)
    return f"{name}: {message}" if message else name


def show_specs(console: Console, view: ToolView) -> None:
    """The tool specs the model would see, one block each, marked when a call waits; the
    deferred ones last, marked (the model sees them once ``search_tools`` finds them)."""
    for entry in view.entries:
        spec = entry.spec
        console.line(spec.name + _marks(entry), "bold cyan")
        if spec.description:
            console.line(f"  {spec.description}")
        schema = json.dumps(spec.parameters, indent=2, ensure_ascii=False)
        for line in schema.splitlines():
            console.line(f"  {line}", "dim")
        console.line("")


def _marks(entry: ToolEntry) -> str:
    if entry.options.defer_loading:
        return "  [deferred: shown once search_tools finds it]" + _marks(deferred(entry, False))
    if entry.external:
        return "  [external: the application runs its calls]"
    rule = entry.options.requires_approval
    if rule is True:
        return "  [asks for approval]"
    return "  [asks for approval of some calls]" if rule else ""
