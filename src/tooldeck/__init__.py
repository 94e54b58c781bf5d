"""tooldeck: build LLM agents that call Python functions as tools.

The application owns the loop: the model only chooses a tool and its arguments; tooldeck
validates the call, runs the function, feeds the result back and repeats until the model
answers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tooldeck.checkpoint import Approve, Reject
    from tooldeck.contracts import (
        AssistantOutput,
        Checkpoint,
        Message,
        PendingCall,
        RunResult,
        StopReason,
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
        ModelAuthError,
        ModelBadRequest,
        ModelError,
        ModelNotConfigured,
        ModelOutputTruncated,
        ModelRateLimited,
        ModelRefused,
        ModelRequestFailed,
        ModelUnavailable,
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
        TextDelta,
        ToolCallDelta,
        ToolCallFinished,
        ToolCallStarted,
    )
    from tooldeck.loop import Agent, run_agent
    from tooldeck.models.base import Model, ModelSettings
    from tooldeck.models.resolve import resolve_model
    from tooldeck.models.scripted import ModelRequestRecord, ScriptedModel
    from tooldeck.observe import instrument
    from tooldeck.policy import Limits
    from tooldeck.tools.context import RunContext
    from tooldeck.tools.function import FunctionTool, external_tool, tool
    from tooldeck.tools.options import ToolOptions
    from tooldeck.tools.registry import ToolEntry, ToolHandler, ToolRegistry, Toolset, ToolView

__version__ = "0.1.0"

# Names resolve on first use, so `import tooldeck` stays cheap (no pydantic, no asyncio)
# until an agent or a tool is actually built.
_EXPORTS: dict[str, str] = {
    "Agent": "tooldeck.loop",
    "Approve": "tooldeck.checkpoint",
    "Checkpoint": "tooldeck.contracts",
    "PendingCall": "tooldeck.contracts",
    "Reject": "tooldeck.checkpoint",
    "StopReason": "tooldeck.contracts",
    "ToolOptions": "tooldeck.tools.options",
    "Toolset": "tooldeck.tools.registry",
    "external_tool": "tooldeck.tools.function",
    "ArgumentProblem": "tooldeck.errors",
    "AssistantOutput": "tooldeck.contracts",
    "DuplicateToolError": "tooldeck.errors",
    "ErrorCode": "tooldeck.errors",
    "Event": "tooldeck.events",
    "FinalAnswer": "tooldeck.events",
    "FunctionTool": "tooldeck.tools.function",
    "InvalidArguments": "tooldeck.errors",
    "LimitExceeded": "tooldeck.errors",
    "Limits": "tooldeck.policy",
    "Message": "tooldeck.contracts",
    "Model": "tooldeck.models.base",
    "ModelError": "tooldeck.errors",
    "ModelUnavailable": "tooldeck.errors",
    "ModelRequestFailed": "tooldeck.errors",
    "ModelRefused": "tooldeck.errors",
    "ModelRateLimited": "tooldeck.errors",
    "ModelOutputTruncated": "tooldeck.errors",
    "ModelBadRequest": "tooldeck.errors",
    "ModelAuthError": "tooldeck.errors",
    "ModelNotConfigured": "tooldeck.errors",
    "ModelRequest": "tooldeck.events",
    "ModelRequestRecord": "tooldeck.models.scripted",
    "ModelResponse": "tooldeck.events",
    "ModelSettings": "tooldeck.models.base",
    "RunContext": "tooldeck.tools.context",
    "RunResult": "tooldeck.contracts",
    "RunStopped": "tooldeck.errors",
    "ScriptExhausted": "tooldeck.errors",
    "ScriptedModel": "tooldeck.models.scripted",
    "TextDelta": "tooldeck.events",
    "ToolCall": "tooldeck.contracts",
    "ToolCallDelta": "tooldeck.events",
    "ToolCallFinished": "tooldeck.events",
    "ToolCallStarted": "tooldeck.events",
    "ToolDeckError": "tooldeck.errors",
    "ToolDefinitionError": "tooldeck.errors",
    "ToolEntry": "tooldeck.tools.registry",
    "ToolExecutionError": "tooldeck.errors",
    "ToolHandler": "tooldeck.tools.registry",
    "ToolRegistry": "tooldeck.tools.registry",
    "ToolResult": "tooldeck.contracts",
    "ToolSpec": "tooldeck.contracts",
    "ToolTrace": "tooldeck.contracts",
    "ToolView": "tooldeck.tools.registry",
    "Usage": "tooldeck.contracts",
    "instrument": "tooldeck.observe",
    "resolve_model": "tooldeck.models.resolve",
    "run_agent": "tooldeck.loop",
    "tool": "tooldeck.tools.function",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tooldeck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "Agent",
    "Approve",
    "ArgumentProblem",
    "AssistantOutput",
    "Checkpoint",
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
    "ModelAuthError",
    "ModelBadRequest",
    "ModelError",
    "ModelNotConfigured",
    "ModelOutputTruncated",
    "ModelRateLimited",
    "ModelRefused",
    "ModelRequest",
    "ModelRequestFailed",
    "ModelRequestRecord",
    "ModelResponse",
    "ModelSettings",
    "ModelUnavailable",
    "PendingCall",
    "Reject",
    "RunContext",
    "RunResult",
    "RunStopped",
    "ScriptExhausted",
    "ScriptedModel",
    "StopReason",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolDeckError",
    "ToolDefinitionError",
    "ToolEntry",
    "ToolExecutionError",
    "ToolHandler",
    "ToolOptions",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "ToolTrace",
    "ToolView",
    "Toolset",
    "Usage",
    "external_tool",
    "instrument",
    "resolve_model",
    "run_agent",
    "tool",
]
