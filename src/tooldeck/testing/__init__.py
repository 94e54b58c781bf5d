"""A provider simulator for tests: an OpenAI-compatible server on loopback, scripted.

``ProviderSimulator`` answers Chat Completions (``/v1/chat/completions``) and the Responses
API (``/v1/responses``), streamed or not, with bodies made from the ``openai`` SDK's own
types, as a hosted provider does: a fresh tool-call id in every response, ``usage`` on every
response, text and tool-argument deltas over several chunks. It fails on demand: HTTP 429
with ``retry-after``, 500, a hang, a stream cut mid-way, a slow first byte.

    from tooldeck.testing import ProviderSimulator, call, fail, reply

    with ProviderSimulator([call("refund_order", {"order_id": "A1"}), reply("Refunded.")]) as sim:
        agent = Agent(sim.model(), tools=[refund_order])
        agent.run_sync("Refund A1")
        sim.requests[1]["messages"][-1]  # the tool result the model read

Steps come from a list (one per request, in order) or from rules asked first
(``rule(when=last_user_contains("refund"), then=call(...))``). ``python -m tooldeck.testing
serve script.json`` serves a script from a file (``tooldeck.testing.script``).

Layer 4. May import: ``tooldeck.models`` (to build ``sim.model()``) and the layers below,
Starlette and uvicorn, and the ``openai`` SDK's types (``openai.types``: the shapes it
serves; never its client). Nothing in ``run/`` or below imports it. Install with
``pip install 'tooldeck[testing]'``.
"""

from tooldeck.testing.exchanges import Exchange
from tooldeck.testing.request import SimMessage, SimRequest
from tooldeck.testing.rules import (
    Rule,
    after_tool,
    last_tool_result_contains,
    last_user_contains,
    rule,
)
from tooldeck.testing.simulator import ProviderSimulator, UnscriptedRequests
from tooldeck.testing.steps import Step, call, fail, reply

__all__ = [
    "Exchange",
    "ProviderSimulator",
    "Rule",
    "SimMessage",
    "SimRequest",
    "Step",
    "UnscriptedRequests",
    "after_tool",
    "call",
    "fail",
    "last_tool_result_contains",
    "last_user_contains",
    "reply",
    "rule",
]
