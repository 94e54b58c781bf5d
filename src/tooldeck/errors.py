"""Exception types, and the stable error codes the model reads in failed tool results.

The bottom of the package: it imports nothing of tooldeck. A ``RunStopped``'s ``result`` is
the ``RunResult`` of the partial run (``tooldeck.results``), typed ``Any`` here so that this
module stays below every other.

An error class with a ``docs`` page says where the documentation explains it: raised, it
carries the note ``see the documentation: docs/<page>`` (shown under its traceback; its
message is unchanged).

The tree (a second base in brackets; ``tests/test_errors_tree.py`` holds it to the code)::

    ToolDeckError
        ToolDefinitionError (TypeError)
        DuplicateToolError (ValueError)
        RunStopped
            LimitExceeded
            ToolExecutionError
            GuardrailTripped
            ModelError
                ScriptExhausted
                ProviderError
                    ModelAuthError
                    ModelRateLimited
                    ModelBadRequest
                    ModelUnavailable
                ModelRefused
                ModelStreamMissing
                ModelOutputTruncated
            MiddlewareError
        ModelRetry
        CheckpointError (ValueError)
        SessionError
            SessionConflict
        RunLogError
        RunEnded (RuntimeError)
        ModelNotConfigured (ValueError)
        InvalidArguments (ValueError)

    ToolDefinitionWarning (UserWarning)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar


class ErrorCode(StrEnum):
    """Why a tool call failed; the model reads it as ``error[<code>]: ...``."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_JSON = "invalid_json"
    INVALID_ARGUMENTS = "invalid_arguments"
    TOOL_ERROR = "tool_error"
    TOOL_TIMEOUT = "tool_timeout"
    REPEATED_CALL = "repeated_call"
    CALL_LIMIT = "call_limit"
    """Not run: the run's ``max_tool_calls`` (or the tool's ``max_calls``) was reached, or
    the run stopped at a token or cost limit before running the turn's calls."""
    REJECTED = "rejected"
    """Not run: a person rejected the call (``Reject(message=...)`` on resume)."""
    INVALID_OUTPUT = "invalid_output"
    """The model's typed answer does not fit ``output_type`` (or an output validator said no)."""
    INTERRUPTED = "interrupted"
    """The call's result was lost: a stored conversation had no answer for it (a session's
    history is repaired with this observation before the model reads it again)."""
    CANCELLED = "cancelled"
    """The run was cancelled (``RunHandle.cancel()``) before the call finished."""
    OUTPUT_TOO_LARGE = "output_too_large"
    """The tool's output was longer than its ``max_output_chars`` (``large_output="error"``)."""
    REFUSED = "refused"
    """Not run: a tool guardrail refused the call (or policy refused it)."""
    CODE_SYNTAX = "code_syntax"
    """``run_code`` (code mode): the program does not parse; the message names the line."""
    CODE_TYPE = "code_type"
    """``run_code``: the program's types do not check (a tool called with the wrong
    arguments' types, an unknown name); the message names the line."""
    CODE_ERROR = "code_error"
    """``run_code``: the program raised while it ran (a nested call's error it did not catch
    included: the message names the tool and that call's own code)."""
    CODE_LIMIT = "code_limit"
    """``run_code``: the program hit a limit (duration, memory, nested calls, output size)
    and was stopped; the message names the limit."""
    CODE_CRASHED = "code_crashed"
    """``run_code``: the worker running the program died; the pool starts another."""
    REMOTE_ERROR = "remote_error"
    """A remote agent (A2A) failed the task, rejected it, or could not be reached."""


class ToolDeckError(Exception):
    """Base of every error tooldeck raises."""

    docs: ClassVar[str | None] = None
    """The page of the documentation that explains this error: a path under ``docs/``, with
    its anchor (``sessions.md#concurrent-runs``); None when there is none."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        if self.docs is not None:
            self.add_note(docs_note(self.docs))

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its message and attributes, not by calling __init__ again (whose
        # parameters differ per class), so tooldeck errors survive pickling: a durable run
        # records them, and another process reads them back.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def docs_note(page: str) -> str:
    """The note an error carries for its documentation page."""
    return f"see the documentation: docs/{page}"


def _rebuild(cls: type[ToolDeckError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class ToolDefinitionError(ToolDeckError, TypeError):
    """A tool cannot be built: a parameter type without a schema, a non-strict signature, ..."""

    docs = "tools.md"


class ToolDefinitionWarning(UserWarning):
    """A tool that works, but that the model will use poorly (it has no description)."""


class DuplicateToolError(ToolDeckError, ValueError):
    """Two tools with the same name were registered."""

    docs = "tools.md#the-registry"


class RunStopped(ToolDeckError):
    """A run ended without a final answer; ``result`` keeps everything it produced."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result
        """The partial run: messages, trace and usage up to the stop. Set by the loop."""


class LimitExceeded(RunStopped):
    """A limit (rounds, tool calls, duration, a tool's retries) ended the run."""

    def __init__(self, message: str, limit: str, result: Any = None) -> None:
        super().__init__(message, result)
        self.limit = limit
        """Which limit: ``max_rounds``, ``max_tool_calls``, ``max_duration_s``, ``retries``,
        ``max_tokens``, ``max_cost`` or ``budget`` (the run's StopReason)."""


class ToolExecutionError(RunStopped):
    """A tool with ``on_error="raise"`` raised; the original exception is ``__cause__``."""

    def __init__(self, message: str, tool_name: str, result: Any = None) -> None:
        super().__init__(message, result)
        self.tool_name = tool_name


