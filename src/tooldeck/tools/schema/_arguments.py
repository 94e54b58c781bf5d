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
from pydantic.config import ExtraValues

from tooldeck.errors import ArgumentProblem, InvalidArguments
from tooldeck.tools.schema._argument_rules import ArgumentRules, format_path, shown, unexpected_text
from tooldeck.tools.schema._check import check_schema
from tooldeck.tools.schema._walk import JsonSchema, false_spelled_out, rebuild, walk


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
    """Validates with a pydantic model; the handler receives its fields as keywords.

    Every object the schema closes refuses unknown keys, at any depth, strict or not: the
    schema closes each model, dataclass and TypedDict except one whose own config says
    ``extra="allow"`` (its extra keys are then shown as allowed and passed through).
    """

    def __init__(self, model: type[BaseModel], json_schema: JsonSchema | None = None) -> None:
        self.model = model
        self._validator = model.__pydantic_validator__
        self.json_schema = json_schema if json_schema is not None else model_schema(model)
        some_open = any(_allows_extra_keys(node) for node in walk(self.json_schema))
        self._rules = ArgumentRules(self.json_schema, extras=some_open)
        self._walks = (self._rules.needed(closed=False), self._rules.needed(closed=True))
        """Whether a call in the open / closed form needs the rules' walk (most do not)."""
        self._open_extra: ExtraValues | None = None if some_open else "forbid"
        """pydantic's own extra check for the non-strict form: everywhere, unless some model
        allows extras (then the rules walk finds the unknown keys in the closed objects)."""
        self._names = tuple(self.json_schema.get("properties", {}))
        self._passes_extra = model.model_config.get("extra") == "allow"

    def validate(self, arguments: dict[str, Any], *, closed: bool) -> dict[str, Any]:
        problems: list[ArgumentProblem] = []
        if self._walks[closed]:
            arguments, problems = self._rules.apply(arguments, closed=closed)
        try:
            instance = self._validator.validate_python(
                arguments, extra="forbid" if closed else self._open_extra
            )
        except ValidationError as error:
            found = {problem.path for problem in problems}
            more = _pydantic_problems(error, self._names)
            raise InvalidArguments([*problems, *(p for p in more if p.path not in found)]) from None
        if problems:
            raise InvalidArguments(problems)
        keywords = dict(instance.__dict__)
        if self._passes_extra and instance.__pydantic_extra__:
            keywords.update(instance.__pydantic_extra__)
        return keywords


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
    """Validates with a JSON Schema (any draft ``jsonschema`` knows, formats checked).

    The schema is checked against its metaschema when the tool is made (cached per node
    shape: ``_schema_check``); the validator for each form is built on the first call.
    """

    def __init__(self, schema: JsonSchema) -> None:
        check_schema(schema)
        self.json_schema = schema
        self._rules = ArgumentRules(schema, unique=False)
        self._validators: dict[bool, Any] = {}
        """``closed`` -> the jsonschema validator of that form, once built."""

    def validate(self, arguments: dict[str, Any], *, closed: bool) -> dict[str, Any]:
        if self._rules.needed(closed=closed):
            arguments, _ = self._rules.apply(arguments, closed=closed)
        validator = self._validators.get(closed) or self._validator(closed)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            raise InvalidArguments([p for error in errors for p in _jsonschema_problems(error)])
        return dict(arguments)

    def _validator(self, closed: bool) -> Any:
        from jsonschema.validators import validator_for

        cls = validator_for(self.json_schema)
        schema = close_objects(self.json_schema) if closed else self.json_schema
        schema = false_spelled_out(schema)
        validator = self._validators[closed] = cls(schema, format_checker=cls.FORMAT_CHECKER)
        return validator


def model_schema(model: type[BaseModel]) -> JsonSchema:
    """The model's JSON Schema as the model should see it: no titles, and every object closed
    (``additionalProperties: false``) unless its model allows extra keys."""
    schema: JsonSchema = rebuild(model.model_json_schema(), before=_without_title, after=_closed)
    return schema


def _without_title(node: JsonSchema, path: str) -> JsonSchema:
    """Drop ``title`` (noise to a model); a property named title is not a keyword, and stays."""
    if isinstance(node.get("title"), str):
        return {key: value for key, value in node.items() if key != "title"}
    return node


def _closed(node: JsonSchema, path: str) -> JsonSchema:
    if (node.get("type") == "object" or "properties" in node) and (
        "additionalProperties" not in node
    ):
        node["additionalProperties"] = False
    return node


def close_objects(schema: JsonSchema) -> JsonSchema:
    """The same schema with ``additionalProperties: false`` on every object that has none."""
    return rebuild(schema, after=_closed)


def _allows_extra_keys(node: JsonSchema) -> bool:
    """An object with listed properties that also takes others (``extra="allow"``)."""
    return "properties" in node and node.get("additionalProperties") not in (None, False)


def _pydantic_problems(error: ValidationError, names: tuple[str, ...]) -> Iterable[ArgumentProblem]:
    for item in error.errors(include_url=False):
        path = format_path(item["loc"])
        kind = item["type"]
        if kind == "missing":
            yield ArgumentProblem(path, "missing (required)")
        elif kind in ("extra_forbidden", "unexpected_keyword_argument"):
            nested = len(item["loc"]) > 1
            text = unexpected_text(() if nested else names, top_level=not nested)
            yield ArgumentProblem(path, text)
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
                    format_path([*path, name]), unexpected_text(allowed, top_level=not path)
                )
    elif error.validator == "not" and error.validator_value == {}:  # a false schema
        yield ArgumentProblem(format_path(path), f"takes no value (got {shown(error.instance)})")
    else:
        yield ArgumentProblem(format_path(path), error.message)
