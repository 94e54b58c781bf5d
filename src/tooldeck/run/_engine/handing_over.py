"""A run with handoffs: one loop per agent in turn, on the same run state.

``handing_over`` drives the loop of the agent that has the conversation; when a round ends
with a handoff (``HandedOff``, the loop's last event), the run's state goes on in the loop
of the agent handed to: the history its handoff chose, the run's counters under that
agent's limits. Every event is stamped with the name of the agent whose loop yielded it.
What stays the run's, whichever agent has it: its id, state, checkpoint key, deps, session,
observer and run log (those of the agent the run was started on), and that agent's
guardrails and untrusted-content policy, which apply beside each agent's own while it
holds the run (``run._engine.inherited``).

Runs without handoffs never come here (``starting.run_events`` checks once per run).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Literal

from tooldeck.errors import CheckpointError
from tooldeck.messages import Message
from tooldeck.results import Checkpoint, ShownHistory
from tooldeck.run._engine.assembly import tool_wrapper
from tooldeck.run._engine.hooks import Hooks
from tooldeck.run._engine.inherited import NOTHING, Inherited, without_input
from tooldeck.run._engine.loop import RunSetup, RunStart, driven
from tooldeck.run.capabilities import Capability
from tooldeck.run.events import Event, HandedOff
from tooldeck.run.handoff import (
    Handoff,
    HandoffAgent,
    ShownFirst,
    as_handoff,
    handed_history,
    transferred,
)
from tooldeck.run.observer import RunObserver
from tooldeck.run.policy import RunPolicy
from tooldeck.tools.outputs import OutputStore
from tooldeck.tools.registry import ToolEntry


async def handing_over(
    first: HandoffAgent,
    agent: HandoffAgent,
    start: RunStart,
    observer: RunObserver | None,
    inherited: Inherited | None = None,
) -> AsyncGenerator[Event, None]:
    """The run's events, from ``agent``'s loop and then each agent handed to in turn
    (``first`` is the agent the run was started on; its guardrails and untrusted-content
    policy, after those the run ``inherited``, hold for the whole run)."""
    state = start.state
    if state.outputs is None:  # an agent handed the run may store outputs (read_output)
        state.outputs = OutputStore.of(state.trace)
    level = run_level(first._setup(), inherited)
    setup, handoffs = _setup(first, agent, state.shown, level, later=False)
    while True:
        state.agent = agent.name  # the loop stamps its events with it
        handed: HandedOff | None = None
        async with aclosing(driven(setup, start, observer)) as events:
            async for event in events:
                if isinstance(event, HandedOff):
                    handed = event
                yield event
        if handed is None:
            return
        taken = handoffs[handed.call.name]
        agent = _same(first, taken.agent)
        state.shown = handed_history(taken, state.messages, handed)
        policy = start.policy
        following = RunPolicy(agent.limits, policy.counters(), policy.budget)
        start = replace(start, policy=following, decisions=None, resumed=None)
        setup, handoffs = _setup(first, agent, state.shown, level, later=True)


def run_level(first: RunSetup, inherited: Inherited | None) -> Inherited:
    """The run's rules: those it ``inherited`` (from the run whose call it runs inside),
    then those of the agent it was started on (``first``)."""
    calls = first.calls
    lasting = run_level_of(first.capabilities)
    return (inherited or NOTHING).joined(
        first.guards, calls.tool_guardrails, calls.after_untrusted, lasting
    )


def ruled(setup: RunSetup, level: Inherited, *, prompt: bool) -> RunSetup:
    """``setup`` (of the agent holding the run) under the run's rules: the run-level
    guardrails first, then the agent's own, and the stricter untrusted-content policy;
    without input guardrails unless the agent judges the prompt (``prompt``)."""
    calls = setup.calls
    lasting = run_level_of(setup.capabilities)
    rules = level.joined(setup.guards, calls.tool_guardrails, calls.after_untrusted, lasting)
    if not rules.guarded and level is NOTHING:
        return setup
    guards = rules.guards if prompt else without_input(rules.guards)
    options = replace(
        calls, tool_guardrails=rules.tool_guardrails, after_untrusted=rules.after_untrusted
    )
    setup = replace(setup, guards=guards, calls=options, inherits=rules)
    added = tuple(item for item in level.capabilities if item not in setup.capabilities)
    return with_capabilities(setup, added) if added else setup


def with_capabilities(setup: RunSetup, added: tuple[Capability, ...]) -> RunSetup:
    """``setup`` with the run-level capabilities ``added`` before the agent's own: their
    hooks around the agent's, their tools beside its tools."""
    every = (*added, *setup.capabilities)
    hooks = Hooks.of(every)
    tools = tuple(ToolEntry.of(given) for item in added for given in item.tools())
    source = setup.tools.extended(tools) if tools else setup.tools
    wrap = tool_wrapper(added)
    asking = replace(setup.asking, hooks=hooks if hooks and hooks.requests else None)
    calls = replace(setup.calls, hooks=hooks if hooks and hooks.calls else None)
    return replace(
        setup,
        asking=asking,
        calls=calls,
        tools=source if wrap is None else source.wrapped(wrap),
        hooks=hooks if hooks and hooks.runs else None,
        capabilities=every,
    )


def run_level_of(items: tuple[Capability, ...]) -> tuple[Capability, ...]:
    """The capabilities that go with the run when it starts on their agent."""
    return tuple(item for item in items if item.run_level)


