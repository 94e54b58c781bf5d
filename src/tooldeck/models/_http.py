"""An HTTP error status from a provider -> the tooldeck ModelError that says what happened.

Shared by the OpenAI, Anthropic and Gemini adapters; each translates its SDK's exceptions
into a status and the provider's own explanation, then calls ``status_error`` (or, for a
request that never got an answer, ``unreachable``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tooldeck.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelRateLimited,
    ModelUnavailable,
    ProviderError,
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a model's requests go, as an error message names it: the model, the address,
    how to fix a bad key, the SDK's retries."""

    model: str
    """The model string, e.g. ``anthropic:claude-sonnet-5``."""
    endpoint: str
    """Where requests go, e.g. ``https://api.anthropic.com``."""
    key_hint: str
    """How to supply a key, e.g. ``set ANTHROPIC_API_KEY or pass api_key=``."""
    max_retries: int | None
    """The SDK's retries; None when a client was passed in and its setting is its own."""

    @property
    def retries(self) -> str:
        if self.max_retries is None:
            return "the client's retries"
        return f"{self.max_retries} retries"


def status_kind(status: int, key_refused: bool = False) -> type[ProviderError]:
    """The kind of ModelError an HTTP error status stands for, whether the status came with
    the response or, after an HTTP 200, inside a stream (``key_refused``: as ``status_error``)."""
    if status in (401, 403) or key_refused:
        return ModelAuthError
    if status == 429:
        return ModelRateLimited
    if status >= 500:
        return ModelUnavailable
    if status >= 400:
        return ModelBadRequest
    return ProviderError


def status_error(
    context: Endpoint, status: int, detail: str, *, key_refused: bool = False
) -> ProviderError:
    """The ModelError for an HTTP error status, with the provider's own explanation.

    ``key_refused`` marks a refused key that the provider reports with another status
    (Gemini answers an invalid key with HTTP 400).
    """
    where = f"{context.model}: {context.endpoint} answered HTTP {status}"
    kind = status_kind(status, key_refused)
    if status == 401 or key_refused:
        said = f"{where}, the API key was refused: {detail} ({context.key_hint})"
    elif kind is ModelAuthError:
        said = f"{where}, access is denied: {detail}"
    elif kind is ModelRateLimited:
        said = f"{where} (rate limited) and still did after {context.retries}: {detail}"
    elif kind is ModelUnavailable:
        said = f"{where} (server error or overloaded) after {context.retries}: {detail}"
    elif kind is ModelBadRequest:
        said = f"{where}, the request was rejected: {detail}"
    else:
        said = f"{where}: {detail}"
    return kind(said, status)


def unreachable(context: Endpoint, error: BaseException, timed_out: bool) -> ModelUnavailable:
    """The error for a request that timed out or never reached the provider."""
    if timed_out:
        return ModelUnavailable(
            f"{context.model}: the request to {context.endpoint} timed out "
            f"(after {context.retries})"
        )
    cause = error.__cause__ or error
    return ModelUnavailable(
        f"{context.model}: could not connect to {context.endpoint} "
        f"(after {context.retries}): {type(cause).__name__}: {cause}"
    )


def cut_short(context: Endpoint, error: BaseException) -> ModelUnavailable:
    """The error for a response whose connection closed before its end (a stream cut
    mid-way, a body shorter than announced)."""
    cause = error.__cause__ or error
    return ModelUnavailable(
        f"{context.model}: {context.endpoint} closed the connection before the response was "
        f"complete (after {context.retries}): {type(cause).__name__}: {cause}"
    )
