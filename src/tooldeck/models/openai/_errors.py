"""The openai SDK's exceptions -> tooldeck ModelErrors that say what happened.

The SDK has already retried (rate limits, 5xx, connection errors) by the time an exception
reaches here; the message says how many retries it made.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tooldeck.errors import ProviderError
from tooldeck.models._http import Endpoint, status_error, unreachable


@contextmanager
def sdk_errors(context: Endpoint) -> Iterator[None]:
    """Re-raise the SDK's API errors inside the block as tooldeck ProviderError errors."""
    import openai

    try:
        yield
    except openai.APIStatusError as error:
        raise status_error(
            context, error.status_code, _detail(error.body, error.message)
        ) from error
    except openai.APITimeoutError as error:
        raise unreachable(context, error, timed_out=True) from error
    except openai.APIConnectionError as error:
        raise unreachable(context, error, timed_out=False) from error
    except openai.APIError as error:
        detail = _detail(error.body, error.message)
        raise ProviderError(f"{context.model}: the provider reported an error: {detail}") from error


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
