"""What a provider's own tool search found, read from a turn without knowing the provider.

``ToolSearch`` asks the adapters for native search through ``ModelSettings.tool_search``
(``NativeToolSearch``); the turn keeps the provider's search blocks in ``provider_items``,
and ``revealed_tools`` names the tools they loaded, whichever adapter wrote them (each
adapter's own module reads its format).

Part of ``tooldeck.models``: may import what it may.
"""

from __future__ import annotations

from tooldeck.messages import AssistantOutput
from tooldeck.models.anthropic._response import revealed_tools as anthropic_revealed
from tooldeck.models.base import NativeToolSearch
from tooldeck.models.openai._responses import revealed_tools as responses_revealed

__all__ = ["NativeToolSearch", "revealed_tools"]


def revealed_tools(output: AssistantOutput) -> list[str]:
    """The tools a provider's tool search loaded in ``output``, in order (none without
    ``provider_items``: every local or scripted turn)."""
    items = output.provider_items
    if not items:
        return []
    return [*anthropic_revealed(items), *responses_revealed(items)]
