"""What a model response cost in US dollars: the user's own prices, or genai-prices' list.

genai-prices (the price list Pydantic AI uses) is imported when a price is first asked for;
without it, or for a model it does not know, the cost is None: unknown, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from tooldeck.messages import AssistantOutput, Usage

_PROVIDERS = {
    "openai": "openai",
    "openai-chat": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "gemini": "google",
}
"""tooldeck's model-string prefix -> genai-prices' provider id."""


@dataclass(frozen=True, slots=True)
class ModelPrices:
    """Your own prices for a model, in US dollars per million tokens
    (``ModelSettings(prices=ModelPrices(...))``): they win over genai-prices' list."""

    input_per_million: float
    """Dollars per million input tokens."""
    output_per_million: float
    """Dollars per million output tokens."""

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"ModelPrices.{name} must be a number >= 0, got {value!r}")

    def cost(self, usage: Usage) -> float:
        """US dollars for ``usage`` at these prices."""
        return (
            usage.input_tokens * self.input_per_million
            + usage.output_tokens * self.output_per_million
        ) / 1_000_000


def price_of(model: str, usage: Usage) -> float | None:
    """US dollars for ``usage`` on ``model`` (a model string such as ``"openai:gpt-4.1"``, or a
    bare name) from genai-prices; None when unknown (a local model, a name it cannot place,
    or genai-prices not installed)."""
    prefix, colon, name = model.partition(":")
    if not colon:
        provider, name = None, model
    elif prefix in _PROVIDERS:
        provider = _PROVIDERS[prefix]
    else:
        return None
    try:
        from genai_prices import Usage as PricedUsage
        from genai_prices import calc_price
    except ImportError:
        return None
    counted = PricedUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    try:
        return float(calc_price(counted, name, provider_id=provider).total_price)
    except LookupError:
        return None


def with_cost(output: AssistantOutput, cost: float | None) -> AssistantOutput:
    """``output`` with its usage's ``cost_usd`` set (unchanged without usage)."""
    usage = output.usage
    if usage is None or cost is None:
        return output
    return output.model_copy(update={"usage": usage.model_copy(update={"cost_usd": cost})})


def priced(
    output: AssistantOutput, prices: ModelPrices | None, model: str | None
) -> AssistantOutput:
    """``output`` with its cost: at ``prices`` when given, else genai-prices' for ``model``
    (a model string; None for a model that costs nothing, such as the local one)."""
    usage = output.usage
    if usage is None or usage.cost_usd is not None:
        return output
    if prices is not None:
        return with_cost(output, prices.cost(usage))
    if model is None:
        return with_cost(output, 0.0)
    return with_cost(output, price_of(model, usage))
