"""The demo tools and agent that ``tooldeck demo`` runs offline on the local model."""

from __future__ import annotations

from typing import Literal

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
