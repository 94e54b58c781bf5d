"""Run-level safety: what a run holds whichever agent has it, at any depth.

The guardrails and the untrusted-content policy of the agent a run is started on are the
run's: they apply to every agent that holds the run (after handoffs, ``handing_over``) and
inside its calls (an agent tool's inner run, ``run.agent_tool``), beside each agent's own
while it holds the run (run-level first). An inner run also starts with the outer run's
taint (the call whose result brought untrusted content in) and shares its cancel signal, so
a ``RunHandle.cancel()`` reaches the tools of inner runs too (``ctx.cancelled``), and its
call records, so its ``side_effects`` calls are at most once too.

``Inherited`` is that record: made once as a run starts (``run._engine.starting``), joined with each
agent's own settings as it takes the run, and handed to the runs made inside its calls with
the taint of the moment (``CallRound.passed_on``). A run that has none of it (no
guardrails, ``after_untrusted="allow"``, no taint, no handle) never makes one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal, TypeVar

from tooldeck.run.capabilities import Capability
from tooldeck.run.guardrails import Guards
from tooldeck.run.session import CallRecords
from tooldeck.safety import UntrustedSource
from tooldeck.tools.guardrails import ToolGuardrail

AfterUntrusted = Literal["allow", "ask", "refuse"]
"""``Agent(after_untrusted=...)``."""
_STRICTNESS: dict[str, int] = {"allow": 0, "ask": 1, "refuse": 2}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Inherited:
    """What a run holds for its whole length, whichever agent has it, and what the runs made
    inside its calls start with."""

    guards: Guards | None = None
    """The run-level input and output guardrails (None: none)."""
    tool_guardrails: tuple[ToolGuardrail, ...] = ()
    """The run-level tool guardrails, judging every call at any depth."""
    after_untrusted: AfterUntrusted = "allow"
    """The run-level policy for side-effect and sensitive calls once the conversation holds
    untrusted content (an agent's own stricter policy applies while it holds the run)."""
    tainted_by: UntrustedSource | None = None
    """For a run made inside a call: the call whose result had brought untrusted content
    into the outer run when the call was made (the inner run starts tainted by it)."""
    cancel: threading.Event | None = None
    """For a run made inside a call: the outer run's cancel signal (``ctx.cancelled`` of
    the inner run's tools)."""
    records: CallRecords | None = None
    """For a run made inside a call: where the outer run records its ``side_effects`` calls
    (its session). The inner run's are recorded there too, under the inner run's id, which
    the agent tool derives from the call's place (``<outer run>/<round>:<place>``): a call
    met again after a crash finds its record, however the provider names it this time."""
    capabilities: tuple[Capability, ...] = ()
    """The run-level capabilities: given to ``run(capabilities=...)``, or ``run_level`` ones
    of the agent the run started on; they apply beside each agent's own, at any depth."""

    @property
    def guarded(self) -> bool:
        """Whether there is a run-level rule to apply (a guardrail, or a policy but "allow")."""
        return (
            self.guards is not None
            or bool(self.tool_guardrails)
            or self.strict
            or bool(self.capabilities)
        )

    @property
    def strict(self) -> bool:
        """Whether the untrusted-content policy is more than "allow"."""
        return self.after_untrusted != "allow"

    def joined(
        self,
        guards: Guards | None,
        tool_guardrails: tuple[ToolGuardrail, ...],
        after_untrusted: AfterUntrusted,
        capabilities: tuple[Capability, ...] = (),
    ) -> Inherited:
        """These rules, then an agent's own (each guardrail and capability once): what
        applies while that agent holds the run. The stricter policy wins."""
        return Inherited(
            joined_guards(self.guards, guards),
            joined_tuples(self.tool_guardrails, tool_guardrails),
            stricter(self.after_untrusted, after_untrusted),
            self.tainted_by,
            self.cancel,
            self.records,
            joined_tuples(self.capabilities, capabilities),
        )

    def at(
        self,
        tainted_by: UntrustedSource | None,
        cancel: threading.Event | None,
        records: CallRecords | None = None,
    ) -> Inherited:
        """These rules with the taint, cancel signal and call records of the moment: what a
        run made inside a call starts with."""
        rules = self.guards, self.tool_guardrails, self.after_untrusted
        return Inherited(*rules, tainted_by, cancel, records, self.capabilities)


NOTHING = Inherited()
"""No run-level rule (a run whose starting agent has none)."""


def stricter(one: AfterUntrusted, other: AfterUntrusted) -> AfterUntrusted:
    """The stricter of two untrusted-content policies ("refuse" > "ask" > "allow")."""
    return one if _STRICTNESS[one] >= _STRICTNESS[other] else other


def joined_guards(first: Guards | None, then: Guards | None) -> Guards | None:
    """``first``'s input and output guardrails, then ``then``'s (each guardrail once)."""
    if first is None or first is then:
        return then
    if then is None:
        return first
    return Guards(joined_tuples(first.input, then.input), joined_tuples(first.output, then.output))


def joined_tuples(first: tuple[T, ...], then: tuple[T, ...]) -> tuple[T, ...]:
    """``first``, then what of ``then`` is not in it."""
    if not first or first is then:
        return then
    return (*first, *(item for item in then if item not in first))


def without_input(guards: Guards | None) -> Guards | None:
    """``guards`` without the input guardrails: an agent handed a run does not judge the
    prompt again (it was judged as the run started)."""
    if guards is None or not guards.input:
        return guards
    return Guards((), guards.output) if guards.output else None
