"""tooldeck: build LLM agents that call Python functions as tools.

The application owns the loop: the model only chooses a tool and its arguments; tooldeck
validates the call, runs the function, feeds the result back and repeats until the model
answers.

The top level holds what most programs use, by theme (see ``_EXPORTS``); the rest lives in
its module: every exception in ``tooldeck.errors`` (the bases are also here), registry
internals in ``tooldeck.tools.registry``, providers in ``tooldeck.models.*``, sessions in
``tooldeck.sessions``, MCP in ``tooldeck.tools.mcp``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `as` re-exports each name for type checkers; at run time they resolve lazily
    from tooldeck.checkpoint import Approve as Approve
    from tooldeck.checkpoint import Reject as Reject
    from tooldeck.contracts import AssistantOutput as AssistantOutput
    from tooldeck.contracts import Checkpoint as Checkpoint
    from tooldeck.contracts import Message as Message
    from tooldeck.contracts import PendingCall as PendingCall
    from tooldeck.contracts import RunResult as RunResult
    from tooldeck.contracts import StopReason as StopReason
    from tooldeck.contracts import ToolCall as ToolCall
    from tooldeck.contracts import ToolResult as ToolResult
    from tooldeck.contracts import ToolSpec as ToolSpec
    from tooldeck.contracts import ToolTrace as ToolTrace
    from tooldeck.errors import ModelError as ModelError
    from tooldeck.errors import RunStopped as RunStopped
    from tooldeck.errors import ToolDeckError as ToolDeckError
    from tooldeck.errors import ToolDefinitionError as ToolDefinitionError
    from tooldeck.events import Event as Event
    from tooldeck.events import FinalAnswer as FinalAnswer
    from tooldeck.events import ModelRequest as ModelRequest
    from tooldeck.events import ModelResponse as ModelResponse
    from tooldeck.events import TextDelta as TextDelta
    from tooldeck.events import ToolCallDelta as ToolCallDelta
    from tooldeck.events import ToolCallFinished as ToolCallFinished
    from tooldeck.events import ToolCallStarted as ToolCallStarted
    from tooldeck.loop import Agent as Agent
    from tooldeck.loop import run_agent as run_agent
    from tooldeck.models.base import Model as Model
    from tooldeck.models.base import ModelSettings as ModelSettings
    from tooldeck.models.scripted import ScriptedModel as ScriptedModel
    from tooldeck.observe import instrument as instrument
    from tooldeck.policy import Limits as Limits
    from tooldeck.tools.context import RunContext as RunContext
    from tooldeck.tools.function import FunctionTool as FunctionTool
    from tooldeck.tools.function import external_tool as external_tool
    from tooldeck.tools.function import tool as tool
    from tooldeck.tools.registry import ToolRegistry as ToolRegistry
    from tooldeck.tools.registry import Toolset as Toolset

__version__ = "0.1.0"

# Names resolve on first use, so `import tooldeck` stays cheap (no pydantic, no asyncio)
# until an agent or a tool is actually built. Grouped by theme; __all__ is this table.
_EXPORTS: dict[str, str] = {
    # building and running agents
    "Agent": "tooldeck.loop",
    "run_agent": "tooldeck.loop",
    "Limits": "tooldeck.policy",
    "RunContext": "tooldeck.tools.context",
    "instrument": "tooldeck.observe",
    # tools
    "tool": "tooldeck.tools.function",
    "FunctionTool": "tooldeck.tools.function",
    "external_tool": "tooldeck.tools.function",
    "ToolRegistry": "tooldeck.tools.registry",
    "Toolset": "tooldeck.tools.registry",
    # models and the data they exchange with the loop
    "Model": "tooldeck.models.base",
    "ModelSettings": "tooldeck.models.base",
    "ScriptedModel": "tooldeck.models.scripted",
    "Message": "tooldeck.contracts",
    "AssistantOutput": "tooldeck.contracts",
    "ToolCall": "tooldeck.contracts",
    "ToolSpec": "tooldeck.contracts",
    # results
    "RunResult": "tooldeck.contracts",
    "StopReason": "tooldeck.contracts",
    "ToolTrace": "tooldeck.contracts",
    "ToolResult": "tooldeck.contracts",
    # pausing for a person or the application
    "Approve": "tooldeck.checkpoint",
    "Reject": "tooldeck.checkpoint",
    "PendingCall": "tooldeck.contracts",
    "Checkpoint": "tooldeck.contracts",
    # events of a streamed run
    "Event": "tooldeck.events",
    "ModelRequest": "tooldeck.events",
    "TextDelta": "tooldeck.events",
    "ToolCallDelta": "tooldeck.events",
    "ModelResponse": "tooldeck.events",
    "ToolCallStarted": "tooldeck.events",
    "ToolCallFinished": "tooldeck.events",
    "FinalAnswer": "tooldeck.events",
    # the bases of tooldeck's errors (every error class: tooldeck.errors)
    "ToolDeckError": "tooldeck.errors",
    "ToolDefinitionError": "tooldeck.errors",
    "RunStopped": "tooldeck.errors",
    "ModelError": "tooldeck.errors",
}

__all__ = list(_EXPORTS)


# Names that were top-level before 0.2, and where they live now.
_MOVED: dict[str, str] = {
    **dict.fromkeys(
        [
            "ArgumentProblem",
            "CheckpointError",
            "DuplicateToolError",
            "ErrorCode",
            "InvalidArguments",
            "LimitExceeded",
            "ModelAuthError",
            "ModelBadRequest",
            "ModelNotConfigured",
            "ModelOutputTruncated",
            "ModelRateLimited",
            "ModelRefused",
            "ModelRetry",
            "ModelUnavailable",
            "ProviderError",
            "ScriptExhausted",
            "SessionConflict",
            "SessionError",
            "ToolExecutionError",
        ],
        "tooldeck.errors",
    ),
    **dict.fromkeys(("PostgresSession", "SQLiteSession", "Session"), "tooldeck.sessions"),
    **dict.fromkeys(("KeepLastTurns", "Summarize", "TokenBudget"), "tooldeck.history"),
    "RunLog": "tooldeck.runlog",
    "DurableAgent": "tooldeck.durable",
    "MCPToolset": "tooldeck.tools.mcp",
    **dict.fromkeys(("ToolEntry", "ToolHandler", "ToolView"), "tooldeck.tools.registry"),
    "ToolOptions": "tooldeck.tools.options",
    "Usage": "tooldeck.contracts",
    "resolve_model": "tooldeck.models.resolve",
    "RecordedRequest": "tooldeck.models.scripted",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        moved = _MOVED.get(name)
        hint = f"; import it from {moved}" if moved else ""
        raise AttributeError(f"module 'tooldeck' has no attribute {name!r}{hint}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
