"""The local model's turn as it is written: its raw text -> text and tool-call chunks.

The model writes either ``answer <text>`` or one ``call {"name": ..., "arguments": ...}``
line per call (``_grammar``); this reads that text as it grows and says what is new:
the answer's text (without the surrounding whitespace ``parse_turn`` strips), and each
call's name and arguments text (without the line's closing brace). The chunks joined match
the parsed turn; the turn itself (``parse_turn``) stays the authority.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tooldeck.messages import Message
from tooldeck.models.base import TextChunk, ToolCallChunk
from tooldeck.models.local._grammar import ANSWER_PREFIX, CALL_PREFIX

_HEAD = re.compile(r'call \{"name": ("(?:[^"\\]|\\.)*"), "arguments": ?')


def first_call_number(messages: Sequence[Message]) -> int:
    """The number in the id of this turn's first call (``call_<n>``), as the engine counts."""
    return 1 + sum(len(message.tool_calls) for message in messages if message.role == "assistant")


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    sent: int = 0
    """Characters of the arguments text already sent."""


class TurnReader:
    """Reads the model's bytes as they come; ``feed`` returns the chunks they complete."""

    def __init__(self, first_number: int) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self._first = first_number
        self._answer_sent = 0
        self._calls: list[_Call] = []

    def feed(self, data: bytes) -> list[TextChunk | ToolCallChunk]:
        self._text += self._decoder.decode(data)
        return self._chunks(final=False)

    def finish(self) -> list[TextChunk | ToolCallChunk]:
        """What is left once the model stopped (a held-back last character, a cut call)."""
        self._text += self._decoder.decode(b"", final=True)
        return self._chunks(final=True)

    def _chunks(self, final: bool) -> list[TextChunk | ToolCallChunk]:
        text = self._text
        if text.startswith(ANSWER_PREFIX):
            return self._answer(text[len(ANSWER_PREFIX) :])
        if not text.startswith(CALL_PREFIX):
            return []
        chunks: list[TextChunk | ToolCallChunk] = []
        lines = text.split("\n")
        calls = [line for line in lines[:-1] if line.startswith(CALL_PREFIX)]
        last_is_open = lines[-1].startswith(CALL_PREFIX)
        for index, line in enumerate([*calls, lines[-1]] if last_is_open else calls):
            is_open = last_is_open and index == len(calls)
            chunks.extend(self._call(index, line, is_open and not final))
        return chunks

    def _answer(self, body: str) -> list[TextChunk | ToolCallChunk]:
        visible = body.strip()  # what parse_turn keeps; it only grows as the text does
        new = visible[self._answer_sent :]
        self._answer_sent = len(visible)
        return [TextChunk(new)] if new else []

    def _call(self, index: int, line: str, is_open: bool) -> list[TextChunk | ToolCallChunk]:
        head = _HEAD.match(line)
        if head is None:  # the name is not written yet
            return []
        chunks: list[TextChunk | ToolCallChunk] = []
        if index == len(self._calls):  # a new call: name it before its arguments come
            call_id = f"call_{self._first + index}"
            self._calls.append(_Call(call_id, json.loads(head.group(1))))
            chunks.append(ToolCallChunk(index, call_id, self._calls[index].name, ""))
        call = self._calls[index]
        arguments = line[head.end() :]
        if is_open and arguments.endswith("}"):
            arguments = arguments[:-1]  # may be the line's closing brace: wait for more
        elif not is_open:
            arguments = _without_closing_brace(arguments)
        if len(arguments) > call.sent:
            chunks.append(ToolCallChunk(index, call.call_id, call.name, arguments[call.sent :]))
            call.sent = len(arguments)
        return chunks


def _without_closing_brace(arguments: str) -> str:
    """A finished line's arguments: the object without the line's own closing brace.

    A line cut short (by the token budget) keeps all of its text, as ``parse_turn`` does.
    """
    stripped = arguments.rstrip()
    try:
        _, end = json.JSONDecoder().raw_decode(stripped)
    except ValueError:
        return arguments
    return stripped[:end]
