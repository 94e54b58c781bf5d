"""What ``Agent.stream()`` yields, in order, as a run happens."""

from __future__ import annotations

from dataclasses import dataclass

from tooldeck.contracts import AssistantOutput, RunResult, ToolCall, ToolTrace
from tooldeck.models.base import ModelSettings


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """The model is about to be asked for turn ``round``."""

    round: int
    message_count: int
    settings: ModelSettings


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The model answered turn ``round``; ``output`` may hold tool calls."""

    round: int
    output: AssistantOutput


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A call passed its checks and is about to run."""

    round: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A call ended (or was refused); ``trace.result`` is what the model will read."""

    round: int
    trace: ToolTrace


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """The run is over; ``result`` holds the answer, the conversation and the trace."""

    result: RunResult


Event = ModelRequest | ModelResponse | ToolCallStarted | ToolCallFinished | FinalAnswer
