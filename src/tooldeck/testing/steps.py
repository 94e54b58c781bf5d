"""What the simulator answers one request with: a step.

A step is a small frozen record, built by ``reply``, ``call`` and ``fail``:

- ``reply(text)``: the model answers with text (the run ends there).
- ``call(name, arguments)``: the model calls one tool; ``call((name, args), (name, args))``
  calls several in one response (parallel calls). Every response gets fresh call ids.
- ``fail.status(429, retry_after=1)``, ``fail.status(500)``: an HTTP error in the API's own
  error format.
- ``fail.hang()``: no answer at all, until the client gives up (or the simulator stops).
- ``fail.cut_stream(after_chunks=2)``: the answer starts, then the connection is closed.
- ``fail.slow_first_byte(2.0)``: the answer, after a wait before its first byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, overload

if TYPE_CHECKING:
    from tooldeck.testing.request import SimRequest


@dataclass(frozen=True, slots=True)
class ToolCallStep:
    """One tool call the model makes: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str
    """The arguments exactly as the model writes them (JSON text; may be malformed on purpose)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """The model answers with text, and calls no tool."""

    text: str


@dataclass(frozen=True, slots=True)
class Calls:
    """The model calls tools: one call, or several in one response (parallel calls)."""

    calls: tuple[ToolCallStep, ...]
    text: str = ""
    """Text the model writes beside its calls (most models write none)."""


Answer: TypeAlias = Reply | Calls
"""A step that answers: text, or tool calls."""


@dataclass(frozen=True, slots=True)
class Status:
    """An HTTP error status in the API's error format, e.g. 429 with ``retry-after``."""

    status: int
    retry_after: float | None = None
    """Seconds sent as the ``retry-after`` header (a 429's usual companion); None: no header."""
    message: str = ""
    """The error's message; by default one that names the status."""


@dataclass(frozen=True, slots=True)
class Hang:
    """No answer: the request is held until the client gives up or the simulator stops."""


@dataclass(frozen=True, slots=True)
class CutStream:
    """The answer starts, then the connection is closed without its end.

    A streaming request gets ``after_chunks`` events of ``answer``; a request that does not
    stream gets the status line, the headers and half of the body.
    """

    after_chunks: int
    answer: Answer


@dataclass(frozen=True, slots=True)
class SlowFirstByte:
    """``answer``, after ``seconds`` before its first byte (the status line)."""

    seconds: float
    answer: Answer


Failure: TypeAlias = Status | Hang | CutStream | SlowFirstByte
Step: TypeAlias = Answer | Failure
"""One response of the simulator."""

StepFunction: TypeAlias = Callable[["SimRequest"], Step]
"""A step computed from the request it answers (e.g. a reply that quotes a tool's result)."""

StepLike: TypeAlias = Step | StepFunction
"""A step, or a function of the request returning one."""

STEP_TYPES = (Reply, Calls, Status, Hang, CutStream, SlowFirstByte)


def reply(text: str) -> Reply:
    """The model answers ``text`` and calls no tool.

    Examples:
        >>> reply("Refunded.")
        Reply(text='Refunded.')
    """
    if not isinstance(text, str):
        raise TypeError(f"reply() takes the answer's text (a str), got {text!r}")
    return Reply(text)


CallArguments: TypeAlias = Mapping[str, Any] | str


@overload
def call(name: str, arguments: CallArguments = ..., /, *, text: str = "") -> Calls: ...


@overload
def call(*pairs: tuple[str, CallArguments], text: str = "") -> Calls: ...


