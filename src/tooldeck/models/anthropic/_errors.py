"""The anthropic SDK's exceptions -> tooldeck ModelErrors that say what happened.

The SDK has already retried (429, 5xx including 529 overloaded, connection errors) by the
time an exception reaches here. An ``error`` event inside a stream arrives after the HTTP
200, so it is mapped by the error's type instead of a status; a stream that stalls past the
timeout or breaks off raises the HTTP client's own error, which is mapped as a connection's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tooldeck.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelRateLimited,
    ModelUnavailable,
    ProviderError,
)
from tooldeck.models._http import Endpoint, status_error, unreachable

if TYPE_CHECKING:
    from anthropic import APIStatusError

_STREAM_ERRORS: dict[str, type[ProviderError]] = {
    "overloaded_error": ModelUnavailable,
    "api_error": ModelUnavailable,
    "rate_limit_error": ModelRateLimited,
    "authentication_error": ModelAuthError,
    "permission_error": ModelAuthError,
    "invalid_request_error": ModelBadRequest,
}
"""The API's error types, for errors reported inside a stream."""


@contextmanager
def sdk_errors(context: Endpoint) -> Iterator[None]:
    """Re-raise the SDK's errors inside the block as tooldeck ProviderError errors."""
    import anthropic
    import httpx2

    try:
        yield
    except anthropic.APIStatusError as error:
        if error.status_code < 400:
            raise _stream_error(context, error) from error
        raise status_error(context, error.status_code, _detail(error)) from error
    except anthropic.APIConnectionError as error:
        timed_out = isinstance(error, anthropic.APITimeoutError)
        raise unreachable(context, error, timed_out) from error
    except httpx2.TimeoutException as error:  # while reading a stream
        raise unreachable(context, error, timed_out=True) from error
    except httpx2.TransportError as error:
        raise unreachable(context, error, timed_out=False) from error
    except anthropic.APIError as error:
        raise ProviderError(
            f"{context.model}: the provider reported an error: {error.message}"
        ) from error


def refused_by_sdk(context: Endpoint, error: ValueError) -> ModelBadRequest:
    """The SDK refused to send the request, e.g. a non-streamed ``max_tokens`` too large."""
    return ModelBadRequest(
        f"{context.model}: the anthropic SDK refused the request: {error} "
        "(pass stream=True to AnthropicModel, or lower max_tokens)"
    )


def _stream_error(context: Endpoint, error: APIStatusError) -> ProviderError:
    kind = error.type or "error"
    detail = error.api_message or error.message
    message = f"{context.model}: the stream reported an error: {kind}: {detail}"
    return _STREAM_ERRORS.get(kind, ProviderError)(message)


def _detail(error: APIStatusError) -> str:
    """The API's explanation and error type, e.g. ``Overloaded (overloaded_error)``."""
    if not error.api_message:
        return error.message
    return f"{error.api_message} ({error.type})" if error.type else error.api_message
