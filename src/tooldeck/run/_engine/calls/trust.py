"""After untrusted content entered the conversation (``Agent(after_untrusted=...)``): the
calls of tools that act on the world (``side_effects=True``) or reach what must not leak
(``sensitive=True``) wait for a person's approval (``"ask"``) or are refused (``"refuse"``).

Only a round whose conversation is tainted, of an agent that asks for this, comes here.
"""

from __future__ import annotations

from dataclasses import replace

from tooldeck.errors import ErrorCode
from tooldeck.results import ToolTrace
from tooldeck.run._engine.calls.shared import CallRound, Ready, refused
from tooldeck.safety import UntrustedSource


def after_untrusted(
    ready: list[Ready], round_: CallRound, source: UntrustedSource
) -> tuple[list[Ready], list[tuple[int, ToolTrace]]]:
    """The calls that go on (those that must be asked about now carry why), and the ones
    refused (by their index in the turn)."""
    going: list[Ready] = []
    refusals: list[tuple[int, ToolTrace]] = []
    refuse = round_.options.after_untrusted == "refuse"
    for item in ready:
        options = item.entry.options
        if not (options.side_effects or options.sensitive):
            going.append(item)
            continue
        what = "has side effects" if options.side_effects else "is sensitive"
        why = (
            f"the conversation holds untrusted content (from {source.describe()}) and "
            f"{item.call.name!r} {what}"
        )
        if refuse:
            text = f"not run: {why}; it runs only in a conversation without untrusted content"
            refusals.append((item.index, refused(item.call, ErrorCode.REFUSED, text)))
        else:
            going.append(replace(item, ask=why))
    return going, refusals
