"""``WrapperModel``: a model that wraps another and passes through all it does not change.

Fallback, retries, tracing, durable steps and the typed-answer fallbacks are each a model
around a model. Each subclasses ``WrapperModel`` and overrides only what it changes; every
other member of ``Model`` reaches ``wrapped`` from here, so a member added to ``Model`` is
passed through in this one place (tests/test_wrapper_model.py fails until it is).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Coroutine, Sequence
from typing import Any

from tooldeck.messages import AssistantOutput, Message
from tooldeck.models.base import Ask, AskModel, Model, StreamItem, answer_of, stream_of


class WrapperModel(AskModel):
    """``wrapped``, with what a subclass overrides changed and everything else passed through.

    ``name`` and ``native_output`` are the wrapped model's (a subclass may set its own after
    ``super().__init__``); ``complete``, ``stream``, ``count_tokens`` and ``aclose`` are
    the wrapped model's own. Override ``complete`` to change a request (or ``answer``, which
    takes the request as one ``Ask``: tooldeck's own wrappers do); override ``stream`` (or
    ``stream_answer``) too if the change must hold when a run streams
    (``Agent.stream(deltas=True)`` asks with ``stream``, which otherwise goes straight to
    the wrapped model).

    Example:
        >>> from tooldeck import AssistantOutput, ScriptedModel
        >>> class Polite(WrapperModel):
        ...     async def complete(self, messages, tools, settings, instructions=""):
        ...         instructions = instructions + " Be polite."
        ...         return await self.wrapped.complete(messages, tools, settings, instructions)
        >>> model = Polite(ScriptedModel([AssistantOutput(content="Hello")]))
        >>> model.name
        'scripted'
    """

    def __init__(self, wrapped: Model) -> None:
        self.wrapped = wrapped
        """The model every request not overridden goes to."""
        self.name = wrapped.name
        self.native_output = wrapped.native_output

    # The pass-throughs return the wrapped model's own coroutine or generator rather than
    # awaiting it in one of their own: passing a request through adds no frame to it. The
    # request's Ask goes on as it is to a wrapped AskModel; any other model is asked
    # through its own complete/stream.

    def answer(self, ask: Ask) -> Coroutine[Any, Any, AssistantOutput]:
        """The wrapped model's turn."""
        return answer_of(self.wrapped, ask)

    def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The wrapped model's stream."""
        return stream_of(self.wrapped, ask)

    def count_tokens(self, messages: Sequence[Message]) -> Coroutine[Any, Any, int]:
        """The wrapped model's count."""
        return self.wrapped.count_tokens(messages)

    def aclose(self) -> Coroutine[Any, Any, None]:
        """Close the wrapped model."""
        return self.wrapped.aclose()
