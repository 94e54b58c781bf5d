"""The Gemini API wire format, going in: Messages and ToolSpecs -> a ``generate_content`` call.

Only this module knows how the Gemini API spells a conversation: ``user`` and ``model``
contents made of parts; a model turn's calls as ``functionCall`` parts; and every result
of that turn as ``functionResponse`` parts in ONE user content, in the calls' order, each
with the name (and id) of the call it answers, its text under ``output`` or, for a failed
call, under ``error``. A model turn that came with thoughts or thought signatures is sent
back exactly as it came (the ``gemini_parts`` provider item).

The call's ``config`` uses the SDK's own (snake_case) field names; contents and schemas
are the API's JSON (camelCase), which is also how parts are kept in ``provider_items``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tooldeck.messages import Message, ToolSpec
from tooldeck.models._turns import ToolResults, call_id, grouped, is_failure
from tooldeck.models.base import Ask, ModelSettings
from tooldeck.models.gemini._schema import to_gemini_schema

ToolSchema = Literal["openapi", "json_schema"]

PARTS_ITEM = "gemini_parts"
"""The ``type`` of the provider item holding a model turn's parts as the API sent them."""


class Declarations:
    """Function declarations by ToolSpec, each converted once (a spec is frozen).

    Keyed by the spec object itself (its identity, the spec kept alive with its entry), so
    the same tools cost one conversion per model, not one per request.
    """

    def __init__(self, tool_schema: ToolSchema = "openapi", capacity: int = 256) -> None:
        self.tool_schema: ToolSchema = tool_schema
        self._made: dict[int, tuple[ToolSpec, dict[str, Any]]] = {}
        self._capacity = capacity

    def __call__(self, spec: ToolSpec) -> dict[str, Any]:
        entry = self._made.get(id(spec))
        if entry is not None and entry[0] is spec:
            return entry[1]
        made = declaration(spec, self.tool_schema)
        if len(self._made) >= self._capacity:
            del self._made[next(iter(self._made))]
        self._made[id(spec)] = (spec, made)
        return made


@dataclass(frozen=True, slots=True)
class RequestParts:
    """What goes into one ``generate_content`` call besides the conversation."""

    model: str
    declarations: Declarations = field(default_factory=Declarations)
    extra: Mapping[str, Any] | None = None
    """Other ``GenerateContentConfig`` fields; they override tooldeck's."""


def build_request(parts: RequestParts, ask: Ask) -> dict[str, Any]:
    """The keyword arguments of ``client.aio.models.generate_content``."""
    config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
    if ask.instructions:
        config["system_instruction"] = ask.instructions
    if ask.tools:
        declarations = [parts.declarations(spec) for spec in ask.tools]
        config["tools"] = [{"function_declarations": declarations}]
        config["tool_config"] = {
            "function_calling_config": calling_config(ask.settings.tool_choice)
        }
    if ask.settings.temperature is not None:
        config["temperature"] = ask.settings.temperature
    if ask.settings.max_tokens is not None:
        config["max_output_tokens"] = ask.settings.max_tokens
    config.update(parts.extra or {})
    return {"model": parts.model, "contents": contents(ask.messages), "config": config}


def declaration(spec: ToolSpec, tool_schema: ToolSchema) -> dict[str, Any]:
    """A ToolSpec as a function declaration, its schema converted to the OpenAPI subset
    (``parameters``) or sent unchanged (``parameters_json_schema``)."""
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    if tool_schema == "json_schema":
        function["parameters_json_schema"] = spec.parameters
    else:
        converted = to_gemini_schema(spec.parameters)
        if converted is not None:
            function["parameters"] = converted
    return function


def calling_config(choice: str) -> dict[str, Any]:
    """``AUTO``, ``ANY`` (must call), ``NONE``, or ``ANY`` limited to the named function."""
    if choice == "auto":
        return {"mode": "AUTO"}
    if choice == "required":
        return {"mode": "ANY"}
    if choice == "none":
        return {"mode": "NONE"}
    return {"mode": "ANY", "allowed_function_names": [choice]}


def callable_names(tools: Sequence[ToolSpec], settings: ModelSettings) -> list[str]:
    """The functions the request lets the model call."""
    choice = settings.tool_choice
    if choice == "none":
        return []
    if choice in ("auto", "required"):
        return [spec.name for spec in tools]
    return [choice]


def contents(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Gemini contents; a model turn with nothing is left out."""
    names: dict[str, str] = {}
    wire: list[dict[str, Any]] = []
    for turn in grouped(messages):
        if isinstance(turn, ToolResults):
            responses = [function_response(result, names) for result in turn.messages]
            wire.append({"role": "user", "parts": responses})
        elif turn.role == "user":
            wire.append({"role": "user", "parts": [{"text": turn.content}]})
        else:
            names.update((call.id, call.name) for call in turn.tool_calls)
            model_parts = assistant_parts(turn)
            if model_parts:
                wire.append({"role": "model", "parts": model_parts})
    return wire


def assistant_parts(message: Message) -> list[dict[str, Any]]:
    """The parts as they came when they were kept; otherwise the text, then one part per call.

    A call whose arguments were not a JSON object goes back with ``args: {}``; the result
    after it tells the model what was wrong.
    """
    for item in message.provider_items:
        if item.get("type") == PARTS_ITEM:
            return [dict(part) for part in item["parts"]]
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"text": message.content})
    for call in message.tool_calls:
        arguments = call.arguments if call.raw_arguments is None else {}
        parts.append({"functionCall": {"id": call.id, "name": call.name, "args": arguments}})
    return parts


def function_response(result: Message, names: Mapping[str, str]) -> dict[str, Any]:
    """One tool message as a ``functionResponse`` part, named after the call it answers."""
    id = call_id(result)
    name = names.get(id)
    if name is None:
        raise ValueError(
            f"a tool message answers call {id!r}, which no earlier assistant message made; "
            "Gemini needs the call's name"
        )
    key = "error" if is_failure(result) else "output"
    return {"functionResponse": {"id": id, "name": name, "response": {key: result.content}}}
