"""A function's signature and docstring -> its argument validator and JSON Schema.

Part of ``tooldeck.tools``: may import ``tooldeck.errors``, ``tooldeck.messages`` and
``tooldeck._untrusted``; the rest of the tools room builds on it.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, create_model
from pydantic.errors import PydanticSchemaGenerationError
from pydantic.fields import FieldInfo

from tooldeck.errors import ToolDefinitionError
from tooldeck.tools.context import RunContext
from tooldeck.tools.schema._arguments import (
    ArgumentSchema,
    DeferredPydanticArguments,
    PydanticArguments,
)
from tooldeck.tools.schema._docstrings import ParsedDocstring, parse_docstring
from tooldeck.tools.schema._hints import type_hints
from tooldeck.tools.schema._simple import simple_default, simple_schema
from tooldeck.tools.schema._strict import NotStrictError, to_strict
from tooldeck.tools.schema._walk import JsonSchema

_ARGUMENTS_CONFIG = ConfigDict(extra="forbid", protected_namespaces=())
_QUALIFIER = re.compile(r"(?<![\w.'\"])(?:[A-Za-z_]\w*\.|<locals>\.)+(?=[A-Za-z_])")
"""``typing.``, ``collections.abc.``, ``module.function.<locals>.``: noise in a type's name."""
_SCHEMA_ERRORS = (PydanticSchemaGenerationError, PydanticUserError, TypeError, ValueError)


@dataclass(frozen=True, slots=True)
class FunctionSchema:
    """What ``@tool`` learns from a function."""

    description: str
    arguments: ArgumentSchema
    context_parameter: str | None
    """The parameter that receives the RunContext, if any."""
    positional_only: tuple[str, ...]
    """Parameters that must be passed by position, in order."""


@dataclass(frozen=True, slots=True)
class _Parameter:
    name: str
    annotation: Any
    """The type, without the description text of an ``Annotated``."""
    description: str | None
    default: Any
    """``...`` when the parameter is required."""


