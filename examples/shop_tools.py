"""A shop's tools, for the command-line examples (docs/cli.md and the README).

    tooldeck run "What do 3 apples cost in dollars?" --tools examples/shop_tools.py \
        --deps examples/shop_tools.py:open_shop --model openai-chat:gpt-4.1-mini

``--deps`` builds the run's deps with ``open_shop()``; the tools read them from
``RunContext``. ``price`` raises KeyError for an item the shop does not sell: the command
line shows the exception on the call's line (the traceback with ``-v``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tooldeck import RunContext, tool


@dataclass
class Shop:
    """What the tools work with: the prices (in euros) and the exchange rates."""

    prices: dict[str, float] = field(default_factory=lambda: {"apple": 0.5, "bread": 2.4})
    rates: dict[str, float] = field(default_factory=lambda: {"USD": 1.1, "GBP": 0.85})


def open_shop() -> Shop:
    """The deps factory: ``--deps examples/shop_tools.py:open_shop``."""
    return Shop()


@tool
def price(ctx: RunContext[Shop], item: str, quantity: int = 1) -> float:
    """The price in euros of some of an item.

    Args:
        item: What to buy, e.g. "apple".
        quantity: How many.
    """
    return round(ctx.deps.prices[item] * quantity, 2)


@tool
def convert(ctx: RunContext[Shop], euros: float, to: Literal["USD", "GBP"]) -> float:
    """Convert an amount of euros to another currency.

    Args:
        euros: The amount in euros.
        to: The currency to convert to.
    """
    return round(euros * ctx.deps.rates[to], 2)
