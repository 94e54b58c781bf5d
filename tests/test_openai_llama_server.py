"""End to end: OpenAIChatModel against llama-cpp-python's own OpenAI-compatible server.

The server (``python -m llama_cpp.server``, not written here) runs the Gemma 3 270M GGUF on
127.0.0.1 with its ``chatml-function-calling`` chat format, which constrains a forced tool
call to the tool's JSON Schema. A tiny model on a CPU: the run forces the tool on its first
turn, then the loop's ``final_answer`` limit asks once more without tools, so each run is
exactly two requests.

Known limits of that chat format (not of tooldeck): it leaves ``tool`` messages out of the
prompt, so the model never reads the tool's result, and with tool_choice "none" the 270M
model closes with an empty text; ``tool_choice="required"`` is not implemented there (the
server answers HTTP 500).
"""

from __future__ import annotations

import pytest

from _llama_server import llama_server
from tooldeck import Agent, Limits, ModelSettings, RunResult, tool
from tooldeck.models.openai import OpenAIChatModel

pytestmark = pytest.mark.slow
__all__ = ["llama_server"]  # the fixture, shared with tests/test_eval_local.py


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. Paris.
    """
    return f"It is 18 degrees and sunny in {city}."


async def weather_run(base_url: str, stream: bool) -> RunResult:
    model = OpenAIChatModel("gemma-3-270m", base_url=base_url, stream=stream, max_retries=0)
    agent: Agent[None] = Agent(
        model,
        tools=[get_weather],
        instructions="You are a weather assistant. Answer in one short sentence.",
        settings=ModelSettings(tool_choice="get_weather", temperature=0.0, max_tokens=48),
        limits=Limits(max_rounds=1),
        on_limit="final_answer",
    )
    try:
        return await agent.run("What is the weather in Paris?")
    finally:
        await model.aclose()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_run_calls_the_tool_through_llama_cpp_server(
    llama_server: str, stream: bool
) -> None:
    result = await weather_run(llama_server, stream)

    (trace,) = result.tool_trace
    assert trace.call.name == "get_weather"
    assert trace.call.raw_arguments is None
    assert set(trace.call.arguments) == {"city"}
    city = trace.call.arguments["city"]
    assert isinstance(city, str)
    assert "paris" in city.lower()
    assert trace.result.ok
    assert trace.result.output == f"It is 18 degrees and sunny in {city}."
    assert trace.call.id.startswith("call_")

    roles = [message.role for message in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert result.messages[2].tool_call_id == trace.call.id
    # The server accepted the call and its result sent back, and closed the run without tools.
    assert result.stop_reason == "max_rounds"
    assert result.messages[-1].tool_calls == ()
    assert result.answer == result.messages[-1].content
    assert result.usage.requests == 2
    if stream:
        # llama-cpp-python's server sends no usage chunk in a stream.
        assert (result.usage.input_tokens, result.usage.output_tokens) == (0, 0)
    else:
        assert result.usage.input_tokens > 0
        assert result.usage.output_tokens > 0
