"""Every line a client sends is read here before the MCP SDK sees it; none goes unanswered.

The SDK's stdio transport turns a line it cannot validate into an exception its server
only logs: a request whose ``params`` is a string, nested past its JSON parser's limit, or
holding a lone surrogate escape (``\\ud800``) is never answered, and the client waits
forever. Here each line is parsed and validated first; a request that fails gets a
JSON-RPC error under its id (``-32700`` not JSON, ``-32600`` not a request, ``-32602`` bad
params), a notification or response that fails is logged (nothing can answer it).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from tooldeck._untrusted import argument_problem, valid_text

logger = logging.getLogger("tooldeck.serve.mcp")


@dataclass(frozen=True, slots=True)
class Screened:
    """What to do with one line: pass ``message`` on, or send ``answer`` back (or neither:
    a blank line, or a broken notification that was logged)."""

    message: JSONRPCMessage | None = None
    answer: JSONRPCError | None = None


def screen(line: str) -> Screened:
    """Read one line of the stdio transport."""
    text = line.strip()
    if not text:
        return Screened()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:  # RecursionError: nested ~1,000 deep
        return _refused(None, PARSE_ERROR, f"the message is not JSON: {_said(error)}")
    if not isinstance(data, dict):
        return _refused(
            None,
            INVALID_REQUEST,
            f"a message is a JSON object, got {_kind(data)} (batches are not supported)",
        )
    problem = _request_problem(data)
    if problem is None:
        try:
            return Screened(message=jsonrpc_message_adapter.validate_python(data, by_name=False))
        except ValidationError as error:
            problem = INVALID_REQUEST, f"not a valid JSON-RPC message: {_first(error)}"
    if "id" in data and "method" in data:
        return _refused(data["id"], *problem)
    logger.warning("ignored a message that is not a request (%s): %s", problem[1], text[:200])
    return Screened()


def _request_problem(data: dict[str, Any]) -> tuple[int, str] | None:
    request_id = data.get("id")
    if "id" in data and "method" in data and not _usable_id(request_id):
        # else the SDK reads it as a notification (it ignores the id), which nothing answers
        return INVALID_REQUEST, (
            f"a request's id must be a string or an integer, got {_kind(request_id)}"
        )
    method = data.get("method")
    if isinstance(method, str) and not valid_text(method):
        return INVALID_REQUEST, "the method is not valid Unicode (a lone surrogate)"
    if "params" not in data or data["params"] is None:
        return None
    params = data["params"]
    if not isinstance(params, dict):
        return INVALID_PARAMS, f"params must be a JSON object, got {_kind(params)}"
    found = argument_problem(params)
    if found is not None:
        return INVALID_PARAMS, f"params {found}"
    return None


def _refused(request_id: object, code: int, message: str) -> Screened:
    """The error answer, under the request's id when it is one a response can carry."""
    answered_id: int | str | None = None
    if isinstance(request_id, int | str) and _usable_id(request_id):
        answered_id = request_id
    error = ErrorData(code=code, message=message)
    return Screened(answer=JSONRPCError(jsonrpc="2.0", id=answered_id, error=error))


def _usable_id(request_id: object) -> bool:
    """An id a response can carry back: an integer, or valid text."""
    if isinstance(request_id, str):
        return valid_text(request_id)
    return type(request_id) is int


def _kind(value: object) -> str:
    names = {str: "a string", list: "an array", dict: "an object", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, str) and not valid_text(value):
        return "text that is not valid Unicode (a lone surrogate)"
    return names.get(type(value), "a number")


def _said(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "it is nested too deep to read"
    return str(error)


def _first(error: ValidationError) -> str:
    detail = error.errors()[0]
    where = ".".join(map(str, detail["loc"]))
    return f"{where}: {detail['msg']}" if where else detail["msg"]
