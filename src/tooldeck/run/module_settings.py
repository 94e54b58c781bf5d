"""What a tools module gives the agent of a front door beside its tools, read in one place.

``tooldeck run``, ``chat``, ``web``, ``mcp serve`` and ``eval`` name a tools module; the
module may also define, by these names, lists of guardrails (``input_guardrails``,
``output_guardrails``, ``tool_guardrails``), the agents its agent may hand a conversation
to (``handoffs``), its untrusted-content policy (``after_untrusted``) and its
``capabilities`` (``tooldeck.run.capabilities``). Every front door
reads them with ``module_settings`` and gets one ``ModuleSettings``; a door that cannot
honour one the module gives refuses to start and names it (``refuse_unhonoured``): a
safety setting is never dropped without a word.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import get_args

from tooldeck.run._engine.inherited import AfterUntrusted
from tooldeck.run.budget import Budget
from tooldeck.run.capabilities import Capability
from tooldeck.run.guardrails import Guardrail, GuardrailCheck, guards_of
from tooldeck.run.handoff import Handoff, HandoffAgent
from tooldeck.tools import modules
from tooldeck.tools.guardrails import ToolGuardrail
from tooldeck.tools.registry import ToolRegistry

_STRICTNESS: tuple[AfterUntrusted, ...] = get_args(AfterUntrusted)  # allow < ask < refuse


@dataclass(frozen=True, slots=True)
class ModuleSettings:
    """The settings a tools module defines beside its tools (all empty: it defines none)."""

    target: str = ""
    """The module as the command named it (``shop.py``, ``my_app.tools:registry``)."""
    input_guardrails: tuple[Guardrail | GuardrailCheck, ...] = ()
    """``Agent(input_guardrails=...)``: judge the prompt before the model reads it."""
    output_guardrails: tuple[Guardrail | GuardrailCheck, ...] = ()
    """``Agent(output_guardrails=...)``: judge the answer before anyone reads it."""
    tool_guardrails: tuple[ToolGuardrail, ...] = ()
    """``Agent(tool_guardrails=...)``: judge each call's arguments (and results)."""
    handoffs: tuple[HandoffAgent | Handoff, ...] = ()
    """``Agent(handoffs=...)``: the agents the conversation may be handed to."""
    after_untrusted: AfterUntrusted = "allow"
    """``Agent(after_untrusted=...)``: what calls may do once untrusted content was read;
    a command's ``--after-untrusted`` can make it stricter, never looser."""
    capabilities: tuple[Capability, ...] = ()
    """``Agent(capabilities=...)``: what the module adds to the agent's runs."""

    @property
    def given(self) -> tuple[str, ...]:
        """The names of the settings the module gives (in the order of the fields)."""
        given = {
            "input_guardrails": bool(self.input_guardrails),
            "output_guardrails": bool(self.output_guardrails),
            "tool_guardrails": bool(self.tool_guardrails),
            "handoffs": bool(self.handoffs),
            "after_untrusted": self.after_untrusted != "allow",
            "capabilities": bool(self.capabilities),
        }
        return tuple(name for name, is_given in given.items() if is_given)

    def untrusted_policy(self, asked: AfterUntrusted) -> AfterUntrusted:
        """The stricter of the module's ``after_untrusted`` and the command's ``asked``."""
        return max(self.after_untrusted, asked, key=_STRICTNESS.index)

    def refuse_unhonoured(self, door: str, unhonoured: Collection[str], why: str) -> None:
        """Raise ``TargetUsageError`` naming the settings given that ``door`` cannot honour.

        Args:
            door: The front door, as its errors name it (``tooldeck mcp serve``).
            unhonoured: The settings it does not honour; the others it honours.
            why: Why it cannot, said in the error.
        """
        refused = [name for name in self.given if name in unhonoured]
        if refused:
            them = "them" if len(refused) > 1 else "it"
            raise modules.TargetUsageError(
                f"{self.target!r} defines {', '.join(refused)}, which {door} cannot apply "
                f"({why}); give it a module that does not define {them} (import the tools "
                "there and list them in __all__)"
            )


def module_settings(target: str) -> tuple[ToolRegistry, ModuleSettings]:
    """The tools ``target`` names and the settings its module defines, each checked: a list
    of guardrails or handoffs, a policy of ``allow``, ``ask`` or ``refuse``.

    Raises:
        TargetError: The module cannot be loaded, or a setting is not what it must be.
    """
    registry, found = modules.tools_and_settings(target)
    _refuse_a_budget(target, found.get("budget"))
    policy = found.get("after_untrusted", "allow")
    if policy not in _STRICTNESS:
        raise modules.TargetError(
            f"{target!r}: after_untrusted must be 'allow', 'ask' or 'refuse', got {policy!r}"
        )
    inputs = tuple(found.get("input_guardrails", ()))
    outputs = tuple(found.get("output_guardrails", ()))
    try:
        guards_of(inputs, outputs)  # checked here, named by the module: not at each door
        tool_guardrails = tuple(
            ToolGuardrail.of(item, "tool_guardrails") for item in found.get("tool_guardrails", ())
        )
        capabilities = tuple(found.get("capabilities", ()))
        for item in capabilities:
            if not isinstance(item, Capability):
                raise TypeError(
                    "capabilities must be Capability objects (tooldeck.run.capabilities), "
                    f"got {type(item).__name__}: {item!r}"
                )
    except (TypeError, ValueError) as error:
        raise modules.TargetError(f"{target!r}: {error}") from error
    settings = ModuleSettings(
        target=target,
        input_guardrails=inputs,
        output_guardrails=outputs,
        tool_guardrails=tool_guardrails,
        handoffs=tuple(found.get("handoffs", ())),
        after_untrusted=policy,
        capabilities=capabilities,
    )
    return registry, settings


def _refuse_a_budget(target: str, budget: object) -> None:
    """A module that holds a shared ``Budget`` as ``budget`` is refused, not run without it:
    no front door reads a module's budget; each takes its spending limits as options."""
    if isinstance(budget, Budget):
        raise modules.TargetUsageError(
            f"{target!r} defines budget (a shared {type(budget).__name__}), which the command "
            "line does not read: its runs would not spend from it. Give the command its "
            "limits (--max-cost, --price IN,OUT, --on-limit), or run the agent from Python "
            "with run(..., budget=...)"
        )
