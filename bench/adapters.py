"""What each model adapter's conversion costs per round, without the network.

    .venv/bin/python bench/adapters.py            # medians of 7 repeats
    .venv/bin/python bench/adapters.py --quick    # tiny counts (CI smoke)

One round of an adapter is what it does around the HTTP call: build the request body
from the conversation, the two tools and the settings, then turn the provider's response
(already parsed into the SDK's own objects, as the SDK hands it over) into an
AssistantOutput. The response is the same turn for every provider: a short text and two
parallel calls. Each figure is measured with the conversation at 1 and at 10 earlier tool
rounds (every request carries the whole conversation, so building grows with it). Not
included: the SDK's own work (its request validation and serialization, HTTP, JSON
decoding), which depends on the SDK, not on tooldeck.

The clock is the process's CPU time (``time.process_time``): the work is synchronous and
CPU-bound, so on a quiet machine it equals the wall time, and on a shared, loaded machine
it leaves out the time the process waited for a core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from tooldeck import AssistantOutput, Message, ModelSettings, ToolCall, ToolSpec, tool
from tooldeck.models.anthropic import _request as anthropic_request
from tooldeck.models.anthropic import _response as anthropic_response
from tooldeck.models.base import Ask
from tooldeck.models.gemini import _request as gemini_request
from tooldeck.models.gemini import _response as gemini_response
from tooldeck.models.openai import _chat as chat
from tooldeck.models.openai import _responses as responses

HISTORIES = (1, 10)
SETTINGS = ModelSettings()
INSTRUCTIONS = "Be brief."
Round = Callable[[Sequence[Message]], AssistantOutput]


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers.

    Args:
        left: The first number.
        right: The second number.
    """
    return left + right


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: The city, e.g. "Oslo".
        unit: "celsius" or "fahrenheit".
    """
    return f"18 degrees in {city}"


TOOLS: list[ToolSpec] = [add_numbers.spec, get_weather.spec]


def conversation(rounds: int) -> list[Message]:
    """A user prompt, then ``rounds`` turns of two parallel calls and their results."""
    messages = [Message.user("Add the numbers and check the weather in Oslo.")]
    for index in range(rounds):
        calls = (
            ToolCall(
                id=f"call_{index}_a", name="add_numbers", arguments={"left": index, "right": 1}
            ),
            ToolCall(id=f"call_{index}_b", name="get_weather", arguments={"city": "Oslo"}),
        )
        messages.append(Message.assistant(AssistantOutput(content="Checking.", tool_calls=calls)))
        messages.append(Message.tool(calls[0].id, str(index + 1)))
        messages.append(Message.tool(calls[1].id, "18 degrees in Oslo"))
    return messages


def openai_chat_round() -> Round:
    from openai.types.chat import ChatCompletion

    calls = [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "add_numbers", "arguments": '{"left": 2, "right": 3}'},
        },
        {
            "id": "call_b",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        },
    ]
    message = {"role": "assistant", "content": "Checking.", "tool_calls": calls}
    completion = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1741476542,
            "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27},
        }
    )
    parts = chat.RequestParts("gpt-4.1-mini")

    def run(messages: Sequence[Message]) -> AssistantOutput:
        chat.build_request(parts, Ask(messages, TOOLS, SETTINGS, INSTRUCTIONS))
        return chat.to_output("openai-chat:m", chat.turn_from_completion("m", completion))

    return run


def openai_responses_round() -> Round:
    from openai.types.responses import Response

    def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
        item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
        return {**item, "id": f"fc_{call_id}", "status": "completed"}

    text = {"type": "output_text", "text": "Checking.", "annotations": []}
    message = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [text],
    }
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1741476542,
            "status": "completed",
            "model": "gpt-4.1-mini",
            "output": [
                message,
                call("call_a", "add_numbers", '{"left": 2, "right": 3}'),
                call("call_b", "get_weather", '{"city": "Oslo"}'),
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 20,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": 7,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 27,
            },
        }
    )
    parts = responses.RequestParts("gpt-4.1-mini")

    def run(messages: Sequence[Message]) -> AssistantOutput:
        items = responses.input_items(messages)
        responses.build_request(parts, items, TOOLS, SETTINGS, INSTRUCTIONS)
        return responses.parse_response("openai:m", response)

    return run


def anthropic_round() -> Round:
    from anthropic.types import Message as AnthropicMessage

    content = [
        {"type": "text", "text": "Checking."},
        {
            "type": "tool_use",
            "id": "toolu_a",
            "name": "add_numbers",
            "input": {"left": 2, "right": 3},
        },
        {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    message = AnthropicMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5",
            "content": content,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 20, "output_tokens": 7},
        }
    )
    parts = anthropic_request.RequestParts("claude-sonnet-5", 4096)

    def run(messages: Sequence[Message]) -> AssistantOutput:
        request = anthropic_request.build_request(
            parts, Ask(messages, TOOLS, SETTINGS, INSTRUCTIONS)
        )
        anthropic_request.split_request(request)
        turn = anthropic_response.turn_from_message("anthropic:m", message)
        return anthropic_response.to_output("anthropic:m", turn)

    return run


def gemini_round() -> Round:
    from google.genai.types import GenerateContentResponse

    parts_out = [
        {"text": "Checking."},
        {"functionCall": {"name": "add_numbers", "args": {"left": 2, "right": 3}}},
        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
    ]
    response = GenerateContentResponse.model_validate(
        {
            "candidates": [
                {"content": {"role": "model", "parts": parts_out}, "finishReason": "STOP"}
            ],
            "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 7},
        }
    )
    parts = gemini_request.RequestParts("gemini-2.5-flash")
    names = gemini_request.callable_names(TOOLS, SETTINGS)

    def run(messages: Sequence[Message]) -> AssistantOutput:
        gemini_request.build_request(parts, Ask(messages, TOOLS, SETTINGS, INSTRUCTIONS))
        turn = gemini_response.turn_from_response(response, "call_9_")
        return gemini_response.to_output("gemini:m", turn, names)

    return run


ADAPTERS: dict[str, Callable[[], Round]] = {
    "OpenAIChatModel": openai_chat_round,
    "OpenAIResponsesModel": openai_responses_round,
    "AnthropicModel": anthropic_round,
    "GeminiModel": gemini_round,
}


def median_us(run: Round, messages: Sequence[Message], iterations: int, repeats: int) -> float:
    for _ in range(max(1, iterations // 10)):
        run(messages)  # warm caches (pydantic, imports)
    samples = []
    for _ in range(repeats):
        started = time.process_time()
        for _ in range(iterations):
            run(messages)
        samples.append((time.process_time() - started) / iterations)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny counts: proves it runs")
    options = parser.parse_args()
    iterations, repeats = (20, 1) if options.quick else (2000, 7)
    figures: dict[str, dict[str, float]] = {}
    for name, make in ADAPTERS.items():
        run = make()
        assert len(run(conversation(1)).tool_calls) == 2, name
        figures[name] = {
            f"{rounds} rounds": median_us(run, conversation(rounds), iterations, repeats)
            for rounds in HISTORIES
        }
    header = "adapter".ljust(22) + "".join(f"{rounds} rounds µs".rjust(16) for rounds in HISTORIES)
    print(header)
    for name, values in figures.items():
        print(name.ljust(22) + "".join(f"{value:16.1f}" for value in values.values()))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
