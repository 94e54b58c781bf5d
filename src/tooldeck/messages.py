"""The wire-neutral messages: what the loop, the tools and the model adapters exchange.

Nothing here knows a provider's wire format: adapters convert to and from these types, and
the loop only ever sees them. Records the loop makes every round are made through
``tooldeck._fast_records`` (the one place that goes past pydantic's public API). May import:
``tooldeck.errors``, ``tooldeck._untrusted`` and ``tooldeck._fast_records``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tooldeck._fast_records import build, trusted
from tooldeck._untrusted import SHORT_JSON, argument_problem, unusable_text
from tooldeck.errors import ErrorCode

FROZEN = ConfigDict(frozen=True, defer_build=True, arbitrary_types_allowed=True)

SEARCH_TOOL = "search_tools"
"""The name of the tool that reveals deferred tools (``tooldeck.search.ToolSearch`` gives it
to a model that does not search tools itself). A call of a deferred tool before its reveal is
told to use it, and ``LocalModel`` reads a turn after its calls as still answering the
user's message: they find tools for the task, they do not do it."""
"""The configuration of every record here and in ``tooldeck.results``."""


class Usage(BaseModel):
    """Tokens and requests spent; adds up across model calls with ``+``."""

    model_config = FROZEN

    input_tokens: int = 0
    """Tokens sent to the model (prompt, history, tool schemas)."""
    output_tokens: int = 0
    """Tokens the model generated."""
    requests: int = 0
    """Model calls made."""
    cost_usd: float | None = Field(default=None, exclude_if=lambda cost: cost is None)
    """US dollars spent, when the price is known (``tooldeck.models.prices``): None means
    unknown, never a guess. A sum is unknown when one of its parts is (an empty ``Usage()``,
    no tokens and no requests, adds as nothing). Left out of JSON when unknown, so what was
    stored before it existed (a signed checkpoint) reads and verifies the same."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
            cost_usd=_summed_cost(self, other),
        )

    @property
    def is_empty(self) -> bool:
        """No tokens, no requests and no cost: the zero of ``+``."""
        return not (self.input_tokens or self.output_tokens or self.requests or self.cost_usd)


def _summed_cost(first: Usage, second: Usage) -> float | None:
    if first.is_empty:
        return second.cost_usd
    if second.is_empty:
        return first.cost_usd
    if first.cost_usd is None or second.cost_usd is None:
        return None
    return first.cost_usd + second.cost_usd


class ToolCall(BaseModel):
    """One tool call the model asked for."""

    model_config = FROZEN

    id: str
    """The provider's call id; the result is sent back under the same id."""
    name: str
    """The tool's name, exactly as the model wrote it."""
    arguments: dict[str, Any] = {}
    """The arguments, parsed from the model's JSON."""
    raw_arguments: str | None = None
    """The model's text, kept only when it did not parse as a JSON object, or arguments that
    break the rules of ``tooldeck._untrusted`` (nested too deep, not valid Unicode) as text.

    The loop answers such a call with an ``invalid_json`` observation instead of running it.
    """

    @model_validator(mode="before")
    @classmethod
    def _usable_arguments(cls, data: Any) -> Any:
        """Arguments given as data are checked once, here: ones that break the rules are
        kept as text (``raw_arguments``), so nothing later walks them again."""
        if isinstance(data, dict) and data.get("raw_arguments") is None:
            arguments = data.get("arguments")
            if isinstance(arguments, dict) and argument_problem(arguments) is not None:
                return {**data, "arguments": {}, "raw_arguments": unusable_text(arguments)}
        return data

    @classmethod
    def from_json(cls, id: str, name: str, text: str | None) -> ToolCall:
        """Build a call from the model's argument text, keeping text that is not a JSON object.

        An empty text means no arguments, as several providers send for parameterless tools.
        Arguments nested too deeply or holding invalid Unicode are kept as text too. This is
        the one check of the arguments: the loop does not walk them again.
        """
        if text is None or not text.strip():
            return build(cls, {"id": id, "name": name})
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested 100,000 levels deep
            parsed = None
        if not isinstance(parsed, dict):
            return build(cls, {"id": id, "name": name, "raw_arguments": text})
        # the usual text needs no walk: too short to nest too deep, no \u escape to hold a
        # lone surrogate; json.loads made the keys text and the values JSON's own kinds
        usual = len(text) <= SHORT_JSON and text.isascii() and "\\u" not in text
        if type(id) is not str or type(name) is not str:
            return build(cls, {"id": id, "name": name, "arguments": parsed})  # refused there
        if usual or argument_problem(parsed) is None:
            fields = {"id": id, "name": name, "arguments": parsed, "raw_arguments": None}
            return trusted(cls, fields, ("id", "name", "arguments"))
        return build(cls, {"id": id, "name": name, "raw_arguments": text})

    @property
    def arguments_json(self) -> str:
        """The arguments as the model sent them: its raw text, or the parsed object as JSON."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class AssistantOutput(BaseModel):
    """What the model returned for one request: text, tool calls, or both."""

    model_config = FROZEN

    content: str = ""
    """Text the model wrote; the final answer when there are no tool calls."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Calls to run, in the model's order; several in one turn run concurrently."""
    usage: Usage | None = None
    """Tokens this response cost, when the provider reports them."""
    provider_items: tuple[dict[str, Any], ...] = ()
    """Provider-side activity kept for the host (e.g. hosted tool calls), as plain JSON."""
    model: str | None = Field(default=None, exclude_if=lambda name: name is None)
    """The model that wrote this turn, when a ``FallbackModel`` chose it (its ``name``)."""


