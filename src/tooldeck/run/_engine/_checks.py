"""The checks of ``Agent(...)``'s settings, with what to write instead."""

from __future__ import annotations

import warnings

from tooldeck.run._engine.calls.shared import CallOptions
from tooldeck.run._engine.hooks import Hooks
from tooldeck.run._engine.inherited import AfterUntrusted
from tooldeck.run.history import HistoryStrategy
from tooldeck.run.policy import Limits
from tooldeck.tools.context import ToolChanges
from tooldeck.tools.guardrails import ToolGuardrail
from tooldeck.tools.outputs import LargeOutput
from tooldeck.tools.registry import ToolEntry, ToolSource


def check_settings(
    on_limit: object,
    max_concurrency: int | None,
    checkpoint_key: object,
) -> None:
    if on_limit not in ("raise", "final_answer"):
        raise ValueError(f"on_limit must be 'raise' or 'final_answer', got {on_limit!r}")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
    if checkpoint_key is not None and not isinstance(checkpoint_key, bytes):
        raise TypeError(f"checkpoint_key must be bytes, got {type(checkpoint_key).__name__}")


def strategy(
    strategy: HistoryStrategy | None, old_name: HistoryStrategy | None
) -> HistoryStrategy | None:
    if old_name is not None:
        warnings.warn(
            "Agent(history=...) is now Agent(history_strategy=...): run(history=...) is the "
            "history a run starts from",
            DeprecationWarning,
            stacklevel=3,
        )
        if strategy is not None:
            raise TypeError("pass history_strategy= only (history= is its deprecated name)")
        strategy = old_name
    return strategy  # its type is checked where it becomes a capability (assembly)


def call_options(
    include_error_details: bool,
    max_concurrency: int | None,
    limits: Limits,
    hooks: Hooks | None,
    registry: ToolChanges | None,
    output_limit: tuple[int | None, LargeOutput],
    tool_guardrails: tuple[ToolGuardrail, ...] = (),
    after_untrusted: AfterUntrusted = "allow",
) -> CallOptions:
    """How the agent's calls run: the lower of ``max_concurrency`` and the limits'
    ``max_parallel_calls``, the output limit checked, the tool guardrails and what calls
    need once the conversation holds untrusted content."""
    parallel = limits.max_parallel_calls
    if parallel is not None and (max_concurrency is None or parallel < max_concurrency):
        max_concurrency = parallel
    max_output_chars, large_output = output_limit
    return CallOptions(
        include_error_details,
        max_concurrency,
        hooks,
        registry,
        max_output_chars,
        large_output,
        tool_guardrails,
        after_untrusted,
    )


def stores_outputs(large_output: LargeOutput, tools: ToolSource) -> bool:
    """Whether the agent's calls may store outputs: then it adds the ``read_output`` tool."""
    if large_output == "store":
        return True  # LargeOutputs added it
    entries = tools.current.dispatch.values()
    if all(e.options.large_output != "store" for e in entries):
        return False
    from tooldeck.tools.read_output import read_output

    tools.add_builtin(ToolEntry.of(read_output))
    return True
