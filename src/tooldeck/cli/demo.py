"""The demo tools and agent that ``tooldeck demo`` runs offline on the local model."""

from __future__ import annotations

from typing import Literal

from tooldeck.models.base import Model, ModelSettings
from tooldeck.models.prices import ModelPrices
from tooldeck.run.agent import Agent
from tooldeck.run.policy import Limits
from tooldeck.tools.function import tool

_WEATHER = {
    "paris": (18, "light rain"),
    "tokyo": (24, "sunny"),
    "oslo": (4, "snow showers"),
    "new york": (21, "clear"),
}


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers.

    Args:
        left: The first number.
        right: The second number.
    """
    return left + right


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current weather in a city.

    Args:
        city: The city's name.
        unit: The temperature unit.
    """
    celsius, sky = _WEATHER.get(city.strip().lower(), (15, "cloudy"))
    if unit == "fahrenheit":
        return f"{city}: {round(celsius * 9 / 5 + 32)} °F, {sky}"
    return f"{city}: {celsius} °C, {sky}"


DEMO_PROMPTS = ("What is 17 plus 25?", "What's the weather like in Tokyo?")
"""What ``tooldeck demo`` asks when no prompt is given."""

DEMO_INSTRUCTIONS = "You are a helpful assistant. Use the tools to answer; keep answers short."


def demo_agent(model: Model | str = "local", prices: ModelPrices | None = None) -> Agent[None]:
    """The demo agent: ``add_numbers`` and ``get_weather`` on ``model`` (the local one by default).

    Its first turn must call a tool (``tool_choice="required"``; later turns choose
    freely): the default 270M base model seldom decides to call a tool on its own. It
    stops after four rounds with one last request for an answer, so it always answers.
    ``prices``: the model's own (``--price``), for a server whose price is not known.
    """
    return Agent(
        model,
        [add_numbers, get_weather],
        instructions=DEMO_INSTRUCTIONS,
        settings=ModelSettings(tool_choice="required", prices=prices),
        limits=Limits(max_rounds=4),
        on_limit="final_answer",
    )
