"""What the hosted providers' adapters share: a turn asked in one request, or read whole
from the provider's stream (``stream=True``: a server that only streams works too)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

from tooldeck.messages import AssistantOutput, Message, ToolSpec
from tooldeck.models.base import Model, ModelSettings, final_output


class ProviderModel(Model):
    """A hosted provider's model (OpenAI, Anthropic, Gemini)."""

    def __init__(self, name: str, stream: bool) -> None:
        self.name = name
        self._stream = stream

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        if self._stream:
            return await final_output(
                self.name, self.stream(messages, tools, settings, instructions)
            )
        return await self._request_turn(messages, tools, settings, instructions)

    @abstractmethod
    async def _request_turn(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str,
    ) -> AssistantOutput:
        """The turn, asked in one request and answered whole."""
