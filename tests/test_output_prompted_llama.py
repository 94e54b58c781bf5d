"""Typed answers against llama-cpp-python's own server, which refuses structured output.

The server (``python -m llama_cpp.server``, the Gemma 3 270M GGUF, see tests/_llama_server.py)
answers a ``json_schema`` response format with HTTP 500 ("Input should be 'text' or
'json_object'"). ``output_mode="auto"`` then asks once more with the schema in the
instructions, and remembers the model. The 270M model cannot write the JSON asked for (it
repeats the prompt), so its answer comes back as an ``error[invalid_output]`` observation
and the run stops (no output retries, to keep it short): what is proved here is that the
request after the refused one is served, and that the next run asks the prompted way at
once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import pytest
from pydantic import BaseModel

from _llama_server import llama_server
from tooldeck import Agent, ModelSettings, StopReason
from tooldeck.errors import LimitExceeded, ProviderError
from tooldeck.messages import AssistantOutput, Message, ToolSpec
from tooldeck.models.base import Model, StreamItem
from tooldeck.models.openai import OpenAIChatModel

pytestmark = pytest.mark.slow
__all__ = ["llama_server"]


class City(BaseModel):
    name: str


class Recording(Model):
    """The server's model, with each request's fate kept: (structured output asked, status)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.native_output = inner.native_output
        self.sent: list[tuple[bool, int]] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        structured = settings.output_schema is not None
        try:
            output = await self.inner.complete(messages, tools, settings, instructions)
        except ProviderError as error:
            self.sent.append((structured, error.status_code or 0))
            raise
        self.sent.append((structured, 200))
        return output

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AsyncGenerator[StreamItem, None]:
        yield await self.complete(messages, tools, settings, instructions)


async def test_auto_falls_back_to_prompted_answers_on_llama_cpp_server(llama_server: str) -> None:
    server_model = OpenAIChatModel("gemma-3-270m", base_url=llama_server, max_retries=0)
    model = Recording(server_model)
    settings = ModelSettings(temperature=0.0, max_tokens=160)
    agent = Agent(model, output_type=City, settings=settings, output_retries=0)
    try:
        with pytest.raises(LimitExceeded) as raised:
            await agent.run("Name the capital of France.")
        assert model.sent == [(True, 500), (False, 200)]
        result = raised.value.result
        assert result.stop_reason is StopReason.OUTPUT_RETRIES
        observations = [m.content for m in result.messages if m.role == "user"][1:]
        assert len(observations) == 1
        assert observations[0].startswith("error[invalid_output]: ")

        model.sent.clear()
        with pytest.raises(LimitExceeded):
            await agent.run("Name the capital of Italy.")
        assert model.sent == [(False, 200)]  # remembered: nothing refused
    finally:
        await server_model.aclose()
