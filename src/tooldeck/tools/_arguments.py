"""Argument validators: the schema the model sees, and the check that enforces exactly it.

Two kinds share one small interface (``json_schema``, ``validate``):
- ``PydanticArguments`` for function signatures and pydantic models (lax conversions on);
- ``JsonSchemaArguments`` for explicit JSON Schema dicts, enforced with ``jsonschema``.
Both refuse extra keys wherever the exposed schema closes an object, and both turn the
strict form's ``null`` back into "use the default".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from tooldeck.errors import ArgumentProblem, InvalidArguments
from tooldeck.tools._strict import JsonSchema, NullDefaults

_MAX_SHOWN = 80


class ArgumentSchema(Protocol):
    """What a tool's arguments look like and how a call's arguments are checked."""

    @property
    def json_schema(self) -> JsonSchema:
        """The schema in its original (non-strict) form, without titles."""
        ...

    def validate(self, arguments: dict[str, Any], *, closed: bool) -> dict[str, Any]:
        """Return the keyword arguments for the handler, or raise InvalidArguments.

        ``closed`` refuses extra keys in every object, as the strict form promises.
        """
        ...


class PydanticArguments:
    """Validates with a pydantic model; the handler receives its fields as keywords."""

    def __init__(self, model: type[BaseModel], json_schema: JsonSchema | None = None) -> None:
        self.model = model
        self._validator = model.__pydantic_validator__
        self.json_schema = json_schema if json_schema is not None else model_schema(model)
        self._nulls = NullDefaults(self.json_schema)
        self._names = tuple(self.json_schema.get("properties", {}))

    def validate(self, arguments: dict[str, Any], *, closed: bool) -> dict[str, Any]:
        if closed:
            arguments = self._nulls.apply(arguments)
        try:
            instance = self._validator.validate_python(
                arguments, extra="forbid" if closed else None
            )
        except ValidationError as error:
            raise InvalidArguments(list(_pydantic_problems(error, self._names))) from None
        return dict(instance.__dict__)


class DeferredPydanticArguments:
    """A schema known up front; the pydantic model that enforces it is built on first use.

    For signatures whose schema is written directly (``_simple_schema``): decorating a tool
    then costs microseconds, and only tools that are actually called pay for their model.
    """

    def __init__(self, json_schema: JsonSchema, build: Callable[[], type[BaseModel]]) -> None:
        self.json_schema = json_schema
        self._build = build
        self._arguments: PydanticArguments | None = None

    def validate(self, arguments: dict[str, Any], *, closed: bool) -> dict[str, Any]:
        if self._arguments is None:
            self._arguments = PydanticArguments(self._build(), self.json_schema)
        return self._arguments.validate(arguments, closed=closed)


class JsonSchemaArguments:
    """Validates with a JSON Schema (any draft ``jsonschema`` knows, formats checked)."""

    def __init__(self, schema: JsonSchema) -> None:
        from jsonschema.validators import validator_for

        cls = validator_for(schema)
        cls.check_schema(schema)
        self.json_schema = schema
        self._open = cls(schema, format_checker=cls.FORMAT_CHECKER)
        self._closed = cls(close_objects(schema), format_checker=cls.FORMAT_CHECKER)
        self._nulls = NullDefaults(schema)

    def validate(self, arguments: dict[str, Any], *, closed: bool) -> dict[str, Any]:
        if closed:
            arguments = self._nulls.apply(arguments)
        validator = self._closed if closed else self._open
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            raise InvalidArguments([p for error in errors for p in _jsonschema_problems(error)])
        return dict(arguments)


def model_schema(model: type[BaseModel]) -> JsonSchema:
    """The model's JSON Schema as the model should see it: no titles."""
    schema: JsonSchema = strip_titles(model.model_json_schema())
    return schema


def strip_titles(node: Any) -> Any:
    """Drop ``title`` keywords (noise to a model), keeping properties that are named title."""
    if isinstance(node, list):
        return [strip_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = strip_titles(value)
    return out


def close_objects(node: Any) -> Any:
    """The same schema with ``additionalProperties: false`` on every object that has none."""
    if isinstance(node, list):
        return [close_objects(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: (
            {name: close_objects(sub) for name, sub in value.items()}
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict)
            else close_objects(value)
        )
        for key, value in node.items()
    }
    if (
        node.get("type") == "object" or "properties" in node
    ) and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def _pydantic_problems(error: ValidationError, names: tuple[str, ...]) -> Iterable[ArgumentProblem]:
    for item in error.errors(include_url=False):
        path = format_path(item["loc"])
        kind = item["type"]
        if kind == "missing":
            yield ArgumentProblem(path, "missing (required)")
        elif kind in ("extra_forbidden", "unexpected_keyword_argument"):
            nested = len(item["loc"]) > 1
            yield ArgumentProblem(path, _unexpected(() if nested else names, top_level=not nested))
        else:
            yield ArgumentProblem(path, f"{item['msg']} (got {shown(item['input'])})")


def _jsonschema_problems(error: Any) -> Iterable[ArgumentProblem]:
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        for name in missing:
            yield ArgumentProblem(format_path([*path, name]), "missing (required)")
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = tuple(error.schema.get("properties", {}))
        for name in error.instance:
            if name not in allowed:
                yield ArgumentProblem(
                    format_path([*path, name]), _unexpected(allowed, top_level=not path)
                )
    else:
        yield ArgumentProblem(format_path(path), error.message)


def _unexpected(names: tuple[str, ...], *, top_level: bool) -> str:
    listed = ", ".join(names)
    if top_level:
        return f"unexpected argument (the tool takes: {listed or 'no arguments'})"
    if names:
        return f"unexpected field (allowed here: {listed})"
    return "unexpected field (not in the schema)"


def format_path(location: Iterable[str | int]) -> str:
    """``('items', 0, 'name')`` -> ``items[0].name``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def shown(value: Any) -> str:
    """A short repr of a value the model sent, for error messages."""
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."
