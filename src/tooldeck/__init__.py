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
    from tooldeck.errors import ModelError as ModelError
    from tooldeck.errors import RunStopped as RunStopped
    from tooldeck.errors import ToolDeckError as ToolDeckError
    from tooldeck.errors import ToolDefinitionError as ToolDefinitionError
    from tooldeck.messages import AssistantOutput as AssistantOutput
    from tooldeck.messages import Message as Message
    from tooldeck.messages import ToolCall as ToolCall
    from tooldeck.messages import ToolResult as ToolResult
    from tooldeck.messages import ToolSpec as ToolSpec
    from tooldeck.models.base import Model as Model
    from tooldeck.models.base import ModelSettings as ModelSettings
    from tooldeck.models.scripted import ScriptedModel as ScriptedModel
    from tooldeck.models.wrapper import WrapperModel as WrapperModel
    from tooldeck.observe import instrument as instrument
    from tooldeck.results import Approve as Approve
    from tooldeck.results import Checkpoint as Checkpoint
    from tooldeck.results import PendingCall as PendingCall
    from tooldeck.results import Reject as Reject
    from tooldeck.results import RunResult as RunResult
    from tooldeck.results import StopReason as StopReason
    from tooldeck.results import ToolTrace as ToolTrace
    from tooldeck.run.agent import Agent as Agent
    from tooldeck.run.agent import run_agent as run_agent
    from tooldeck.run.budget import Budget as Budget
    from tooldeck.run.events import Event as Event
    from tooldeck.run.events import FinalAnswer as FinalAnswer
    from tooldeck.run.events import ModelRequest as ModelRequest
    from tooldeck.run.events import ModelResponse as ModelResponse
    from tooldeck.run.events import TextDelta as TextDelta
    from tooldeck.run.events import ToolCallDelta as ToolCallDelta
    from tooldeck.run.events import ToolCallFinished as ToolCallFinished
    from tooldeck.run.events import ToolCallStarted as ToolCallStarted
    from tooldeck.run.handoff import handoff as handoff
    from tooldeck.run.policy import Limits as Limits
    from tooldeck.tools.context import RunContext as RunContext
    from tooldeck.tools.function import FunctionTool as FunctionTool
    from tooldeck.tools.function import external_tool as external_tool
    from tooldeck.tools.function import tool as tool
    from tooldeck.tools.registry import ToolRegistry as ToolRegistry
    from tooldeck.tools.registry import Toolset as Toolset

from tooldeck import _compat
from tooldeck._version import __version__ as __version__

# Names resolve on first use, so `import tooldeck` stays cheap (no pydantic, no asyncio)
# until an agent or a tool is actually built. Grouped by theme; __all__ is this table.
_EXPORTS: dict[str, str] = {
    # building and running agents
    "Agent": "tooldeck.run.agent",
    "run_agent": "tooldeck.run.agent",
    "Limits": "tooldeck.run.policy",
    "Budget": "tooldeck.run.budget",
    "handoff": "tooldeck.run.handoff",
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
    "WrapperModel": "tooldeck.models.wrapper",
    "Message": "tooldeck.messages",
    "AssistantOutput": "tooldeck.messages",
    "ToolCall": "tooldeck.messages",
    "ToolSpec": "tooldeck.messages",
    # results
    "RunResult": "tooldeck.results",
    "StopReason": "tooldeck.results",
    "ToolTrace": "tooldeck.results",
    "ToolResult": "tooldeck.messages",
    # pausing for a person or the application
    "Approve": "tooldeck.results",
    "Reject": "tooldeck.results",
    "PendingCall": "tooldeck.results",
    "Checkpoint": "tooldeck.results",
    # events of a streamed run
    "Event": "tooldeck.run.events",
    "ModelRequest": "tooldeck.run.events",
    "TextDelta": "tooldeck.run.events",
    "ToolCallDelta": "tooldeck.run.events",
    "ModelResponse": "tooldeck.run.events",
    "ToolCallStarted": "tooldeck.run.events",
    "ToolCallFinished": "tooldeck.run.events",
    "FinalAnswer": "tooldeck.run.events",
    # the bases of tooldeck's errors (every error class: tooldeck.errors)
    "ToolDeckError": "tooldeck.errors",
    "ToolDefinitionError": "tooldeck.errors",
    "RunStopped": "tooldeck.errors",
    "ModelError": "tooldeck.errors",
}

__all__ = list(_EXPORTS)


# Names that are not top-level, and the modules they are imported from (several: the first is
# where the docs show it). Names that were top-level before 0.2, then every public error
# class (tests/test_public_api.py walks the public modules and holds this table to them).
_MOVED: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        [
            "ArgumentProblem",
            "CheckpointError",
            "DuplicateToolError",
            "ErrorCode",
            "GuardrailTripped",
            "InvalidArguments",
            "LimitExceeded",
            "MiddlewareError",
            "ModelAuthError",
            "ModelBadRequest",
            "ModelNotConfigured",
            "ModelOutputTruncated",
            "ModelRateLimited",
            "ModelRefused",
            "ModelRetry",
            "ModelStreamMissing",
            "ModelUnavailable",
            "ProviderError",
            "ScriptExhausted",
            "ToolDefinitionWarning",
            "RunEnded",
            "ToolExecutionError",
        ],
        ("tooldeck.errors",),
    ),
    **dict.fromkeys(("SessionConflict", "SessionError"), ("tooldeck.errors", "tooldeck.sessions")),
    "RunLogError": ("tooldeck.runlog", "tooldeck.errors"),
    **dict.fromkeys(("CaseFileError", "ResultFileError", "UnknownSuite"), ("tooldeck.eval",)),
    **dict.fromkeys(("MCPCallFailed", "MCPConnectionError"), ("tooldeck.tools.mcp",)),
    **dict.fromkeys(("TargetError", "TargetUsageError"), ("tooldeck.tools.modules",)),
    "ScriptError": ("tooldeck.testing.script",),
    "UnscriptedRequests": ("tooldeck.testing",),
    **dict.fromkeys(
        ("PostgresSession", "SQLiteSession", "Session", "StoredRun"), ("tooldeck.sessions",)
    ),
    **dict.fromkeys(
        ("KeepLastExchanges", "KeepLastTurns", "Summarize", "TokenBudget"),
        ("tooldeck.run.history",),
    ),
    "RunLog": ("tooldeck.runlog",),
    "DurableAgent": ("tooldeck.durable",),
    "MCPToolset": ("tooldeck.tools.mcp",),
    **dict.fromkeys(("ToolEntry", "ToolHandler", "ToolView"), ("tooldeck.tools.registry",)),
    "ToolOptions": ("tooldeck.tools.options",),
    "Usage": ("tooldeck.messages",),
    "resolve_model": ("tooldeck.models.resolve",),
    "RecordedRequest": ("tooldeck.models.scripted",),
    "RememberedApproval": ("tooldeck.results",),
}


_compat.install()  # tooldeck.loop, tooldeck.contracts, ... import as the modules they became


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        homes = _MOVED.get(name, ())
        hint = f"; import it from {' or '.join(homes)}" if homes else ""
        raise AttributeError(f"module 'tooldeck' has no attribute {name!r}{hint}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
