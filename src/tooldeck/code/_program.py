"""``run_code``'s handler: one program in the sandbox, each of its tool calls made through the
run's own call path (``RunContext.caller``), and a program whose call waits for a person's
decision paused with the run — its snapshot's dump in the paused call's checkpoint (signed
with the rest) — and going on from it when the run resumes, in this process or another."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tooldeck.code._limits import CodeLimits, Mount
from tooldeck.code._signatures import value_of
from tooldeck.errors import CheckpointError, ErrorCode
from tooldeck.messages import Message, ToolCall, ToolResult, Usage
from tooldeck.models.base import Model
from tooldeck.results import Checkpoint, PausedTurn, PendingCall, RunCounters, ToolTrace
from tooldeck.run.agent_tool import NestingHandler
from tooldeck.tools.context import Resumption, RunContext, ToolCaller
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.handler import Pause, ToolHandler, ToolOutcome
from tooldeck.tools.registry import EntryWrapper, ToolEntry

if TYPE_CHECKING:
    from tooldeck.code._sandbox import Progress, Settled, Wait

RUN_CODE = "run_code"
"""The name of the tool ``CodeMode`` gives the model."""
_STATE = "run_code"
"""Where a paused program's state is kept in its call's checkpoint."""


class RunCode:
    """The handler of ``run_code``, bound to the tools its programs may call."""

    def __init__(
        self,
        schema: FunctionTool[..., Any],
        tools: Mapping[str, ToolEntry],
        limits: CodeLimits,
        mounts: tuple[Mount, ...],
        stubs: str | None = None,
        repl: str | None = None,
    ) -> None:
        self._schema, self.tools, self.limits, self.mounts = schema, tools, limits, mounts
        self.stubs = stubs
        """The tools' signatures a program is type-checked against (None: not checked)."""
        self.repl = repl
        """The capability state holding the run's REPL (None: each program starts afresh)."""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments checked against ``run_code``'s schema (one ``code`` text)."""
        return self._schema.validate(arguments)

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> ToolOutcome | Pause:
        """Run the program (or go on with a paused one) to its end, or until a call waits."""
        caller = context.caller
        if caller is None:
            text = "run_code runs only as a call of an agent's run (its calls go through it)"
            return ToolOutcome(ToolResult.failure(ErrorCode.TOOL_ERROR, text))
        program = _Program(self, context, caller, str(arguments.get("code", "")))
        if context.resumed is not None:
            return await program.resume(context.resumed)
        return await program.start(bool(arguments.get("restart")))

    def check_resume(self, state: Checkpoint) -> None:
        """Raise CheckpointError unless ``state`` is a paused program this tool can go on —
        and, when it waits on an agent tool's paused run, that run can go on too."""
        _kept(state)
        for pending in state.turn.pending:
            entry = self.tools.get(pending.call.name)
            if entry is None:
                raise CheckpointError(
                    f"the paused program waits on a call of {pending.call.name!r}, which "
                    "its run_code may no longer call"
                )
            if pending.nested is not None and isinstance(entry.handler, NestingHandler):
                entry.handler.check_resume(pending.nested)

    def wrapped(
        self, model: Callable[[Model], Model], tool: EntryWrapper, *, derived_run_ids: bool
    ) -> ToolHandler:
        """Itself: a program runs no model (its calls are the run's own)."""
        return self


def _kept(state: Checkpoint) -> dict[str, Any]:
    kept = (state.capability_states or {}).get(_STATE)
    if (
        not isinstance(kept, dict)
        or not isinstance(kept.get("snapshot"), str)
        or not isinstance(kept.get("answers"), dict)
        or len(state.turn.pending) != 1
    ):
        raise CheckpointError(
            "the paused run_code call's checkpoint holds no program to go on with: it was "
            "not made by code mode"
        )
    return kept