def call(*args: str | CallArguments | tuple[str, CallArguments], text: str = "") -> Calls:
    """The model calls tools: ``call("lookup", {"id": 1})`` one call;
    ``call(("lookup", {"id": 1}), ("lookup", {"id": 2}))`` two in one response.

    Arguments are a dict (sent as JSON) or JSON text sent as it is (malformed on purpose, to
    test how a run takes it). ``text`` is what the model writes beside its calls.

    Examples:
        >>> call("refund_order", {"order_id": "A1"}).calls
        (ToolCallStep(name='refund_order', arguments='{"order_id": "A1"}'),)
        >>> [c.name for c in call(("lookup", {"id": 1}), ("lookup", {"id": 2})).calls]
        ['lookup', 'lookup']
    """
    pairs: list[object]
    if args and isinstance(args[0], str):
        if len(args) > 2:
            raise TypeError(
                "call(name, arguments) makes one call; for several give (name, arguments) "
                f"pairs: call(('lookup', {{'id': 1}}), ('lookup', {{'id': 2}})), got {args!r}"
            )
        pairs = [(args[0], args[1] if len(args) == 2 else {})]
    else:
        pairs = list(args)
    if not pairs:
        raise TypeError("call() needs a call: call(name, arguments)")
    if not isinstance(text, str):
        raise TypeError(f"call(text=...) takes a str, got {text!r}")
    return Calls(tuple(_one_call(pair) for pair in pairs), text)


def _one_call(pair: object) -> ToolCallStep:
    if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
        raise TypeError(f"a call is (name, arguments), e.g. ('lookup', {{'id': 1}}), got {pair!r}")
    name, arguments = pair
    if not name:
        raise ValueError("a call needs a tool name, got ''")
    if isinstance(arguments, str):
        return ToolCallStep(name, arguments)
    if not isinstance(arguments, Mapping):
        raise TypeError(f"the arguments of {name!r} are a dict or JSON text, got {arguments!r}")
    return ToolCallStep(name, json.dumps(dict(arguments)))


class Failures:
    """The failures a hosted provider shows, on demand (use the instance ``fail``)."""

    @staticmethod
    def status(status: int, *, retry_after: float | None = None, message: str = "") -> Status:
        """An HTTP error: 429 (with ``retry_after`` seconds, sent as ``retry-after``), 500,
        503, 400, 401, ...

        Examples:
            >>> fail.status(429, retry_after=1)
            Status(status=429, retry_after=1, message='')
        """
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise ValueError(f"fail.status() takes an HTTP error status (400-599), got {status!r}")
        if retry_after is not None and retry_after < 0:
            raise ValueError(f"retry_after is seconds >= 0, got {retry_after!r}")
        return Status(status, retry_after, message)

    @staticmethod
    def hang() -> Hang:
        """No answer until the client gives up (its timeout) or the simulator stops."""
        return Hang()

    @staticmethod
    def cut_stream(after_chunks: int = 1, *, answer: Answer | None = None) -> CutStream:
        """The connection closed after ``after_chunks`` events of ``answer`` (default: a text
        reply long enough to be cut)."""
        if isinstance(after_chunks, bool) or not isinstance(after_chunks, int) or after_chunks < 0:
            raise ValueError(f"after_chunks is a count >= 0, got {after_chunks!r}")
        return CutStream(after_chunks, _answer("cut_stream", answer, CUT_TEXT))

    @staticmethod
    def slow_first_byte(seconds: float, *, answer: Answer | None = None) -> SlowFirstByte:
        """``answer`` (default ``reply("OK")``) after ``seconds`` before the first byte."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ValueError(f"slow_first_byte() takes seconds >= 0, got {seconds!r}")
        return SlowFirstByte(float(seconds), _answer("slow_first_byte", answer, "OK"))


CUT_TEXT = "This answer is long enough to be streamed in several chunks, and it is cut short."
"""The text a ``cut_stream`` step starts to send when it is given no answer."""

fail = Failures()
"""The failures: ``fail.status(429, retry_after=1)``, ``fail.status(500)``, ``fail.hang()``,
``fail.cut_stream(after_chunks=2)``, ``fail.slow_first_byte(2.0)``."""


def _answer(where: str, answer: Answer | None, default: str) -> Answer:
    if answer is None:
        return Reply(default)
    if not isinstance(answer, Reply | Calls):
        raise TypeError(f"{where}(answer=...) takes reply(...) or call(...), got {answer!r}")
    return answer
