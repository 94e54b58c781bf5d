"""An answer made concrete for one request: fresh ids, token counts, and its stream pieces.

Ids are random (``call_`` and 24 hex digits), as a hosted provider's are: never repeated by
another response, another simulator or another process. Token counts are estimated from
the text (about four characters a token, a few tokens per message), so usage is plausible
and a known model's price applies.
"""

from __future__ import annotations

import math
import re
import secrets
import time
from dataclasses import dataclass

from tooldeck.testing.request import SimRequest
from tooldeck.testing.steps import Answer, Calls

ARGUMENT_PIECE = 8
"""Characters of a call's arguments per streamed delta (several deltas for most calls)."""


def fresh_id(prefix: str) -> str:
    """``prefix`` and 24 random hex digits, e.g. ``call_9f1c...``."""
    return f"{prefix}{secrets.token_hex(12)}"


@dataclass(frozen=True, slots=True)
class PlannedCall:
    id: str
    """The call id the model's response carries (``call_...``)."""
    item_id: str
    """The Responses API's output item id (``fc_...``)."""
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Planned:
    """What one response says, with the ids and usage it carries."""

    id: str
    created: int
    model: str
    text: str
    calls: tuple[PlannedCall, ...]
    input_tokens: int
    output_tokens: int
    message_id: str
    """The Responses API's message item id (``msg_...``)."""

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"


def plan(answer: Answer, request: SimRequest, model: str) -> Planned:
    """``answer`` to ``request``, as a response of ``model`` with fresh ids."""
    calls: tuple[PlannedCall, ...] = ()
    text = answer.text
    if isinstance(answer, Calls):
        calls = tuple(
            PlannedCall(fresh_id("call_"), fresh_id("fc_"), step.name, step.arguments)
            for step in answer.calls
        )
    prefix = "chatcmpl-" if request.api == "chat" else "resp_"
    return Planned(
        id=fresh_id(prefix),
        created=int(time.time()),
        model=model,
        text=text,
        calls=calls,
        input_tokens=input_tokens(request),
        output_tokens=max(1, tokens(text) + sum(_call_tokens(call) for call in calls)),
        message_id=fresh_id("msg_"),
    )


def tokens(text: str) -> int:
    """About four characters a token."""
    return math.ceil(len(text) / 4)


def _call_tokens(call: PlannedCall) -> int:
    return 3 + tokens(call.name) + tokens(call.arguments)


def input_tokens(request: SimRequest) -> int:
    """The request's messages and tools, counted as a provider would, roughly."""
    counted = 3
    for message in request.messages:
        counted += 4 + tokens(message.text)
        counted += sum(
            3 + tokens(name) + tokens(arguments) for name, arguments in message.tool_calls
        )
    tools = request.body.get("tools")
    if tools:
        counted += tokens(str(tools))
    return counted


_WORD = re.compile(r"\s*\S+\s*|\s+")


def text_pieces(text: str) -> list[str]:
    """The text as a stream sends it: a word (with its spaces) per delta."""
    return _WORD.findall(text) if text else []


def argument_pieces(arguments: str) -> list[str]:
    """A call's arguments as a stream sends them: a few characters per delta."""
    return [arguments[i : i + ARGUMENT_PIECE] for i in range(0, len(arguments), ARGUMENT_PIECE)]
