"""The model interface every adapter implements, and the per-request settings.

``Model`` is the public interface: ``complete``/``stream`` with a request's four arguments.
tooldeck's own models (the providers', the local one, the scripted one, every
``WrapperModel``) are ``AskModel``s: the four arguments are packed once into an ``Ask``
here, and each model overrides ``answer(ask)``/``stream_answer(ask)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass, replace
from types import MethodType
from typing import Any, Literal

from tooldeck.errors import ModelError
from tooldeck.messages import SEARCH_TOOL as SEARCH_TOOL  # re-exported: the local model reads it
from tooldeck.messages import AssistantOutput, Message, ToolSpec
from tooldeck.models.prices import ModelPrices


@dataclass(frozen=True, slots=True)
class NativeToolSearch:
    """Deferred tools a provider's own tool search may search, in place of a local one."""

    strategy: Literal["bm25", "regex"]
    """The provider's search to ask for, where it offers a choice (Anthropic)."""
    deferred: tuple[ToolSpec, ...]
    """The tools not revealed yet: sent with ``defer_loading: true``."""
    local_tool: str
    """The name of the local search tool among the request's tools: left out when native."""


ToolChoice = Literal["auto", "required", "none"] | str
"""``auto``: the model decides; ``required``: it must call some tool; ``none``: it must answer;
any other string: it must call the tool of that name."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Knobs for one model request. ``None`` leaves the provider's default."""

    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool | None = None
    """Whether one turn may make several calls. None: the model's default — the provider's
    for a hosted model (the OpenAI and Anthropic adapters send nothing, and both APIs allow
    several; Gemini has no such switch, so nothing is sent for any value), and for
    ``LocalModel`` its ``parallel_tool_calls`` option (one call per turn unless set)."""
    temperature: float | None = None
    max_tokens: int | None = None
    output_schema: ToolSpec | None = None
    """When set, the answer must be JSON that fits ``output_schema.parameters`` (set by
    ``Agent(output_type=...)`` for models whose ``native_output`` is True)."""
    prices: ModelPrices | None = None
    """Your own prices for the model: each response's ``usage.cost_usd`` is computed with
    them instead of genai-prices' list (hosted models) or 0 (the local model)."""
    tool_search: NativeToolSearch | None = None
    """Set by ``ToolSearch``: an adapter whose provider searches tools itself (Anthropic,
    OpenAI Responses) sends its own search tool and these deferred tools with
    ``defer_loading`` in place of the local search tool; any other sends the tools as given."""

    def with_tool_choice(self, tool_choice: ToolChoice) -> ModelSettings:
        """These settings with another ``tool_choice`` (the rest unchanged)."""
        return replace(self, tool_choice=tool_choice)

    @property
    def forces_a_call(self) -> bool:
        """True when the model is not free to answer without calling a tool."""
        return self.tool_choice not in ("auto", "none")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """Text the model has just written (the loop yields it as a ``TextDelta`` event)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """A piece of a tool call the model is writing (the loop yields it as ``ToolCallDelta``)."""

    index: int
    """The call's position in the turn: ``output.tool_calls[index]`` once the turn is whole."""
    call_id: str
    """The call's id, or ``""`` while the provider has not sent it yet."""
    name: str
    """The tool's name, or ``""`` while the provider has not sent it yet."""
    arguments: str
    """The next piece of the arguments' JSON text (``""`` when a chunk only names the call)."""


StreamItem = TextChunk | ToolCallChunk | AssistantOutput
"""What ``Model.stream()`` yields: chunks while the model writes, then the whole turn."""


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

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AsyncGenerator[StreamItem, None]:
        """Ask for the next turn, yielding its text and call chunks as they are written.

        The last item is the complete turn, the same AssistantOutput ``complete()`` returns.
        Closing the generator early (``aclose()``) ends the request. The default yields
        no chunks: it awaits ``complete()``; adapters that can stream override it with an
        async generator.
        """
        yield await self.complete(messages, tools, settings, instructions)

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        """How many tokens ``messages`` take in this model's prompt (history strategies use it).

        The default is an estimate, not a tokenizer: four characters a token (the common
        rule for English text; other scripts take more tokens) of each message's text, its
        calls' names and arguments, plus four tokens a message for the framing. An adapter
        with a tokenizer overrides it (LocalModel counts with llama.cpp's).
        """
        return sum(estimate_tokens(message) for message in messages)

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to close by default
        """Release clients or weights the model holds."""