def function_schema(
    fn: Callable[..., Any],
    name: str,
    localns: Mapping[str, Any] | None = None,
    *,
    direct: bool = True,
) -> FunctionSchema:
    """Inspect ``fn`` and build its arguments' schema; raise ToolDefinitionError if it has none.

    With ``direct``, a signature of simple types gets its schema written directly and its
    pydantic model on first use; otherwise pydantic builds both now.
    """
    signature = inspect.signature(fn)
    hints = _type_hints(fn, name, localns)
    docs = parse_docstring(inspect.getdoc(fn))
    parameters: list[_Parameter] = []
    context_parameter = None
    positional_only = []
    for parameter in signature.parameters.values():
        _check_kind(parameter, name)
        annotation = hints.get(parameter.name, inspect.Parameter.empty)
        if _is_run_context(annotation):
            context_parameter = parameter.name
            continue
        if annotation is inspect.Parameter.empty:
            raise ToolDefinitionError(
                f"tool {name!r}: parameter {parameter.name!r} has no type annotation; "
                f"annotate it (e.g. `{parameter.name}: str`) so the model knows what to send"
                + _method_hint(parameter.name)
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional_only.append(parameter.name)
        parameters.append(_parameter(parameter, annotation, docs))
    if inspect.isroutine(fn):  # a callable object's class docstring may describe __init__
        _check_documented(name, docs, tuple(signature.parameters))
    schema = _direct_schema(parameters) if direct else None
    if schema is None:
        arguments: ArgumentSchema = _build_arguments(name, parameters)
    else:
        arguments = DeferredPydanticArguments(schema, lambda: _argument_model(name, parameters))
    return FunctionSchema(docs.description, arguments, context_parameter, tuple(positional_only))


def _check_documented(name: str, docs: ParsedDocstring, parameters: tuple[str, ...]) -> None:
    """Refuse a docstring that describes a parameter the function does not have: a stale
    description, usually of a renamed parameter, which then reaches the model undescribed."""
    stale = [documented for documented in docs.parameters if documented not in parameters]
    if stale:
        raise ToolDefinitionError(
            f"tool {name!r}: the docstring describes {_listed(stale)}, which the function "
            f"does not have (its parameters: {', '.join(parameters) or 'none'}); a renamed or "
            "removed parameter? fix the docstring so each description reaches the model"
        )


def _listed(names: list[str]) -> str:
    quoted = ", ".join(repr(name) for name in names)
    return f"parameter {quoted}" if len(names) == 1 else f"parameters {quoted}"


def _direct_schema(parameters: list[_Parameter]) -> JsonSchema | None:
    """The arguments' schema written without pydantic, when every parameter is simple."""
    properties: JsonSchema = {}
    required = []
    for parameter in parameters:
        schema = simple_schema(parameter.annotation)
        if schema is None:
            return None
        if parameter.description:
            schema["description"] = parameter.description
        if parameter.default is ...:
            required.append(parameter.name)
        elif simple_default(parameter.default):
            schema["default"] = parameter.default
        else:
            return None
        properties[parameter.name] = schema
    result: JsonSchema = {"additionalProperties": False, "properties": properties}
    if required:
        result["required"] = required
    result["type"] = "object"
    return result


def _type_hints(
    fn: Callable[..., Any], name: str, localns: Mapping[str, Any] | None
) -> dict[str, Any]:
    target: Any = fn if inspect.isroutine(fn) else type(fn).__call__
    try:
        return type_hints(target, localns)
    except NameError as error:
        raise ToolDefinitionError(
            f"tool {name!r}: cannot resolve a type annotation ({error}); define the type at "
            "module level or before the tool"
        ) from error


def _check_kind(parameter: inspect.Parameter, name: str) -> None:
    if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        star = "*" if parameter.kind is inspect.Parameter.VAR_POSITIONAL else "**"
        raise ToolDefinitionError(
            f"tool {name!r}: {star}{parameter.name} is not supported; list each parameter "
            "the model may pass, with its type"
        )
    if parameter.name.startswith("_"):
        raise ToolDefinitionError(
            f"tool {name!r}: parameter {parameter.name!r} starts with '_', which the argument "
            "model cannot hold; rename it"
        )
    if parameter.name == "model_config":  # pydantic reads it as configuration, not a field
        raise ToolDefinitionError(
            f"tool {name!r}: parameter 'model_config' is a name pydantic reserves; rename it"
        )


def _method_hint(parameter: str) -> str:
    if parameter in ("self", "cls"):
        return "; to use a method as a tool, pass the bound method: tool(instance.method)"
    return ""


def _is_run_context(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation is RunContext or get_origin(annotation) is RunContext


def _parameter(parameter: inspect.Parameter, annotation: Any, docs: ParsedDocstring) -> _Parameter:
    annotation, text = _split_description(annotation)
    description = text or docs.parameters.get(parameter.name)
    default = parameter.default
    if default is inspect.Parameter.empty:
        default = ...
    return _Parameter(parameter.name, annotation, description, default)


def _model_field(parameter: _Parameter) -> tuple[Any, Any]:
    """(annotation, default) for create_model, with the description folded in."""
    annotation = parameter.annotation
    if parameter.description:
        annotation = Annotated[annotation, Field(description=parameter.description)]
    return (annotation, parameter.default)


def _split_description(annotation: Any) -> tuple[Any, str | None]:
    """``Annotated[T, "text", ...]`` -> (``Annotated[T, ...]``, "text")."""
    if get_origin(annotation) is not Annotated:
        return annotation, None
    base, *metadata = get_args(annotation)
    texts = [item for item in metadata if isinstance(item, str)]
    if not texts:
        return annotation, None
    rest = [item for item in metadata if not isinstance(item, str)]
    description = " ".join(texts)
    # A Field(description=...) in the metadata is more specific than a bare string.
    if any(isinstance(item, FieldInfo) and item.description for item in rest):
        description = ""
    if not rest:
        return base, description
    return Annotated[(base, *rest)], description


def _argument_model(name: str, parameters: list[_Parameter]) -> type[BaseModel]:
    fields: dict[str, Any] = {parameter.name: _model_field(parameter) for parameter in parameters}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return create_model(f"{name}_arguments", __config__=_ARGUMENTS_CONFIG, **fields)


def _build_arguments(name: str, parameters: list[_Parameter]) -> PydanticArguments:
    try:
        return PydanticArguments(_argument_model(name, parameters))
    except _SCHEMA_ERRORS as error:
        fields = {parameter.name: _model_field(parameter) for parameter in parameters}
        raise _explain_schema_error(name, fields, error) from error


def _explain_schema_error(name: str, fields: dict[str, Any], error: Exception) -> Exception:
    for parameter, (annotation, _) in fields.items():
        try:
            TypeAdapter(annotation).json_schema()
        except _SCHEMA_ERRORS as inner:
            return ToolDefinitionError(
                f"tool {name!r}: parameter {parameter!r} has type {type_name(annotation)}, "
                f"which has no JSON Schema: {_reason(inner)}"
            )
    return ToolDefinitionError(f"tool {name!r}: cannot build its schema: {_first_line(error)}")


def not_strict_parameter(model: type[BaseModel]) -> tuple[str, str] | None:
    """The first field whose type has no strict schema form: (name, readable type)."""
    for parameter, info in model.model_fields.items():
        if info.annotation is None:
            continue
        try:
            to_strict(TypeAdapter(info.annotation).json_schema())
        except NotStrictError:
            return parameter, type_name(info.annotation)
        except _SCHEMA_ERRORS:
            continue
    return None


def type_name(annotation: Any) -> str:
    """A readable name for a type annotation: ``int``, ``list[str]``, ``Point``."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and not get_args(annotation):
        text = annotation.__qualname__
    else:
        text = repr(annotation)
    return _QUALIFIER.sub("", text)


def _reason(error: Exception) -> str:
    if isinstance(error, PydanticSchemaGenerationError):
        # pydantic's own advice (arbitrary_types_allowed, model_config) does not apply here.
        return (
            _first_line(error).split(". ", 1)[0]
            + "; use a type pydantic knows: a standard type, a pydantic model, a dataclass "
            "or a TypedDict"
        )
    return _first_line(error)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
