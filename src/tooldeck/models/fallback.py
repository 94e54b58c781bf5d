"""Models that survive a failing provider: ``FallbackModel`` (the next model takes the request)
and ``RetryingModel`` (the same model again, after a pause, by a ``RetryPolicy``).

Both follow one rule: a request is tried again only when nothing of it reached the caller.
A stream that already yielded chunks is never restarted silently: it ends with its error.
The answer says which model wrote it (``AssistantOutput.model``), so the run's trace and run
log record which model answered each round.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from tooldeck.errors import ModelError, ModelRateLimited, ModelUnavailable
from tooldeck.messages import AssistantOutput
from tooldeck.models.base import Ask, Model, StreamItem, answer_of, stream_of
from tooldeck.models.wrapper import WrapperModel

ErrorKinds = tuple[type[ModelError], ...]

TRANSIENT: ErrorKinds = (ModelRateLimited, ModelUnavailable)
"""The failures worth another try: rate limited, overloaded or unavailable (HTTP 429, 5xx,
529), timed out, unreachable."""


def _answered_by(model: Model, item: StreamItem) -> StreamItem:
    if isinstance(item, AssistantOutput) and item.model is None:
        return item.model_copy(update={"model": model.name})
    return item


class FallbackModel(WrapperModel):
    """The first model that answers: the next one takes the request when one fails with a
    listed kind of ``ModelError``. It wraps the primary model (``wrapped``), whose token
    count it gives.

    Args:
        primary: The model asked first.
        *others: The models asked next, in order.
        on: The failures that pass the request on (default: ``TRANSIENT``); any other
            failure ends the request at once.

    Example:
        >>> from tooldeck import AssistantOutput, ScriptedModel
        >>> model = FallbackModel(ScriptedModel([]), ScriptedModel([AssistantOutput()]))
        >>> model.name
        'fallback:scripted,scripted'
    """

    def __init__(self, primary: Model, *others: Model, on: ErrorKinds = TRANSIENT) -> None:
        if not others:
            raise ValueError("FallbackModel needs at least two models: the primary and another")
        self.models = (primary, *others)
        for model in self.models:
            if not isinstance(model, Model):
                raise TypeError(f"FallbackModel takes Model objects, got {model!r}")
        _check_kinds("FallbackModel", on)
        super().__init__(primary)
        self.on = on
        self.name = "fallback:" + ",".join(model.name for model in self.models)
        self.native_output = all(model.native_output for model in self.models)

    async def answer(self, ask: Ask) -> AssistantOutput:
        """The first answer of the models in order (each failure noted on the last one)."""
        failures: list[str] = []
        for model in self.models:
            try:
                output = await answer_of(model, ask)
            except self.on as error:
                failures.append(f"{model.name}: {type(error).__name__}: {error}")
                if model is self.models[-1]:
                    error.add_note("every model failed: " + "; ".join(failures))
                    raise
                continue
            answer = _answered_by(model, output)
            assert isinstance(answer, AssistantOutput)
            return answer
        raise AssertionError("unreachable: the last model returns or raises")

    async def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The first model's stream that starts; once one has yielded, its failure ends it."""
        for model in self.models:
            started = False
            items = stream_of(model, ask)
            try:
                async for item in items:
                    started = True
                    yield _answered_by(model, item)
                return
            except self.on:
                if started or model is self.models[-1]:
                    raise
            finally:
                await items.aclose()

    async def aclose(self) -> None:
        """Close every model."""
        for model in self.models:
            await model.aclose()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When a failed request is tried again (``RetryingModel``), on top of an SDK's own
    retries."""

    max_attempts: int = 3
    """Attempts in all, the first included."""
    backoff: float | Callable[[int], float] = 0.5
    """Seconds before the second attempt, doubling after each (a float), or a function of
    the attempt that failed (1, 2, ...) giving the seconds to wait."""
    retry_on: ErrorKinds = TRANSIENT
    """The failures worth another attempt; any other ends the request at once."""

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts!r}")
        if not callable(self.backoff) and self.backoff < 0:
            raise ValueError(f"RetryPolicy.backoff must be >= 0 seconds, got {self.backoff!r}")
        _check_kinds("RetryPolicy.retry_on", self.retry_on)

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after attempt ``failed_attempt`` (1, 2, ...) failed."""
        if callable(self.backoff):
            return float(self.backoff(failed_attempt))
        return float(self.backoff * 2 ** (failed_attempt - 1))


class RetryingModel(WrapperModel):
    """``model`` with its failed requests tried again by ``policy``: only when nothing of the
    request reached the caller (a stream that yielded chunks ends with its error).

    Example:
        >>> from tooldeck import ScriptedModel
        >>> RetryingModel(ScriptedModel([]), RetryPolicy(max_attempts=5)).name
        'scripted'
    """

    def __init__(self, model: Model, policy: RetryPolicy | None = None) -> None:
        super().__init__(model)
        self.policy = policy or RetryPolicy()

    @property
    def model(self) -> Model:
        """The model asked (``wrapped``, by the name this class has always given it)."""
        return self.wrapped

    async def answer(self, ask: Ask) -> AssistantOutput:
        """The model's answer, asked again after each failure the policy retries."""
        policy = self.policy
        for attempt in range(1, policy.max_attempts + 1):
            try:
                return await answer_of(self.wrapped, ask)
            except policy.retry_on as error:
                if attempt == policy.max_attempts:
                    error.add_note(f"failed {attempt} times (RetryPolicy.max_attempts)")
                    raise
                await asyncio.sleep(policy.delay(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The model's stream, started again after a failure before its first chunk."""
        policy = self.policy
        for attempt in range(1, policy.max_attempts + 1):
            started = False
            items = stream_of(self.wrapped, ask)
            try:
                async for item in items:
                    started = True
                    yield item
                return
            except policy.retry_on:
                if started or attempt == policy.max_attempts:
                    raise
            finally:
                await items.aclose()
            await asyncio.sleep(policy.delay(attempt))


def _check_kinds(where: str, kinds: object) -> None:
    valid = isinstance(kinds, tuple) and all(
        isinstance(kind, type) and issubclass(kind, ModelError) for kind in kinds
    )
    if not valid or not kinds:
        raise TypeError(
            f"{where} takes a tuple of ModelError classes (e.g. (ModelRateLimited, "
            f"ModelUnavailable)), got {kinds!r}"
        )