def _setup(
    first: HandoffAgent,
    agent: HandoffAgent,
    shown: ShownHistory | None,
    level: Inherited,
    *,
    later: bool,
) -> tuple[RunSetup, dict[str, Handoff]]:
    """What ``agent``'s loop reads, with its transfer tools and the history it is shown,
    under the run's rules (``level``), and its handoffs by tool name. The run's checkpoints
    stay signed with ``first``'s key; an agent handed to does not check the prompt again
    (the input guardrails apply as the run starts, on whichever agent it starts)."""
    setup = ruled(agent._setup(), level, prompt=not later)
    if agent is not first:
        setup = first._wrappers.apply(setup)
    if shown is not None:
        asking = setup.asking
        setup = replace(setup, asking=replace(asking, history=ShownFirst(shown, asking.history)))
    handoffs: dict[str, Handoff] = {}
    for item in agent.handoffs:
        taken = as_handoff(item)
        if taken.tool_name in handoffs:
            raise ValueError(
                f"agent {agent.name!r} has two handoffs named {taken.name!r}: give one "
                "another name with handoff(agent, name=...)"
            )
        handoffs[taken.tool_name] = taken
    setup = replace(setup, checkpoint_key=first.checkpoint_key)
    if not handoffs:
        return setup, handoffs
    transfers = frozenset(handoffs)
    tools = setup.tools.extended(tuple(taken.entry(transfers) for taken in handoffs.values()))
    targets = {tool_name: taken.agent.name for tool_name, taken in handoffs.items()}
    return replace(setup, tools=tools, handoffs=targets), handoffs


def reachable(first: HandoffAgent) -> dict[str, HandoffAgent]:
    """Every agent ``first`` can hand a run to, directly or not, by name (``first`` too).

    Raises:
        ValueError: two different agents of the graph have the same name.
    """
    found = {first.name: first}
    waiting = [first]
    while waiting:
        for item in waiting.pop().handoffs:
            agent = _same(first, as_handoff(item).agent)
            known = found.get(agent.name)
            if known is None:
                found[agent.name] = agent
                waiting.append(agent)
            elif known is not agent:
                raise ValueError(
                    f"two different agents named {agent.name!r} are among the handoffs of "
                    f"{first.name!r}: give each its own Agent(name=...)"
                )
    return found


def _same(first: HandoffAgent, agent: HandoffAgent) -> HandoffAgent:
    """``agent``, or ``first`` when ``first`` is a copy of it (``Agent.wrapped``)."""
    return first if first._wrappers.origin is agent else agent


def paused_in(first: HandoffAgent, checkpoint: Checkpoint) -> HandoffAgent:
    """The agent a checkpoint's run paused in, found through ``first``'s handoffs.

    Raises:
        CheckpointError: no agent of that name is ``first`` or among its handoffs.
    """
    name = checkpoint.agent
    if not name or name == first.name:
        return first
    agents = reachable(first)
    agent = agents.get(name)
    if agent is None:
        raise CheckpointError(
            f"the run paused in agent {name!r}, which is not {first.name!r} nor among its "
            f"handoffs (agents: {', '.join(map(repr, sorted(agents)))}): resume it with the "
            "agent it was started on, whose handoffs lead to that agent"
        )
    return agent


def agent_named(first: HandoffAgent, name: str) -> HandoffAgent:
    """The agent named ``name`` among ``first`` and its handoffs (``first`` for an empty
    name, or a name no longer among them: the run goes on in the agent it was started on)."""
    if not name or name == first.name:
        return first
    return reachable(first).get(name, first)


def answered_last(first: HandoffAgent, messages: Sequence[Message]) -> HandoffAgent:
    """The agent the conversation was last handed to in ``messages`` (a session's history:
    the answer to a transfer call names it), else ``first``."""
    agents = reachable(first)
    by_result = {transferred(agent.name): agent for agent in agents.values()}
    tools = set(_transfer_tools(agents.values()))
    called = {call.id: call.name for message in messages for call in message.tool_calls}
    for message in reversed(messages):
        if message.role != "tool" or message.tool_call_id is None:
            continue
        agent = by_result.get(message.content)
        if agent is not None and called.get(message.tool_call_id) in tools:
            return agent
    return first


def _transfer_tools(agents: Iterable[HandoffAgent]) -> Iterable[str]:
    for agent in agents:
        for item in agent.handoffs:
            yield as_handoff(item).tool_name


def starting_agent(
    first: HandoffAgent, resume: Literal["last", "first"], history: Sequence[Message]
) -> HandoffAgent:
    """The agent a run from a prompt starts on: ``first``, or, continuing a conversation
    with ``handoff_resume="last"``, the agent the conversation was last handed to."""
    if not history or resume == "first" or not first.handoffs:
        return first
    return answered_last(first, history)


def handoffs_of(
    name: object, handoffs: Iterable[HandoffAgent | Handoff], resume: object
) -> tuple[str, list[HandoffAgent | Handoff], Literal["last", "first"]]:
    """``Agent(name=, handoffs=, handoff_resume=)`` checked: a non-empty name, known
    ``handoff_resume``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"Agent(name=...) must be a non-empty string, got {name!r}")
    if resume not in ("last", "first"):
        raise ValueError(f"handoff_resume must be 'last' or 'first', got {resume!r}")
    items = list(handoffs)
    for item in items:
        as_handoff(item)  # refuses what is not an agent or a handoff, now
    return name, items, "last" if resume == "last" else "first"
