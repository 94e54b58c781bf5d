"""An agent's capabilities, read once as it is made: what each kind gives the run.

``Agent``'s older keywords are shorthands (``AgentShorthands``): ``shorthand_capabilities``
builds from them the capabilities a user could have given in ``capabilities=[...]``
(``Middleware``, ``Guardrails``, ``UntrustedPolicy``, a history strategy, ``LargeOutputs``,
the run log's ``Observing``, ``Tracing``), and ``assemble`` reads one list, whichever way
it was written, into what the engine applies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from tooldeck.run._engine.hooks import Hooks, check
from tooldeck.run._engine.inherited import (
    NOTHING,
    AfterUntrusted,
    Inherited,
    joined_guards,
    joined_tuples,
    stricter,
)
from tooldeck.run.capabilities import Capability, LargeOutputs, overrides
from tooldeck.run.guardrails import Guardrail, GuardrailCheck, Guardrails, Guards
from tooldeck.run.history import HistoryStrategy
from tooldeck.run.middleware import Middleware, checked_middleware
from tooldeck.run.observer import (
    Instrumenter,
    Observing,
    StreamObserver,
    Tracing,
    observing,
    tracing,
)
from tooldeck.run.untrusted import UntrustedPolicy
from tooldeck.tools.guardrails import ArgumentsCheck, ToolGuardrail
from tooldeck.tools.outputs import LargeOutput
from tooldeck.tools.registry import EntryWrapper, ToolEntry


class AgentShorthands(TypedDict, total=False):
    """``Agent``'s keywords that build capabilities (and two settings of its answers), kept
    so that no earlier code breaks; each is documented on ``Agent``."""

    include_error_details: bool
    max_concurrency: int | None
    max_output_chars: int | None
    large_output: LargeOutput
    output_retries: int | None
    output_validators: Sequence[Callable[..., Any]]
    middleware: Sequence[Middleware]
    instrument: Instrumenter | bool | None
    history_strategy: HistoryStrategy | None
    history: HistoryStrategy | None
    run_log: StreamObserver | None
    input_guardrails: Sequence[Guardrail | GuardrailCheck]
    output_guardrails: Sequence[Guardrail | GuardrailCheck]
    tool_guardrails: Sequence[ToolGuardrail | ArgumentsCheck]
    after_untrusted: AfterUntrusted
    handoff_resume: Literal["last", "first"]


SHORTHANDS = frozenset(AgentShorthands.__annotations__)


def check_shorthands(given: Iterable[str]) -> None:
    """Refuse a keyword ``Agent`` does not take, as Python would, naming it."""
    unknown = sorted(set(given) - SHORTHANDS)
    if unknown:
        raise TypeError(f"Agent() got an unexpected keyword argument {unknown[0]!r}")


def shorthand_capabilities(shorthands: AgentShorthands) -> list[Capability]:
    """The capabilities the keywords given stand for, in the order they apply."""
    built: list[Capability] = [*checked_middleware(shorthands.get("middleware", ()))]
    input_ = shorthands.get("input_guardrails", ())
    output = shorthands.get("output_guardrails", ())
    tool = shorthands.get("tool_guardrails", ())
    if input_ or output or tool:
        built.append(Guardrails(input_, output, tool))
    after = shorthands.get("after_untrusted", "allow")
    if after != "allow":
        built.append(UntrustedPolicy(after))
    strategy = shorthands.get("history_strategy")
    if strategy is not None:
        built.append(_checked_strategy(strategy))
    max_chars = shorthands.get("max_output_chars")
    mode = shorthands.get("large_output", "truncate")
    if max_chars is not None or mode != "truncate":
        built.append(LargeOutputs(max_chars, mode))
    log = shorthands.get("run_log")
    if log is not None:
        built.append(observing(log))
    instrument = shorthands.get("instrument")
    if instrument is True:
        raise ValueError(
            "instrument=True is not a setting: pass tooldeck.observe.Instrumentation() "
            "(the global tracer provider) or call tooldeck.instrument() for every agent"
        )
    if instrument is not None and instrument is not False:
        built.append(tracing(instrument))
    return built


def _checked_strategy(strategy: object) -> HistoryStrategy:
    if not isinstance(strategy, HistoryStrategy):
        raise TypeError(
            "history_strategy must be a history strategy such as KeepLastExchanges(10), got "
            f"{strategy!r} (a run's earlier messages go to run(..., history=...))"
        )
    return strategy


@dataclass(frozen=True, slots=True)
class Assembled:
    """What an agent's capabilities give its runs."""

    hooks: Hooks | None
    guards: Guards | None
    tool_guardrails: tuple[ToolGuardrail, ...]
    after_untrusted: AfterUntrusted
    history: HistoryStrategy | None
    large: LargeOutputs
    observers: tuple[Observing, ...]
    tracing: Tracing | None
    tools: tuple[ToolEntry, ...]
    wrap_tool: EntryWrapper | None
    """Every ``wrap_tool`` hook in turn (None: no capability has one)."""