class Message(BaseModel):
    """One entry of the conversation the model is shown."""

    model_config = FROZEN

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    """For an assistant message: the calls it made."""
    tool_call_id: str | None = None
    """For a tool message: the id of the call this is the result of."""
    provider_items: tuple[dict[str, Any], ...] = ()
    """For an assistant message: provider-side items to send back as they came (opaque JSON)."""
    untrusted: bool = False
    """For a tool message: the result of a tool marked ``trust="untrusted"`` (content from
    the outside world); sessions and checkpoints keep the mark."""

    @classmethod
    def user(cls, content: str) -> Message:
        """A user message holding ``content``."""
        return build(cls, {"role": "user", "content": content})

    @classmethod
    def assistant(cls, output: AssistantOutput) -> Message:
        """The assistant turn that ``output`` describes."""
        fields = {
            "role": "assistant",
            "content": output.content,
            "tool_calls": output.tool_calls,
            "provider_items": output.provider_items,
        }
        return build(cls, fields)

    @classmethod
    def tool(cls, call_id: str, content: str) -> Message:
        """The result of the call ``call_id``, as the model reads it."""
        return build(cls, {"role": "tool", "content": content, "tool_call_id": call_id})


class ToolSpec(BaseModel):
    """What the model is shown about a tool: a name, a description and a JSON Schema."""

    model_config = FROZEN

    name: str
    description: str = ""
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""
    strict: bool = True
    """Whether ``parameters`` is in the strict form (every object closed, all fields listed)."""


class ToolResult(BaseModel):
    """The outcome of one call, as the model will read it."""

    model_config = FROZEN

    ok: bool
    output: str
    """The observation text the model reads."""
    error_code: ErrorCode | None = Field(default=None, validate_default=True)
    """Stable code of a failure (``unknown_tool``, ``invalid_arguments``...); None on success."""

    # A field validator, not a model one: it runs when a result is made or read, not again
    # each time a record holding a result (a ToolTrace, every round) is made.
    @field_validator("error_code")
    @classmethod
    def _code_matches_outcome(
        cls, error_code: ErrorCode | None, info: ValidationInfo
    ) -> ErrorCode | None:
        ok = info.data.get("ok")
        if ok and error_code is not None:
            raise ValueError(f"a successful result has no error_code, got {error_code!r}")
        if ok is False and not error_code:
            raise ValueError("a failed result needs an error_code")
        return error_code

    @classmethod
    def success(cls, output: str) -> ToolResult:
        """A successful result: the model reads ``output`` as it is."""
        return build(cls, {"ok": True, "output": output})

    @classmethod
    def failure(cls, error_code: ErrorCode | str, message: str) -> ToolResult:
        """A failed result whose text starts with its code: ``error[code]: message``."""
        if not error_code:
            raise ValueError("a failed result needs an error_code")
        code = ErrorCode(error_code)
        return cls(ok=False, output=f"error[{code}]: {message}", error_code=code)
