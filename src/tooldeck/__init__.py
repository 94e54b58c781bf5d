"""tooldeck: build LLM agents that call Python functions as tools.

The application owns the loop: the model only chooses a tool and its arguments; tooldeck
validates the call, runs the function, feeds the result back and repeats until the model
answers.
"""

from tooldeck._state import Limits
from tooldeck.contracts import (
    AssistantOutput,
    Message,
    RunResult,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolTrace,
    Usage,
)
from tooldeck.errors import (
    ArgumentProblem,
    DuplicateToolError,
    ErrorCode,
    InvalidArguments,
    LimitExceeded,
    ModelError,
    ModelNotConfigured,
    RunStopped,
    ScriptExhausted,
    ToolDeckError,
    ToolDefinitionError,
    ToolExecutionError,
)
from tooldeck.events import (
    Event,
    FinalAnswer,
    ModelRequest,
    ModelResponse,
    ToolCallFinished,
    ToolCallStarted,
)
from tooldeck.loop import Agent, run_agent
from tooldeck.models.base import Model, ModelSettings
from tooldeck.models.resolve import resolve_model
from tooldeck.models.scripted import ModelRequestRecord, ScriptedModel
from tooldeck.tools.context import RunContext
from tooldeck.tools.function import FunctionTool, tool
from tooldeck.tools.registry import ToolEntry, ToolHandler, ToolRegistry, ToolView

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "ArgumentProblem",
    "AssistantOutput",
    "DuplicateToolError",
    "ErrorCode",
    "Event",
    "FinalAnswer",
    "FunctionTool",
    "InvalidArguments",
    "LimitExceeded",
    "Limits",
    "Message",
    "Model",
    "ModelError",
    "ModelNotConfigured",
    "ModelRequest",
    "ModelRequestRecord",
    "ModelResponse",
    "ModelSettings",
    "RunContext",
    "RunResult",
    "RunStopped",
    "ScriptExhausted",
    "ScriptedModel",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolDeckError",
    "ToolDefinitionError",
    "ToolEntry",
    "ToolExecutionError",
    "ToolHandler",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "ToolTrace",
    "ToolView",
    "Usage",
    "resolve_model",
    "run_agent",
    "tool",
]