class GuardrailTripped(RunStopped):
    """A guardrail stopped the run: an input or output guardrail tripped, or a tool guardrail
    said stop. ``result`` keeps the run up to the stop (``stop_reason == "guardrail"``)."""

    docs = "guardrails.md"

    def __init__(
        self, message: str, guardrail: str, stage: str, data: Any = None, result: Any = None
    ) -> None:
        super().__init__(message, result)
        self.guardrail = guardrail
        """The name of the guardrail that tripped."""
        self.stage = stage
        """Where it ran: ``input``, ``output``, ``arguments`` or ``result``."""
        self.data = data
        """What the guardrail returned beside its message (``GuardrailResult.data``)."""


class ModelError(RunStopped):
    """The model could not be asked or its answer could not be used (provider failure)."""


class ModelRetry(ToolDeckError):
    """Raise in a tool or an output validator to make the model try again; it reads the message.

    In a tool the model reads ``error[tool_error]: <message>`` (the message is shown even
    without ``include_error_details``); in an output validator ``error[invalid_output]: ...``.
    """


class MiddlewareError(RunStopped):
    """A middleware hook raised or returned something unusable; the cause is ``__cause__``."""

    docs = "composition.md#middleware"

    def __init__(self, message: str, middleware: str, hook: str, result: Any = None) -> None:
        super().__init__(message, result)
        self.middleware = middleware
        """The middleware's class name."""
        self.hook = hook
        """Which hook: ``before_request``, ``after_response``, ``before_tool_call``,
        ``after_tool_call``."""


class CheckpointError(ToolDeckError, ValueError):
    """A paused run cannot be resumed as asked: a broken, changed or unknown checkpoint, or
    decisions that do not fit its pending calls. Nothing has run when it is raised."""

    docs = "human-in-the-loop.md#binding"


class SessionError(ToolDeckError):
    """A session's database could not be read or written (locked, unreachable, a schema this
    tooldeck does not know). ``result`` keeps the run whose turn could not be stored."""

    docs = "sessions.md"

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result
        """The run whose turn was not stored, when a commit failed, or the run so far, when
        its journal could not be written (it stopped there); None otherwise."""


class SessionConflict(SessionError):
    """Another run or resume changed the session first, so this run's turn was not stored.

    Runs on one session never interleave: a run appends its turn only if the session is
    still where it was when the run started; the second writer gets this error (it does not
    wait), with its finished run in ``result``. Load the session again and run again.
    """

    docs = "sessions.md#concurrent-runs"


class RunLogError(ToolDeckError):
    """The run log cannot be opened, written or read back: its database is newer, broken,
    locked or not a run log, or a row holds what no run log writes (the message names the
    table, the run and the column). ``tooldeck.runlog.RunLogError`` is this class."""

    docs = "run-log.md"


class RunEnded(ToolDeckError, RuntimeError):
    """A message was sent (``RunHandle.send``) to a run that can no longer take one: it
    answered, paused, was cancelled or stopped. The message names the run and why."""

    docs = "run-control.md#sending-a-message-to-a-running-run"


class ModelNotConfigured(ToolDeckError, ValueError):
    """A model string or its settings cannot be resolved (unknown provider, missing key, file)."""

    docs = "models/index.md"


class ScriptExhausted(ModelError):
    """A ScriptedModel was asked for more outputs than its script holds."""


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """One reason a call's arguments were refused."""

    path: str
    """Where: ``left``, ``items[2].name``; empty for the arguments object itself."""
    message: str
    """What was expected, in words the model can act on."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidArguments(ToolDeckError, ValueError):
    """Arguments that do not fit a tool's schema; the model reads every problem."""

    def __init__(self, problems: list[ArgumentProblem]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = tuple(problems)


class ProviderError(ModelError):
    """The provider answered a request with an error or could not be reached.

    Raised after the provider SDK's own retries; ``status_code`` is the HTTP status, if any.
    """

    def __init__(self, message: str, status_code: int | None = None, result: Any = None) -> None:
        super().__init__(message, result)
        self.status_code = status_code


class ModelAuthError(ProviderError):
    """The provider refused the credentials (HTTP 401) or the access (HTTP 403)."""


class ModelRateLimited(ProviderError):
    """The provider kept answering HTTP 429 after the SDK's retries."""


class ModelBadRequest(ProviderError):
    """The provider rejected the request itself (HTTP 400, 404, 409, 422): fix the request."""


class ModelUnavailable(ProviderError):
    """The provider failed (HTTP 5xx), timed out or could not be reached, after retries."""


class ModelRefused(ModelError):
    """The model refused to answer, or the provider's content filter stopped the response."""

    def __init__(self, message: str, refusal: str = "", result: Any = None) -> None:
        super().__init__(message, result)
        self.refusal = refusal
        """The model's refusal text, when it wrote one."""


class ModelStreamMissing(ModelError):
    """A streaming request got no stream back: no chunks, or a whole body instead (a server
    that cannot stream this request). Ask for whole turns instead: no ``deltas``, a model
    made with ``stream=False`` (at the command line: ``--no-stream``)."""

    docs = "streaming.md#streaming"

    def __init__(self, message: str, server_message: str = "", result: Any = None) -> None:
        super().__init__(message, result)
        self.server_message = server_message
        """What the server said instead of streaming, when it said anything ('' if not)."""


class ModelOutputTruncated(ModelError):
    """The response stopped at the token limit (``max_tokens``) before it was complete."""

    def __init__(self, message: str, partial_text: str = "", result: Any = None) -> None:
        super().__init__(message, result)
        self.partial_text = partial_text
        """The text the model wrote before it was cut off."""