class _Program:
    """One program: its calls, their traces, and how it ends."""

    def __init__(
        self, handler: RunCode, context: RunContext[Any], caller: ToolCaller, code: str
    ) -> None:
        self.handler, self.context, self.caller, self.code = handler, context, caller, code
        self.traces: list[ToolTrace] = []
        self.untrusted = False
        self._decided: Settled | None = None
        self._sink: Any = None
        self._feed = ""
        """The name monty gives this program's source (``<python-input-N>``); '': not known."""

    async def start(self, restart: bool = False) -> ToolOutcome | Pause:
        from tooldeck.code import _sandbox as box  # pydantic_monty, only when code runs

        limits = self.handler.limits
        self._sink = box.print_sink(limits)
        progress = box.Progress()
        repl = self._repl()
        if repl is not None and restart:
            repl["session"], repl["feeds"] = None, 0
        self._feed = _feed_name(repl)
        try:
            async with box.checkout(await box.pool(), limits, self.handler.stubs) as session:
                if repl is not None and repl.get("session"):  # the names earlier programs left
                    await session.load_session(base64.b64decode(repl["session"]))
                snapshot = await session.feed_start(
                    self.code,
                    print_callback=self._sink,
                    mount=box.mounted(self.handler.mounts) or None,
                )
                return await self._run(session, snapshot, progress)
        except box.MontyError as error:
            return self._outcome(box.failed(error, progress.printed + self._sink.output, limits))

    async def resume(self, resumed: Resumption) -> ToolOutcome | Pause:
        from tooldeck.code import _sandbox as box

        kept = _kept(resumed.state)
        pending = resumed.state.turn.pending[0]
        self.traces = list(resumed.state.trace)
        self.untrusted = bool(kept.get("untrusted"))
        self._feed = str(kept.get("feed", ""))
        answers = {int(number): answer for number, answer in kept["answers"].items()}
        progress = box.Progress(str(kept.get("printed", "")), answers, int(kept.get("calls", 0)))
        limits = self.handler.limits
        self._sink = box.print_sink(limits)
        try:
            decided = await self.caller.decided(pending, resumed.decisions, self.handler.tools)
            if decided is None:  # no decision on it yet: the program waits on
                return Pause(resumed.state)
            if isinstance(decided, PendingCall):  # an agent tool's run paused again inside
                turn = resumed.state.turn.model_copy(update={"pending": (decided,)})
                return Pause(resumed.state.model_copy(update={"turn": turn}))
            self._decided = self._read(decided)
            async with box.checkout(await box.pool(), limits) as session:
                snapshot = await session.load_snapshot(
                    base64.b64decode(kept["snapshot"]),
                    mount=box.mounted(self.handler.mounts) or None,
                    print_callback=self._sink,
                )
                return await self._run(session, snapshot, progress)
        except box.MontyError as error:
            return self._outcome(box.failed(error, progress.printed + self._sink.output, limits))

    async def _run(self, session: Any, snapshot: Any, progress: Progress) -> ToolOutcome | Pause:
        """Drive the program to its end; a completed one's names kept for the run's next."""
        from tooldeck.code import _sandbox as box

        ended = await box.drive(snapshot, self._answer, progress)
        repl = self._repl()
        if repl is not None and isinstance(ended, box.Complete):
            repl["session"] = base64.b64encode(await session.dump()).decode()
            if self._feed:  # the session holds one program more
                repl["feeds"] = int(repl.get("feeds", 0)) + 1
        return self._ended(ended, progress)

    def _repl(self) -> dict[str, Any] | None:
        key, states = self.handler.repl, self.context.states
        if key is None or states is None:
            return None
        repl: dict[str, Any] | None = states.get(key)
        return repl

    async def _answer(
        self, name: str, arguments: dict[str, Any], made: int
    ) -> Settled | ToolResult | Wait:
        """One call of the program: through the run's call path, its answer as monty takes it."""
        if self._decided is not None:  # the call that waited, decided and run on resume
            decided, self._decided = self._decided, None
            return decided
        limits = self.handler.limits
        if made >= limits.max_calls:
            text = f"the program made more than {limits.max_calls} tool calls and was stopped"
            return ToolResult.failure(ErrorCode.CODE_LIMIT, text)
        tools = self.handler.tools
        if name not in tools:
            shown = ", ".join(tools) or "none"
            return _raised("NameError", f"name {name!r} is not defined (tools: {shown})")
        call = ToolCall(id=f"{self.context.call_id}.{made + 1}", name=name, arguments=arguments)
        return self._settled(await self.caller.call(call, tools))

    def _settled(self, outcome: ToolTrace | PendingCall) -> Settled | Wait:
        from tooldeck.code._sandbox import Wait

        if isinstance(outcome, PendingCall):
            return Wait(outcome)
        return self._read(outcome)

    def _read(self, outcome: ToolTrace) -> Settled:
        """A call's trace kept, and its result as the program reads it (typed, or raised)."""
        self.traces.append(outcome)
        result, name = outcome.result, outcome.call.name
        if not result.ok:
            return _raised("RuntimeError", f"{name} failed: {result.output}")
        entry = self.handler.tools[name]
        if entry.options.trust == "untrusted" or outcome.untrusted:
            self.untrusted = True
        try:
            return {"return_value": value_of(entry, result.output)}
        except TypeError as error:
            return _raised("TypeError", str(error))

    def _ended(self, ended: Any, progress: Progress) -> ToolOutcome | Pause:
        from tooldeck.code import _sandbox as box

        printed = progress.printed + self._sink.output
        if isinstance(ended, ToolResult):
            return self._outcome(ended)
        if isinstance(ended, box.Wait):
            progress.printed = printed
            return self._paused(ended, progress)
        return self._outcome(box.finished(ended.output, printed, self.handler.limits))

    def _outcome(self, result: ToolResult) -> ToolOutcome:
        return ToolOutcome(result, None, tuple(self.traces), self.untrusted)

    def _paused(self, waiting: Wait, progress: Progress) -> Pause:
        """The run pauses: the waiting call, and the program's dump to go on from."""
        pending: PendingCall = waiting.record
        where = _line_of(self.code, waiting, pending.call.name, self._feed)
        pending = pending.model_copy(update={"where": where})
        kept = {
            "snapshot": waiting.dump,
            "printed": progress.printed,
            "answers": {str(number): answer for number, answer in progress.answers.items()},
            "calls": progress.calls,
            "untrusted": self.untrusted,
            "feed": self._feed,
        }
        checkpoint = Checkpoint(
            run_id=self.context.run_id,
            messages=(Message(role="assistant", tool_calls=(pending.call,)),),
            trace=tuple(self.traces),
            usage=Usage(),
            counters=RunCounters(),
            turn=PausedTurn(round=self.context.round, pending=(pending,)),
            capability_states={_STATE: kept},
        )
        return Pause(checkpoint)


