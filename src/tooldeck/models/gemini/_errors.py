"""The google-genai SDK's exceptions -> tooldeck ModelErrors that say what happened.

The SDK has already retried (``HttpRetryOptions``: 408, 429, 5xx, connection errors) by
the time an exception reaches here. Gemini answers an invalid key with HTTP 400 and the
reason ``API_KEY_INVALID``, which is reported as the refused key it is. An error inside a
stream (``data: {"error": {...}}`` after chunks have come, with the HTTP status already 200)
is mapped by its code to the same kinds, and said to come from the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tooldeck.errors import ProviderError
from tooldeck.models._http import Endpoint, status_error, status_kind, unreachable

if TYPE_CHECKING:
    from google.genai.errors import APIError


@contextmanager
def sdk_errors(context: Endpoint, streaming: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """Re-raise the SDK's errors inside the block as tooldeck ProviderError errors.

    ``streaming`` says whether a stream has delivered chunks (its errors come in the stream).
    """
    import httpx2
    import pydantic
    from google.genai import errors

    try:
        yield
    except errors.APIError as error:
        if streaming():
            raise _stream_error(context, error) from error
        refused = _key_refused(error.details)
        raise status_error(context, error.code, _detail(error), key_refused=refused) from error
    except (httpx2.TimeoutException, TimeoutError) as error:
        raise unreachable(context, error, timed_out=True) from error
    except (httpx2.TransportError, OSError) as error:
        raise unreachable(context, error, timed_out=False) from error
    except pydantic.ValidationError as error:
        raise ProviderError(
            f"{context.model}: the response does not have the API's format: "
            f"{error.error_count()} problem(s), first: {error.errors()[0]['msg']} at "
            f"{'.'.join(str(part) for part in error.errors()[0]['loc'])}"
        ) from error


def _stream_error(context: Endpoint, error: APIError) -> ProviderError:
    code = error.code
    message = f"{context.model}: the stream reported an error: {code} {_detail(error)}"
    return status_kind(code, _key_refused(error.details))(message, code)


def _detail(error: APIError) -> str:
    """The API's explanation and status, e.g. ``Resource exhausted (RESOURCE_EXHAUSTED)``."""
    if not error.message:
        return str(error)
    return f"{error.message} ({error.status})" if error.status else str(error.message)


def _key_refused(body: Any) -> bool:
    """Whether the error's details carry the reason ``API_KEY_INVALID``."""
    if not isinstance(body, dict):
        return False
    inner = body.get("error", body)
    details = inner.get("details") if isinstance(inner, dict) else None
    return any(
        isinstance(detail, dict) and detail.get("reason") == "API_KEY_INVALID"
        for detail in details or ()
    )
