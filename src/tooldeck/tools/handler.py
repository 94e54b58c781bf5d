"""The one tool contract: validated arguments in; a result, or a pause, out.

Every kind of tool reduces to a ``ToolHandler``: a function tool, an MCP server's tool, an
agent used as a tool, a handler written by hand. The loop checks a call, asks the handler to
``validate`` its arguments, and awaits ``run``; what ``run`` returns is all it needs:

- text or a ``ToolResult``: what the model reads;
- a ``ToolOutcome``: the result, with what the host should see beside it (the exception
  behind a failure, the trace of a run made inside the call);
- a ``Pause``: the call waits for a decision (a call inside it needs a person's approval);
  the run pauses with it, and a resume hands the call ``RunContext.resumed`` to go on from.

The loop never asks what kind of handler it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tooldeck.messages import ToolResult
from tooldeck.results import Checkpoint, ToolTrace
from tooldeck.tools.context import RunContext


@dataclass(frozen=True, slots=True)
class Pause:
    """This call waits for decisions on calls made inside it.

    ``state`` is the paused run inside the call (an agent tool's inner run). The outer run
    pauses too; its ``Checkpoint.pending`` shows the inner pending calls in this call's place
    (ids ``"<this call's id>/<inner id>"``), and resuming the outer run with decisions for
    them runs this call's handler again with ``RunContext.resumed`` set.
    """

    state: Checkpoint


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A handler's result, with what the host should see beside it."""

    result: ToolResult
    """What the model reads."""
    error: BaseException | None = None
    """The exception behind a failed result, kept for the host (``ToolTrace.error``)."""
    inner_trace: tuple[ToolTrace, ...] | None = None
    """The calls of a run made inside this call (``ToolTrace.inner_trace``)."""
    untrusted: bool = False
    """The run made inside this call read untrusted content (``ToolTrace.untrusted``)."""


HandlerOutput = str | ToolResult | ToolOutcome | Pause
"""What ``ToolHandler.run`` may return."""


class ToolHandler(Protocol):
    """The one contract every kind of tool reduces to."""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Return the arguments to run with, or raise InvalidArguments."""
        ...

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> HandlerOutput:
        """Run the call. An exception becomes a ``tool_error`` observation (the host keeps
        the exception)."""
        ...
