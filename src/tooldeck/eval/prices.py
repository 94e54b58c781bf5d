"""What a case cost, from the model's token counts and genai-prices' price list.

genai-prices is imported when a price is first asked for (it is in the ``eval`` extra);
without it, or for a model it does not know (a local one), the cost is None: unknown.
"""

from __future__ import annotations

from tooldeck.messages import Usage

_PROVIDERS = {
    "openai": "openai",
    "openai-chat": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "gemini": "google",
}
"""tooldeck's model-string prefix -> genai-prices' provider id."""


def price_of(model: str, usage: Usage) -> float | None:
    """US dollars for ``usage`` on ``model`` (a model string or name); None when unknown."""
    prefix, colon, name = model.partition(":")
    if not colon:
        provider, name = None, model
    elif prefix in _PROVIDERS:
        provider = _PROVIDERS[prefix]
    else:
        return None  # a local model, or a name genai-prices cannot place
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
