"""What the hosted providers' adapters share: a turn asked in one request, or read whole
from the provider's stream (``stream=True``: a server that only streams works too), and
priced (``tooldeck.models.prices``) as it leaves the adapter."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from tooldeck.messages import AssistantOutput, Message, ToolSpec
from tooldeck.models.base import Model, ModelSettings, StreamItem, final_output
from tooldeck.models.prices import priced


@dataclass(frozen=True, slots=True)
class Ask:
    """What one turn is asked with: the arguments of ``Model.complete``, kept together from
    ``ProviderModel`` to the adapter's wire format, which spells them as one request."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    settings: ModelSettings
    instructions: str


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
        output = await self._request_turn(Ask(messages, tools, settings, instructions))
        return priced(output, settings.prices, self.name)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AsyncGenerator[StreamItem, None]:
        """The turn as the provider streams it: chunks, then the whole turn, priced."""
        items = self._stream_turn(Ask(messages, tools, settings, instructions))
        try:
            async for item in items:
                if isinstance(item, AssistantOutput):
                    item = priced(item, settings.prices, self.name)
                yield item
        finally:
            await items.aclose()

    @abstractmethod
    async def _request_turn(self, ask: Ask) -> AssistantOutput:
        """The turn, asked in one request and answered whole."""

    @abstractmethod
    def _stream_turn(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The turn from the provider's stream: chunks, then the whole turn."""
