"""ScriptedModel: a test double that replays outputs and records every request it receives."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from tooldeck.errors import ScriptExhausted
from tooldeck.messages import AssistantOutput, Message, ToolSpec
from tooldeck.models.base import Ask, AskModel, ModelSettings
from tooldeck.models.prices import priced


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the model received it (a snapshot: later turns do not change it)."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    settings: ModelSettings
    instructions: str

    @property
    def tool_names(self) -> list[str]:
        return [spec.name for spec in self.tools]


ScriptedOutput = (
    AssistantOutput
    | Callable[[RecordedRequest], AssistantOutput]
    | Callable[[RecordedRequest], Awaitable[AssistantOutput]]
)


class ScriptedModel(AskModel):
    """Replays ``outputs`` one per request; a callable entry is called with the request.

    Examples:
        >>> from tooldeck import AssistantOutput, ScriptedModel
        >>> model = ScriptedModel([AssistantOutput(content="Hello!")])
    """

    name = "scripted"

    def __init__(self, outputs: Iterable[ScriptedOutput]) -> None:
        self._outputs: list[ScriptedOutput] = list(outputs)
        self.requests: list[RecordedRequest] = []
        """Every request received, in order."""

    @property
    def remaining(self) -> int:
        """Scripted outputs not used yet."""
        return len(self._outputs) - len(self.requests)

    async def answer(self, ask: Ask) -> AssistantOutput:
        """The next scripted output; the request is recorded in ``requests``."""
        messages, settings = ask.messages, ask.settings
        request = RecordedRequest(tuple(messages), tuple(ask.tools), settings, ask.instructions)
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self._outputs):
            raise ScriptExhausted(
                f"ScriptedModel has {len(self._outputs)} scripted outputs and was asked for "
                f"output #{index + 1}; add an output for this request (last message: "
                f"{_describe_last(messages)})"
            )
        scripted = self._outputs[index]
        if isinstance(scripted, AssistantOutput):
            return scripted if settings.prices is None else priced(scripted, settings.prices, None)
        produced = scripted(request)
        if inspect.isawaitable(produced):
            produced = await produced
        if not isinstance(produced, AssistantOutput):
            raise TypeError(
                f"scripted output #{index + 1} returned {type(produced).__name__}, "
                "expected an AssistantOutput"
            )
        return produced if settings.prices is None else priced(produced, settings.prices, None)


def _describe_last(messages: Sequence[Message]) -> str:
    if not messages:
        return "none"
    last = messages[-1]
    text = last.content if len(last.content) <= 60 else last.content[:57] + "..."
    return f"{last.role} {text!r}"
