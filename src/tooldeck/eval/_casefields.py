"""The fields of a case in a case file, checked by pydantic (``tooldeck.eval.casefile``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import ErrorDetails

MAX_DEPTH = 100
"""Levels of nesting a case file may have (a case is the second: the list, then its mapping)."""
Located = tuple[Any, Mapping[tuple[Any, ...], int]]
"""A parsed case and the line of each of its fields (by path), where known."""
_CLOSED = ConfigDict(extra="forbid")
EXPECT_KINDS = ("calls", "no_call", "any_call", "answer", "output")


class MessageIn(BaseModel):
    model_config = _CLOSED

    role: Literal["system", "user", "assistant"]
    content: str


class AnswerIn(BaseModel):
    model_config = _CLOSED

    contains: str | None = None
    equals: str | None = None
    matches: str | None = None

    @model_validator(mode="after")
    def _some_check(self) -> AnswerIn:
        if self.contains is None and self.equals is None and self.matches is None:
            raise ValueError("give contains, equals or matches")
        return self


class OutputIn(BaseModel):
    model_config = _CLOSED

    type: str
    """``module:Type``: the type of the typed answer."""
    equals: Any = None


class ExpectIn(BaseModel):
    model_config = _CLOSED

    calls: list[dict[str, dict[str, list[Any]]]] | None = Field(default=None, min_length=1)
    any_order: bool = True
    no_call: Literal[True] | None = None
    any_call: Literal[True] | None = None
    answer: AnswerIn | None = None
    output: OutputIn | None = None

    @model_validator(mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        """``expect: no call`` and ``expect: any call`` are short for the mappings."""
        if value in ("no call", "any call"):
            return {value.replace(" ", "_"): True}
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> ExpectIn:
        values = (self.calls, self.no_call, self.any_call, self.answer, self.output)
        given = [
            kind for kind, value in zip(EXPECT_KINDS, values, strict=True) if value is not None
        ]
        if len(given) != 1:
            kinds = ", ".join(EXPECT_KINDS)
            raise ValueError(f"give exactly one of {kinds} (got {', '.join(given) or 'none'})")
        if self.calls is not None and any(len(call) != 1 for call in self.calls):
            raise ValueError("each expected call is one mapping {tool_name: {param: [values]}}")
        return self


class CaseIn(BaseModel):
    model_config = _CLOSED

    id: str | None = None
    category: str | None = None
    prompt: str | None = None
    messages: list[MessageIn] | None = None
    system: str = ""
    tools: str | list[dict[str, Any]]
    expect: ExpectIn

    @field_validator("id", "category", "prompt")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _one_conversation(self) -> CaseIn:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give a prompt or messages (a conversation), not both")
        if self.messages is not None:
            said = [m for m in self.messages if m.role != "system"]
            if not said or said[-1].role != "user":
                raise ValueError("messages must end with the user's message")
        return self


def problem_text(error: ErrorDetails) -> str:
    """pydantic's message for one error, in the words of a case file."""
    if error["type"] == "missing":
        return "missing (required)"
    if error["type"] == "extra_forbidden":
        return "not a field here (a typo?)"
    message = error["msg"].removeprefix("Value error, ")
    return f"{message} (got {error['input']!r})" if error["type"] != "value_error" else message


def dotted(path: Sequence[Any], most: int = 8) -> str:
    """``('expect', 'calls', 1)`` -> ``expect.calls[1]``: a field's path as errors name it
    (its first ``most`` parts, then ``...``)."""
    text = ""
    for part in path[:most]:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text + ("..." if len(path) > most else "")
