"""The openai SDK's exceptions -> tooldeck ModelErrors that say what happened.

The SDK has already retried (rate limits, 5xx, connection errors) by the time an exception
reaches here; the message says how many retries it made.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tooldeck.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelRateLimited,
    ModelUnavailable,
    ProviderError,
)


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """What an error message names: the model, where it was sent, how to fix a bad key."""

    model: str
    """The model string, e.g. ``openai:gpt-4.1-mini``."""
    base_url: str
    key_hint: str
    """How to supply a key, e.g. ``set OPENAI_API_KEY or pass api_key=...``."""
    max_retries: int


@contextmanager
def sdk_errors(context: ErrorContext) -> Iterator[None]:
    """Re-raise the SDK's API errors inside the block as tooldeck ProviderError errors."""
    import openai

    try:
        yield
    except openai.APIStatusError as error:
        raise status_error(
            context, error.status_code, _detail(error.body, error.message)
        ) from error
    except openai.APITimeoutError as error:
        raise ModelUnavailable(
            f"{context.model}: the request to {context.base_url} timed out "
            f"(after {context.max_retries} retries)"
        ) from error
    except openai.APIConnectionError as error:
        cause = error.__cause__ or error
        raise ModelUnavailable(
            f"{context.model}: could not connect to {context.base_url} "
            f"(after {context.max_retries} retries): {type(cause).__name__}: {cause}"
        ) from error
    except openai.APIError as error:
        detail = _detail(error.body, error.message)
        raise ProviderError(f"{context.model}: the provider reported an error: {detail}") from error


def status_error(context: ErrorContext, status: int, detail: str) -> ProviderError:
    """The ModelError for an HTTP error status, with the provider's own explanation."""
    where = f"{context.model}: {context.base_url} answered HTTP {status}"
    if status == 401:
        return ModelAuthError(
            f"{where}, the API key was refused: {detail} ({context.key_hint})", status
        )
    if status == 403:
        return ModelAuthError(f"{where}, access is denied: {detail}", status)
    if status == 429:
        return ModelRateLimited(
            f"{where} (rate limited) and still did after {context.max_retries} retries: {detail}",
            status,
        )
    if status >= 500:
        return ModelUnavailable(
            f"{where} (server error) after {context.max_retries} retries: {detail}", status
        )
    if 400 <= status < 500:
        return ModelBadRequest(f"{where}, the request was rejected: {detail}", status)
    return ProviderError(f"{where}: {detail}", status)


def _detail(body: object, fallback: str) -> str:
    """The provider's error message, with the parameter it names when it names one."""
    if not isinstance(body, dict):
        return fallback
    message = body.get("message")
    text = message if isinstance(message, str) and message else fallback
    param = body.get("param")
    if isinstance(param, str) and param:
        text = f"{text} (parameter {param!r})"
    return text