@dataclass(frozen=True, slots=True)
class Ask:
    """One request to a model: the four arguments of ``Model.complete``, packed once by
    ``AskModel`` and passed as one from wrapper to wrapper to the adapter's wire format."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    settings: ModelSettings
    instructions: str


class AskModel(Model):
    """A ``Model`` that takes each request as one ``Ask``: tooldeck's own models subclass it
    and override ``answer`` (and ``stream_answer`` when they stream).

    ``complete`` and ``stream`` keep ``Model``'s public signature, declared here once: they
    pack their arguments into an ``Ask`` and return ``answer``'s coroutine or
    ``stream_answer``'s generator (no frame of their own). A subclass may still override
    ``complete`` or ``stream`` as any ``Model`` does; ``answer_of`` and ``stream_of`` then
    call those.
    """

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> Coroutine[Any, Any, AssistantOutput]:
        """The model's turn: ``answer`` to these arguments as one ``Ask``."""
        return self.answer(Ask(messages, tools, settings, instructions))

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AsyncGenerator[StreamItem, None]:
        """The model's turn as it is written: ``stream_answer`` to these arguments."""
        return self.stream_answer(Ask(messages, tools, settings, instructions))

    @abstractmethod
    async def answer(self, ask: Ask) -> AssistantOutput:
        """The model's turn for ``ask`` (what ``Model.complete`` returns)."""

    async def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The turn's chunks, then the turn. The default, as ``Model.stream``'s: no chunks,
        only the turn (through ``complete`` when a subclass overrides it)."""
        yield await answer_of(self, ask)


def answer_of(model: Model, ask: Ask) -> Coroutine[Any, Any, AssistantOutput]:
    """``model``'s turn for ``ask``: straight to ``answer`` when its ``complete`` is
    ``AskModel``'s (the Ask is not packed again), otherwise through its own ``complete``:
    a user's model, or one that overrides ``complete``, is asked as it was written."""
    complete = model.complete
    if _unchanged(complete, AskModel.complete) and isinstance(model, AskModel):
        return model.answer(ask)
    return complete(ask.messages, ask.tools, ask.settings, ask.instructions)


def stream_of(model: Model, ask: Ask) -> AsyncGenerator[StreamItem, None]:
    """``model``'s stream for ``ask``, as ``answer_of`` gives its turn."""
    stream = model.stream
    if _unchanged(stream, AskModel.stream) and isinstance(model, AskModel):
        return model.stream_answer(ask)
    return stream(ask.messages, ask.tools, ask.settings, ask.instructions)


def _unchanged(method: object, declared: object) -> bool:
    """True when ``method`` is ``declared`` bound to its model: overridden neither by the
    model's class nor on the model itself."""
    return type(method) is MethodType and method.__func__ is declared


async def final_output(model: str, items: AsyncIterator[StreamItem]) -> AssistantOutput:
    """Read a ``Model.stream()`` to its end and return the turn it ends with."""
    last: StreamItem | None = None
    async for item in items:
        last = item
    if not isinstance(last, AssistantOutput):
        raise ModelError(f"{model}: the stream ended before the model's turn was complete")
    return last


def estimate_tokens(message: Message) -> int:
    """About how many tokens one message takes: its characters / 4, rounded up, plus 4."""
    characters = len(message.content)
    for call in message.tool_calls:
        characters += len(call.name) + len(call.arguments_json)
    return 4 + -(-characters // 4)