def assemble(items: Sequence[Capability]) -> Assembled:
    """Read the capabilities into what the engine applies: the hooks of those with hooks,
    the guardrails and policy joined (the stricter policy wins), one history strategy, one
    output limit, one tracer, the observers, and the tools they add."""
    guards: Guards | None = None
    tool: tuple[ToolGuardrail, ...] = ()
    after: AfterUntrusted = "allow"
    one: dict[type, Capability] = {}
    observers: list[Observing] = []
    tools: list[ToolEntry] = []
    for item in items:
        check(item)
        if isinstance(item, Guardrails):
            guards, tool = joined_guards(guards, item.guards), joined_tuples(tool, item.tool)
        elif isinstance(item, UntrustedPolicy):
            after = stricter(after, item.after)
        elif isinstance(item, Observing):
            observers.append(item)
        for kind in (HistoryStrategy, LargeOutputs, Tracing):
            if isinstance(item, kind):
                if kind in one:
                    raise ValueError(
                        f"an agent takes one {kind.__name__}: got {one[kind]!r} and {item!r}"
                    )
                one[kind] = item
        tools.extend(ToolEntry.of(given) for given in item.tools())
    large = one.get(LargeOutputs)
    return Assembled(
        Hooks.of(items),
        guards,
        tool,
        after,
        _as(one.get(HistoryStrategy), HistoryStrategy),
        large if isinstance(large, LargeOutputs) else LargeOutputs(),
        tuple(observers),
        _as(one.get(Tracing), Tracing),
        tuple(tools),
        tool_wrapper(items),
    )


def tool_wrapper(items: Iterable[Capability]) -> EntryWrapper | None:
    """The capabilities' ``wrap_tool`` hooks as one entry wrapper, in list order."""
    wrapping = tuple(item for item in items if overrides(item, "wrap_tool"))
    if not wrapping:
        return None

    def wrap(entry: ToolEntry) -> ToolEntry:
        for item in wrapping:
            entry = item.wrap_tool(entry)
            if not isinstance(entry, ToolEntry):
                raise TypeError(
                    f"{type(item).__name__}.wrap_tool returned {type(entry).__name__}, "
                    "expected a ToolEntry"
                )
        return entry

    return wrap


def _as(item: Capability | None, kind: type[Any]) -> Any:
    return item if isinstance(item, kind) else None


def given_to_run(inherited: Inherited | None, given: tuple[Capability, ...]) -> Inherited:
    """What a run holds for its whole length once ``run(capabilities=given)`` joins what it
    inherited: their guardrails and policy as run-level rules, all of them as run-level
    capabilities."""
    built = assemble(given)
    if any(isinstance(item, LargeOutputs) for item in given):
        raise ValueError(
            "LargeOutputs is an agent's setting: give it to Agent(capabilities=[...]), not run()"
        )
    return (inherited or NOTHING).joined(
        built.guards, built.tool_guardrails, built.after_untrusted, given
    )