def _feed_name(repl: dict[str, Any] | None) -> str:
    """The name monty gives the source of the program about to be fed: ``<python-input-N>``,
    N the programs its session holds already (none without a REPL); '' for a REPL kept
    before they were counted."""
    if repl is None:
        return "<python-input-0>"
    if repl.get("session") and "feeds" not in repl:
        return ""
    return f"<python-input-{int(repl.get('feeds') or 0)}>"


def _line_of(code: str, waiting: Wait, tool: str, feed: str) -> str:
    """The program's line with the waiting call (``"line 3: await refund(order=3)"``), from
    where monty says the call is: named when that is this program's source (``feed``), a
    call in a function the program defines included; '' when it is
    in a function an earlier program of a REPL defined. When monty or the REPL cannot say
    which source (an older worker; a REPL kept before programs were counted), named only
    when the tool's own name stands at the call."""
    source, at = code.encode(), waiting.at
    if not 0 <= at < len(source):
        return ""
    if waiting.source and feed:
        if waiting.source != feed:
            return ""
    elif not source.startswith(tool.encode(), at):
        return ""
    number = source.count(b"\n", 0, at) + 1
    return f"line {number}: {code.splitlines()[number - 1].strip()}"


def _raised(kind: str, message: str) -> Settled:
    """An exception the program reads at the call (it may catch it)."""
    return {"exc_type": kind, "message": message}
