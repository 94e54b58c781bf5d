"""Typed answers asked for in the instructions, where a server refuses structured output.

``output_mode="auto"`` asks a model that has structured output for its typed answer that
way. Some OpenAI-compatible servers refuse such a request: llama.cpp's servers answer a
``json_schema`` response format with HTTP 500, others with 400. ``PromptedFallback`` wraps
the model for a run: a request carrying an output schema that the server refuses so is sent
once more without it, the schema written into the instructions instead (the answer is then
read from the model's text and validated as before). Once that worked, the model is
remembered: its later requests, in this run and in the next ones, go that way at once.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, Awaitable
from contextlib import aclosing, suppress
from dataclasses import replace
from typing import Any

from tooldeck.errors import ModelError, ProviderError
from tooldeck.messages import AssistantOutput
from tooldeck.models.base import Ask, Model, ModelSettings, StreamItem, answer_of, stream_of
from tooldeck.models.wrapper import WrapperModel
from tooldeck.run.output import prompted_instructions

REFUSED_STATUSES = frozenset({400, 422, 500, 501})
"""The HTTP statuses a server answers a request it cannot serve with (llama.cpp's: 500)."""

_refusing: weakref.WeakSet[Model] = weakref.WeakSet()
"""Models whose server refused structured output and answered a prompted request."""


class PromptedFallback(WrapperModel):
    """The wrapped model, asked for a typed answer in its instructions once its server
    refused the structured output (``settings.output_schema``) of a request."""

    def __init__(self, inner: Model, schema: dict[str, Any]) -> None:
        super().__init__(inner)
        self._schema = schema

    async def answer(self, ask: Ask) -> AssistantOutput:
        """The model's turn; asked the prompted way once the server refused structured output."""
        if ask.settings.output_schema is None:
            return await answer_of(self.wrapped, ask)
        if _refuses(self.wrapped):
            return await answer_of(self.wrapped, self._prompted(ask))
        try:
            return await answer_of(self.wrapped, ask)
        except ProviderError as error:
            if error.status_code not in REFUSED_STATUSES:
                raise
            refusal = error
        output = await _after(refusal, answer_of(self.wrapped, self._prompted(ask)))
        _remember(self.wrapped)
        return output

    async def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """``answer`` as chunks, with the same fallback while nothing has reached the caller."""
        sent, refused = ask, False
        if ask.settings.output_schema is not None and _refuses(self.wrapped):
            sent = self._prompted(ask)
        elif ask.settings.output_schema is not None:
            async with aclosing(stream_of(self.wrapped, ask)) as items:
                first = await _first(items)
                if first is not None:  # the server takes structured output
                    yield first
                    async for item in items:
                        yield item
                    return
            sent, refused = self._prompted(ask), True
        async with aclosing(stream_of(self.wrapped, sent)) as items:
            async for item in items:
                yield item
        if refused:
            _remember(self.wrapped)

    def _prompted(self, ask: Ask) -> Ask:
        """``ask`` without its output schema, the schema written into its instructions."""
        settings = replace(ask.settings, output_schema=None)
        return replace(
            ask,
            settings=settings,
            instructions=prompted_instructions(ask.instructions, self._schema),
        )


async def _first(items: AsyncGenerator[StreamItem, None]) -> StreamItem | None:
    """The stream's first item, or None when the server refused its structured output."""
    try:
        return await anext(items)
    except ProviderError as error:
        if error.status_code not in REFUSED_STATUSES:
            raise
        return None


async def _after(refusal: ProviderError, request: Awaitable[AssistantOutput]) -> AssistantOutput:
    """The prompted request's answer; its failure says the structured one was refused."""
    try:
        output = await request
    except ModelError as error:
        error.add_note(f"(sent without structured output, which the server refused: {refusal})")
        raise
    return output


def _remember(model: Model) -> None:
    with suppress(TypeError):  # not weakly referenceable or hashable: each run finds out
        _refusing.add(model)


def _refuses(model: Model) -> bool:
    """True once the model's server refused structured output and took a prompted request."""
    try:
        return model in _refusing
    except TypeError:  # not hashable
        return False


class ForcedCallHint(WrapperModel):
    """The wrapped model, for a typed answer asked for with the final_answer tool: a server that
    refuses the request forcing that call is told of ``output_mode="prompted"``."""

    async def answer(self, ask: Ask) -> AssistantOutput:
        """The model's turn; a refusal of a forced call says what else to try."""
        try:
            return await answer_of(self.wrapped, ask)
        except ProviderError as error:
            raise _hinted(error, ask.settings) from None

    async def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """``answer`` as chunks."""
        try:
            async with aclosing(stream_of(self.wrapped, ask)) as items:
                async for item in items:
                    yield item
        except ProviderError as error:
            raise _hinted(error, ask.settings) from None


FORCED_CALL_REFUSED = (
    "(the request forced a call of the final_answer tool, which asks for the typed answer; "
    "some servers refuse forced tool calls: output_mode='prompted' asks for it in the "
    "instructions instead)"
)
"""The note a refusal of a forced final_answer call carries."""


def _hinted(error: ProviderError, settings: ModelSettings) -> ProviderError:
    if error.status_code in REFUSED_STATUSES and settings.forces_a_call:
        error.add_note(FORCED_CALL_REFUSED)
    return error
