"""FunctionTool and the ``@tool`` decorator: plain Python functions as tools."""

from __future__ import annotations

import inspect
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Generic, ParamSpec, TypeVar, overload

from pydantic import BaseModel
from typing_extensions import Unpack

from tooldeck.errors import ToolDefinitionError, ToolDefinitionWarning
from tooldeck.messages import ToolSpec
from tooldeck.tools._output import output_text
from tooldeck.tools._threads import run_in_thread
from tooldeck.tools.context import RunContext
from tooldeck.tools.options import ToolOptionArgs, ToolOptions
from tooldeck.tools.schema import function_schema, not_strict_parameter
from tooldeck.tools.schema._arguments import (
    ArgumentSchema,
    DeferredPydanticArguments,
    JsonSchemaArguments,
    PydanticArguments,
)
from tooldeck.tools.schema._strict import NotStrictError, to_strict

P = ParamSpec("P")
R = TypeVar("R")

_OWN_KEYWORDS = ("name", "description", "strict", "result_parser")
"""The keywords of ``@tool`` beside the options, offered when an option name is unknown."""

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What providers accept as a tool name (OpenAI's rule; the others' are no looser)."""


class FunctionTool(Generic[P, R]):
    """A Python callable the model can call, with the schema it is shown.

    Build one with ``@tool`` from a typed function, or directly with an explicit schema:
    ``FunctionTool(name=..., description=..., parameters=<pydantic model or JSON Schema dict>,
    handler=fn)``; the handler then receives the validated arguments as keywords.
    The tool stays callable as the plain function.
    """

    def __init__(
        self,
        name: str,
        description: str,
        parameters: type[BaseModel] | Mapping[str, Any] | ArgumentSchema,
        handler: Callable[P, R] | None,
        *,
        strict: bool = True,
        result_parser: Callable[[Any], str] | None = None,
        context_parameter: str | None = None,
        positional_only: tuple[str, ...] = (),
        **options: Unpack[ToolOptionArgs],
    ) -> None:
        _check_name(name)
        self.name = name
        self.description = description
        self.fn = handler
        """The function; None for an external tool, which the application runs itself."""
        self.arguments = _argument_schema(name, parameters)
        self.strict = strict
        self.is_async = handler is not None and (
            inspect.iscoroutinefunction(handler)
            or inspect.iscoroutinefunction(type(handler).__call__)
        )
        self.options = ToolOptions.of(name, options, is_async=self.is_async, keywords=_OWN_KEYWORDS)
        self.result_parser = result_parser or output_text
        self.context_parameter = context_parameter
        self.positional_only = positional_only
        self.spec = ToolSpec(
            name=name,
            description=description,
            parameters=_exposed_schema(name, self.arguments, strict),
            strict=strict,
        )
        self.origin = _origin(handler) if handler is not None else "external"
        """Where the function is defined (``file.py:12``), for error messages."""
        if not description.strip():
            warnings.warn(
                f"tool {name!r} has no description: the model sees only its name and "
                "parameters; add a docstring or pass description='...'",
                ToolDefinitionWarning,
                stacklevel=_caller_stacklevel(),
            )

    @property
    def external(self) -> bool:
        """True when the application, not tooldeck, runs this tool's calls."""
        return self.fn is None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.fn is None:
            raise TypeError(f"{self.name!r} is an external tool: the application runs its calls")
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r}, {self.origin})"

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the model's arguments; return the handler's keywords or raise InvalidArguments."""
        return self.arguments.validate(arguments, closed=self.strict)

    async def run(self, arguments: dict[str, Any], context: RunContext[Any]) -> str:
        """Call the function with validated arguments and return the observation text."""
        function: Callable[..., Any] | None = self.fn
        if function is None:
            raise TypeError(f"{self.name!r} is an external tool: the application runs its calls")
        if self.context_parameter is not None:
            arguments = {**arguments, self.context_parameter: context}
        args: list[Any] = []
        if self.positional_only:
            arguments = dict(arguments)
            args = [arguments.pop(name) for name in self.positional_only]
        if self.is_async:
            value = await function(*args, **arguments)
        elif self.options.inline:
            value = function(*args, **arguments)
        elif self.options.isolation == "process":
            from tooldeck.tools._process import run_in_process

            value = await run_in_process(partial(function, *args, **arguments))
        else:
            value = await run_in_thread(partial(function, *args, **arguments))
        return self.result_parser(value)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ToolDefinitionError(
            f"tool name {name!r} is not one providers accept: it must match "
            f"{TOOL_NAME.pattern} (letters, digits, '_' and '-', at most 64 characters); "
            "pass another with tool(name=...)"
        )


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside tooldeck: where the tool was made."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and _in_tooldeck(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        level += 1
    return level


def _in_tooldeck(module: str) -> bool:
    return module == "tooldeck" or module.startswith("tooldeck.")


def _argument_schema(
    name: str, parameters: type[BaseModel] | Mapping[str, Any] | ArgumentSchema
) -> ArgumentSchema:
    if isinstance(parameters, PydanticArguments | JsonSchemaArguments | DeferredPydanticArguments):
        return parameters
    if isinstance(parameters, type) and issubclass(parameters, BaseModel):
        return PydanticArguments(parameters)
    if isinstance(parameters, Mapping):
        if parameters.get("type", "object") != "object":
            raise ToolDefinitionError(
                f"tool {name!r}: the parameters schema must describe an object, "
                f"got type {parameters.get('type')!r}"
            )
        try:
            return JsonSchemaArguments(dict(parameters))
        except Exception as error:  # jsonschema.SchemaError, without importing it eagerly
            raise ToolDefinitionError(
                f"tool {name!r}: the parameters are not a valid JSON Schema: "
                f"{str(error).splitlines()[0]}"
            ) from error
    raise ToolDefinitionError(
        f"tool {name!r}: parameters must be a pydantic model class or a JSON Schema dict, "
        f"got {type(parameters).__name__}"
    )


def _exposed_schema(name: str, arguments: ArgumentSchema, strict: bool) -> dict[str, Any]:
    if not strict:
        return arguments.json_schema
    try:
        return to_strict(arguments.json_schema)
    except NotStrictError as error:
        culprit = None
        if isinstance(arguments, PydanticArguments):
            culprit = not_strict_parameter(arguments.model)
        where = f"parameter {culprit[0]!r} has type {culprit[1]}; " if culprit else ""
        raise ToolDefinitionError(
            f"tool {name!r} cannot use the strict schema form: {where}{error}; "
            "pass strict=False to allow it (providers then do not guarantee the arguments "
            "match the schema; tooldeck still validates them)"
        ) from None


def _origin(fn: Callable[..., Any]) -> str:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return type(fn).__name__
    return f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = True,
    result_parser: Callable[[Any], str] | None = None,
    **options: Unpack[ToolOptionArgs],
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = True,
    result_parser: Callable[[Any], str] | None = None,
    **options: Unpack[ToolOptionArgs],
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a function (sync or async, or a bound method) a tool the model can call.

    The schema comes from the type hints, the descriptions from the docstring (Google, NumPy
    or Sphinx style), ``Annotated[T, "text"]`` or ``Field(description=...)``.

    Args:
        fn: The function, when used as a bare ``@tool``.
        name: The name the model sees; defaults to the function's name.
        description: Defaults to the docstring's prose.
        strict: Expose the strict schema form (closed objects, nullable optionals).
        result_parser: Turns the return value into the observation text.
        **options: How the tool runs (ToolOptions): ``toolsets=`` (named groups for
            ``registry.view(toolsets=...)``), ``timeout=`` (seconds before ``tool_timeout``),
            ``retries=`` (consecutive failures before the run stops), ``sequential=``
            (never beside other calls), ``inline=`` (run a cheap sync function on the event
            loop, no thread hop), ``on_error=`` (exception -> the model's text, or
            ``"raise"``), ``requires_approval=`` (True, or a predicate
            ``(ctx, arguments) -> bool``: the run pauses for a person's decision),
            ``isolation=`` (``"process"``: a sync function runs in a worker process that its
            timeout kills, a fork per call; by default a worker thread, which cannot be
            stopped, so a call past its timeout may still finish), ``max_calls=`` (calls
            per run; the rest are answered as not run), ``max_concurrency=`` (calls at once
            across every run in the process), ``guardrails=``
            (functions or ``ToolGuardrail`` on the arguments and the result: see
            ``tooldeck.run.guardrails``).

    Examples:
        >>> @tool
        ... def add_numbers(left: int, right: int) -> int:
        ...     '''Add two integers.'''
        ...     return left + right
        >>> add_numbers(2, 3)
        5
    """
    localns = sys._getframe(1).f_locals

    def decorate(function: Callable[P, R]) -> FunctionTool[P, R]:
        tool_name = name or _function_name(function)
        schema = function_schema(function, tool_name, localns)
        return FunctionTool(
            tool_name,
            description if description is not None else schema.description,
            schema.arguments,
            function,
            strict=strict,
            result_parser=result_parser,
            context_parameter=schema.context_parameter,
            positional_only=schema.positional_only,
            **options,
        )

    return decorate if fn is None else decorate(fn)


def _function_name(function: Callable[..., Any]) -> str:
    name = getattr(function, "__name__", None)
    if not isinstance(name, str) or name == "<lambda>":
        raise ToolDefinitionError(
            f"cannot name a tool after {function!r}; pass name='...' to tool()"
        )
    return name


def external_tool(
    name: str,
    description: str,
    parameters: type[BaseModel] | Mapping[str, Any],
    *,
    strict: bool = True,
    toolsets: Iterable[str] = (),
) -> FunctionTool[..., Any]:
    """A tool the model may call but the application runs elsewhere (a browser, a phone...).

    A call of it pauses the run (``stop_reason == "paused"``); the application executes it
    and resumes the run with the outcome: ``agent.resume(checkpoint, {call_id: ToolResult})``.

    Examples:
        >>> from tooldeck import external_tool
        >>> locate = external_tool(
        ...     "locate_phone",
        ...     "Find where the user's phone is.",
        ...     {"type": "object", "properties": {}, "additionalProperties": False},
        ... )
        >>> locate.external
        True
    """
    return FunctionTool(name, description, parameters, None, strict=strict, toolsets=toolsets)
