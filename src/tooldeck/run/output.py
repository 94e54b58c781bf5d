"""Typed answers: ``Agent(output_type=T)`` validated like a tool call's arguments.

The model is asked for its answer in one of three ways, chosen from what the model can do:
``native`` — the model itself is held to the schema (the provider's structured output, or a
local grammar) and answers with JSON text; ``tool`` — the model answers by calling a
``final_answer`` tool whose arguments are the output; ``prompted`` — the schema is in the
instructions and the answer is read from the model's text (for servers that refuse the
other two). Either way the answer is validated against exactly the schema the model was
shown; one that does not fit is an observation (``error[invalid_output]: ...``) the model
corrects, within ``output_retries``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_origin

from pydantic import BaseModel, create_model
from typing_extensions import is_typeddict

from tooldeck._untrusted import argument_problem
from tooldeck.errors import InvalidArguments, ModelRetry, ToolDefinitionError
from tooldeck.messages import AssistantOutput, ToolCall, ToolSpec
from tooldeck.tools.context import RunContext
from tooldeck.tools.schema._arguments import PydanticArguments
from tooldeck.tools.schema._strict import NotStrictError, to_strict

T = TypeVar("T")
OutputMode = Literal["auto", "native", "tool", "prompted"]
"""``native``: the model's own structured output; ``tool``: a ``final_answer`` tool;
``prompted``: the schema in the instructions, the answer read from the text."""

_FENCE = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.DOTALL)

OutputValidator = (
    Callable[[Any], Any]
    | Callable[[RunContext[Any], Any], Any]
    | Callable[[Any], Awaitable[Any]]
    | Callable[[RunContext[Any], Any], Awaitable[Any]]
)
"""Checks (and may change) the validated output; raising ModelRetry asks the model again."""

FINAL_ANSWER = "final_answer"
_WRAPPED = "result"


@dataclass(frozen=True, slots=True)
class Accepted:
    """The answer validated: the run ends with ``value``."""

    value: Any
    raw: str
    """The text the value was read from (the model's JSON)."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The answer did not validate; ``text`` is what the model reads after ``error[...]: ``."""

    text: str


class OutputSchema(Generic[T]):
    """The schema of a typed answer and the check that enforces exactly it."""

    def __init__(self, output_type: type[T], *, strict: bool = True) -> None:
        self.output_type = output_type
        self.wrapped = not _is_object_type(output_type)
        model = create_model("Output", **{_WRAPPED: (output_type, ...)})  # type: ignore[call-overload]
        self._arguments = PydanticArguments(model)
        schema = self._arguments.json_schema
        shown = schema if self.wrapped else _unwrap(schema)
        self.strict = strict
        try:
            self.parameters = to_strict(shown) if strict else shown
        except NotStrictError as error:
            raise ToolDefinitionError(
                f"output_type {_name(output_type)} cannot use the strict schema form: {error}; "
                "pass output_strict=False"
            ) from None

    def spec(self, description: str) -> ToolSpec:
        """The ``final_answer`` tool the model is shown when it answers through a tool call."""
        parameters, strict = self.parameters, self.strict
        return ToolSpec(
            name=FINAL_ANSWER, description=description, parameters=parameters, strict=strict
        )

    def read_text(self, text: str) -> Accepted | Refused:
        """A native or prompted answer: JSON text that must fit the schema (inside a
        ```json fence, or with words around one object, it is read too)."""
        try:
            value = json.loads(_json_in(text))
        except (ValueError, RecursionError) as error:
            return Refused(f"the answer is not valid JSON ({error}); answer with one JSON value")
        if not isinstance(value, dict):
            return Refused("the answer must be a JSON object matching the output schema")
        problem = argument_problem(value)  # too deep to save, or not valid Unicode
        if problem is not None:
            return Refused(f"the answer's values {problem}")
        return self.read_arguments(value, text)

    def read_arguments(self, arguments: dict[str, Any], raw: str) -> Accepted | Refused:
        """The answer as an object (a final_answer call's arguments, or parsed text)."""
        wrapped = arguments if self.wrapped else {_WRAPPED: arguments}
        try:
            checked = self._arguments.validate(wrapped, closed=self.strict)
        except InvalidArguments as error:
            problems = "\n".join(f"- {self._path(str(p))}" for p in error.problems)
            return Refused(f"the answer does not match the output schema:\n{problems}")
        return Accepted(checked[_WRAPPED], raw)

    def _path(self, problem: str) -> str:
        if self.wrapped:
            return problem
        if problem.startswith(f"{_WRAPPED}."):
            return problem[len(_WRAPPED) + 1 :]
        return problem.removeprefix(f"{_WRAPPED}: ")


class OutputPlan:
    """How one agent asks for, reads and checks its typed answer."""

    def __init__(
        self,
        schema: OutputSchema[Any],
        mode: Literal["native", "tool", "prompted"],
        validators: Sequence[OutputValidator] = (),
        description: str = "",
        *,
        falls_back: bool = False,
    ) -> None:
        self.schema = schema
        self.mode = mode
        self.falls_back = falls_back
        """A native answer chosen by ``output_mode="auto"``: asked for in the instructions
        instead where the server refuses structured output (``run.prompted``)."""
        self.validators = tuple(validators)
        self.spec = schema.spec(description or _default_description(mode))

    def judge(self, output: AssistantOutput) -> tuple[Accepted | Refused | None, ToolCall | None]:
        """The answer in this turn, if any, and the final_answer call it came from."""
        if self.mode != "tool":
            if output.tool_calls:
                return None, None
            return self.schema.read_text(output.content), None
        call = next((c for c in output.tool_calls if c.name == FINAL_ANSWER), None)
        if call is None:
            if output.tool_calls:
                return None, None
            return Refused(f"answer by calling the {FINAL_ANSWER!r} tool, not with text"), None
        if call.raw_arguments is not None:
            return Refused(f"the {FINAL_ANSWER!r} arguments are not a JSON object"), call
        return self.schema.read_arguments(call.arguments, call.arguments_json), call

    async def check(self, accepted: Accepted, context: RunContext[Any]) -> Accepted | Refused:
        """Run the output validators in order; ModelRetry becomes a Refused with its text."""
        value = accepted.value
        for validator in self.validators:
            try:
                value = await _call_validator(validator, context, value)
            except ModelRetry as retry:
                return Refused(str(retry))
        return Accepted(value, accepted.raw)


async def _call_validator(validator: OutputValidator, context: RunContext[Any], value: Any) -> Any:
    takes_context = len(inspect.signature(validator).parameters) >= 2
    produced = validator(context, value) if takes_context else validator(value)  # type: ignore[call-arg]
    if inspect.isawaitable(produced):
        produced = await produced
    return value if produced is None else produced


def prompted_instructions(instructions: str, schema: dict[str, Any]) -> str:
    """The instructions with the rule for a prompted answer: the schema, and JSON only."""
    rule = (
        "When you give your final answer, reply with only one JSON object that matches this "
        "JSON Schema, and no other text:\n" + json.dumps(schema, ensure_ascii=False)
    )
    return f"{instructions}\n\n{rule}" if instructions else rule


def _json_in(text: str) -> str:
    """The JSON of a text answer: the text itself, a fenced block's, or from its first
    ``{`` to its last ``}`` when words surround it."""
    stripped = text.strip()
    if stripped.startswith(("{", "[")) or not stripped:
        return stripped
    fenced = _FENCE.search(stripped)
    if fenced is not None:
        return fenced.group(1).strip()
    start, end = stripped.find("{"), stripped.rfind("}")
    return stripped[start : end + 1] if 0 <= start < end else stripped


def _default_description(mode: str) -> str:
    if mode == "tool":
        return "Give the final answer. Call this once, when you have everything you need."
    return "The final answer."


def _is_object_type(output_type: Any) -> bool:
    """True for types whose JSON Schema is an object with named fields."""
    if get_origin(output_type) is not None:
        return False
    if isinstance(output_type, type) and issubclass(output_type, BaseModel):
        return True
    return dataclasses.is_dataclass(output_type) or is_typeddict(output_type)


def _unwrap(schema: dict[str, Any]) -> dict[str, Any]:
    """The wrapper's schema -> the output type's own object schema, definitions kept."""
    field = schema["properties"][_WRAPPED]
    definitions = dict(schema.get("$defs", {}))
    ref = field.get("$ref", "")
    name = ref.removeprefix("#/$defs/")
    own = dict(definitions.pop(name, field))
    if definitions:
        own["$defs"] = definitions
    return own


def _name(output_type: Any) -> str:
    return getattr(output_type, "__name__", None) or repr(output_type)
