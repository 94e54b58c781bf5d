"""The openai SDK's exceptions -> tooldeck ModelErrors that say what happened.

The SDK has already retried (rate limits, 5xx, connection errors) by the time an exception
reaches here; the message says how many retries it made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tooldeck.errors import ModelStreamMissing, ProviderError
from tooldeck.models._http import Endpoint, cut_short, status_error, unreachable

if TYPE_CHECKING:
    import httpx

_SHOWN = 500
"""Characters of a body that is not JSON kept in the message."""
_INSTEAD = "read no deltas, or create the model with stream=False"


@contextmanager
def sdk_errors(context: Endpoint, reading: bool = False) -> Iterator[None]:
    """Re-raise the SDK's API errors inside the block as tooldeck ProviderError errors.

    ``reading``: the block reads a response that has started (a stream's events), so a
    connection error there is the response cut short, not a server out of reach.
    """
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
        if reading:
            raise cut_short(context, error) from error
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


async def refuse_whole_body(model: str, response: httpx.Response) -> None:
    """Refuse the answer to a streaming request that is a whole body, not an event stream,
    naming what the server said in it (its error message, when it holds one)."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        return
    said = _said((await response.aread()).decode("utf-8", "replace"))
    raise ModelStreamMissing(
        f"{model}: the server answered a streaming request with a whole body "
        f"({kind or 'no content type'}), not a stream; it said: {said or '(nothing)'}. It may "
        f"not stream this request: {_INSTEAD}",
        server_message=said,
    )


def empty_stream(model: str) -> ModelStreamMissing:
    """The answer to a streaming request carried no chunks at all."""
    return ModelStreamMissing(
        f"{model}: the response to a streaming request carried no chunks; the server may not "
        f"stream this request (its own log may say why): {_INSTEAD}"
    )


def _said(body: str) -> str:
    """The error message a body holds (``{"error": {"message": ...}}`` and the like), else
    its start."""
    try:
        value = json.loads(body)
    except ValueError:
        return " ".join(body.split())[:_SHOWN]
    error = value.get("error", value) if isinstance(value, dict) else value
    for found in (error, value):
        if isinstance(found, dict):
            for key in ("message", "detail"):
                if isinstance(found.get(key), str) and found[key]:
                    return str(found[key])
        if isinstance(found, str) and found:
            return found
    return " ".join(body.split())[:_SHOWN]
