"""The model interface every adapter implements, and the per-request settings."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from tooldeck.contracts import AssistantOutput, Message, ToolSpec

ToolChoice = Literal["auto", "required", "none"] | str
"""``auto``: the model decides; ``required``: it must call some tool; ``none``: it must answer;
any other string: it must call the tool of that name."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Knobs for one model request. ``None`` leaves the provider's default."""

    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    output_schema: ToolSpec | None = None
    """When set, the answer must be JSON that fits ``output_schema.parameters`` (set by
    ``Agent(output_type=...)`` for models whose ``native_output`` is True)."""

    def with_tool_choice(self, tool_choice: ToolChoice) -> ModelSettings:
        return replace(self, tool_choice=tool_choice)

    @property
    def forces_a_call(self) -> bool:
        """True when the model is not free to answer without calling a tool."""
        return self.tool_choice not in ("auto", "none")


class Model(ABC):
    """A chat model that can call tools. Adapters convert to and from the provider's format."""

    name: str = "model"
    native_output: bool = False
    """True when the adapter honours ``settings.output_schema`` (the provider's structured
    output, a grammar); otherwise a typed answer is asked for through a final_answer tool."""

    @abstractmethod
    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        """Ask the model for its next turn.

        Args:
            messages: The conversation so far, oldest first. Do not keep a reference:
                the loop appends to it after the call.
            tools: The tools the model may call.
            settings: Tool choice and sampling options for this request.
            instructions: The system prompt, sent where the provider expects it.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to close by default
        """Release clients or weights the model holds."""
