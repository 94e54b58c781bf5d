"""A simulator script read from a JSON or YAML file (``python -m tooldeck.testing serve``).

The file holds a list of steps, or an object with ``steps``, ``rules`` and ``model``::

    {"model": "gpt-4.1-mini",
     "steps": [
       {"call": "refund_order", "arguments": {"order_id": "A1"}},
       {"calls": [{"name": "lookup", "arguments": {"id": 1}},
                  {"name": "lookup", "arguments": {"id": 2}}]},
       {"fail": "status", "status": 429, "retry_after": 1},
       {"fail": "hang"},
       {"fail": "cut_stream", "after_chunks": 2},
       {"fail": "slow_first_byte", "seconds": 2.0, "answer": {"reply": "Late, but here."}},
       {"reply": "Refunded."}],
     "rules": [
       {"when": {"last_user_contains": "refund"},
        "then": {"call": "refund_order", "arguments": {"order_id": "A1"}}, "times": 1}]}

A step is one of ``{"reply": TEXT}``, ``{"call": NAME, "arguments": {...}, "text": TEXT}``,
``{"calls": [{"name": NAME, "arguments": {...}}, ...], "text": TEXT}`` or ``{"fail": KIND,
...}`` with KIND ``status`` (``status``, ``retry_after``, ``message``), ``hang``,
``cut_stream`` (``after_chunks``, ``answer``) or ``slow_first_byte`` (``seconds``,
``answer``). A rule's ``when`` is one of ``last_user_contains``,
``last_tool_result_contains`` or ``after_tool``; its ``then`` a step or a list of steps.

Whatever is wrong is a ``ScriptError`` naming the file, the step (or rule) and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
)
from pydantic import ValidationError as _Invalid
from pydantic_core import PydanticCustomError

from tooldeck.errors import ToolDeckError
from tooldeck.testing import rules as _rules
from tooldeck.testing import steps as _steps
from tooldeck.testing.simulator import DEFAULT_MODEL

MAX_DEPTH = 32
"""Nesting a script may have (a step inside a rule inside the file is 4 deep)."""


class ScriptError(ToolDeckError, ValueError):
    """A simulator script that cannot be read, naming the file, the step and the field."""

    docs = "testing.md#a-script-in-a-file"

    def __init__(self, message: str, source: str = "", where: str = "") -> None:
        super().__init__(message)
        self.source = source
        """The file (or the name given for the data)."""
        self.where = where
        """The step or rule, e.g. ``step 3`` or ``rule 1, then``; empty for the whole file."""


@dataclass(frozen=True, slots=True)
class LoadedScript:
    """What a script file holds: the steps, the rules and the model's name."""

    steps: tuple[_steps.Step, ...]
    rules: tuple[_rules.Rule, ...]
    model: str


def _arguments(value: object) -> object:
    if isinstance(value, dict | str):
        return value
    raise PydanticCustomError("arguments", "an object, or JSON text (a string)")


_Arguments = Annotated[dict[str, Any] | str, BeforeValidator(_arguments)]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Reply(_Shape):
    reply: StrictStr


class _Call(_Shape):
    call: StrictStr
    arguments: _Arguments = Field(default_factory=dict)
    text: StrictStr = ""


class _CallItem(_Shape):
    name: StrictStr
    arguments: _Arguments = Field(default_factory=dict)


class _Calls(_Shape):
    calls: list[_CallItem] = Field(min_length=1)
    text: StrictStr = ""


class _Status(_Shape):
    fail: Literal["status"]
    status: StrictInt
    retry_after: StrictFloat | None = None
    message: StrictStr = ""


class _Hang(_Shape):
    fail: Literal["hang"]


class _Cut(_Shape):
    fail: Literal["cut_stream"]
    after_chunks: StrictInt = 1
    answer: dict[str, Any] | None = None


class _Slow(_Shape):
    fail: Literal["slow_first_byte"]
    seconds: StrictFloat
    answer: dict[str, Any] | None = None


class _When(_Shape):
    last_user_contains: StrictStr | None = None
    last_tool_result_contains: StrictStr | None = None
    after_tool: StrictStr | None = None


class _Rule(_Shape):
    when: dict[str, Any]
    then: dict[str, Any] | list[Any]
    times: StrictInt | None = None


class _File(_Shape):
    steps: list[Any] = Field(default_factory=list)
    rules: list[Any] = Field(default_factory=list)
    model: StrictStr = DEFAULT_MODEL


_FAILURES: dict[str, type[_Shape]] = {
    "status": _Status,
    "hang": _Hang,
    "cut_stream": _Cut,
    "slow_first_byte": _Slow,
}
_KINDS = ("reply", "call", "calls", "fail")


def load_script(path: str | Path) -> LoadedScript:
    """The script in ``path``: JSON (``.json``), or YAML (``.yaml``/``.yml``)."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise ScriptError(f"{source}: cannot read the script: {error}", source) from error
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScriptError(
            f"{source}: not UTF-8 text (byte {error.start}): save the script as UTF-8", source
        ) from error
    if Path(path).suffix.lower() in (".yaml", ".yml"):
        data = _yaml(text, source)
    else:
        data = _json(text, source)
    return read_script(data, source)


def _json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ScriptError(
            f"{source}: line {error.lineno}, column {error.colno}: not JSON: {error.msg}", source
        ) from error
    except RecursionError as error:
        raise ScriptError(f"{source}: nested too deeply to read", source) from error


def _yaml(text: str, source: str) -> Any:
    try:
        import yaml
    except ImportError as error:
        raise ScriptError(
            f"{source}: YAML scripts need PyYAML: pip install 'tooldeck[testing]'", source
        ) from error

    class NoAliases(yaml.SafeLoader):
        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            if self.check_event(yaml.AliasEvent):
                mark = self.current_event.start_mark  # the alias check_event just read
                raise yaml.MarkedYAMLError(
                    problem="aliases (*name) are not read: write the value out",
                    problem_mark=mark,
                )
            return super().compose_node(parent, index)

    try:
        return yaml.load(text, Loader=NoAliases)  # a SafeLoader that reads no aliases
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ScriptError(f"{source}: {where}not YAML: {error.problem or error}", source) from error
    except yaml.YAMLError as error:
        raise ScriptError(f"{source}: not YAML: {error}", source) from error
    except RecursionError as error:
        raise ScriptError(f"{source}: nested too deeply to read", source) from error


def read_script(data: object, source: str = "<script>") -> LoadedScript:
    """A script from parsed JSON/YAML data: a list of steps, or an object with ``steps``,
    ``rules`` and ``model``."""
    _check_depth(data, source)
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, Mapping):
        raise ScriptError(
            f"{source}: a script is a list of steps or an object with 'steps', got "
            f"{type(data).__name__}",
            source,
        )
    shape = _validated(_File, data, source, "the script")
    steps = tuple(_step(step, source, f"step {n}") for n, step in enumerate(shape.steps, 1))
    rules = tuple(_rule(given, source, f"rule {n}") for n, given in enumerate(shape.rules, 1))
    if not steps and not rules:
        raise ScriptError(f"{source}: the script has no steps and no rules", source)
    return LoadedScript(steps, rules, shape.model)


def _check_depth(data: object, source: str) -> None:
    pending: list[tuple[object, int]] = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise ScriptError(f"{source}: nested more than {MAX_DEPTH} deep", source)
        if isinstance(value, Mapping):
            pending.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            pending.extend((item, depth + 1) for item in value)


_S = TypeVar("_S", bound=_Shape)


def _validated(shape: type[_S], data: object, source: str, where: str) -> _S:
    try:
        return shape.model_validate(data)
    except _Invalid as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        named = f"field {field!r}: " if field else ""
        given = f", got {first['input']!r}" if first["type"] != "missing" else ""
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        raise ScriptError(
            f"{source}: {where}: {named}{first['msg']}{given}{more}", source, where
        ) from error


def _step(data: object, source: str, where: str) -> _steps.Step:
    if not isinstance(data, Mapping):
        raise ScriptError(
            f'{source}: {where}: a step is an object such as {{"reply": "..."}}, got {data!r}',
            source,
            where,
        )
    kinds = [kind for kind in _KINDS if kind in data]
    if len(kinds) != 1:
        found = ", ".join(repr(key) for key in data) or "no field"
        raise ScriptError(
            f"{source}: {where}: a step has one of 'reply', 'call', 'calls' or 'fail', got {found}",
            source,
            where,
        )
    try:
        return _build(kinds[0], data, source, where)
    except (TypeError, ValueError) as error:
        if isinstance(error, ScriptError):
            raise
        raise ScriptError(f"{source}: {where}: {error}", source, where) from error


def _build(kind: str, data: Mapping[str, Any], source: str, where: str) -> _steps.Step:
    if kind == "reply":
        return _steps.reply(_validated(_Reply, data, source, where).reply)
    if kind == "call":
        one = _validated(_Call, data, source, where)
        return _steps.call(one.call, one.arguments, text=one.text)
    if kind == "calls":
        many = _validated(_Calls, data, source, where)
        return _steps.call(*((item.name, item.arguments) for item in many.calls), text=many.text)
    failure = data["fail"]
    shape = _FAILURES.get(failure) if isinstance(failure, str) else None
    if shape is None:
        raise ScriptError(
            f"{source}: {where}: field 'fail': one of {', '.join(map(repr, _FAILURES))}, got "
            f"{failure!r}",
            source,
            where,
        )
    return _failure(_validated(shape, data, source, where), source, where)


def _failure(shape: _Shape, source: str, where: str) -> _steps.Step:
    if isinstance(shape, _Status):
        return _steps.fail.status(
            shape.status, retry_after=shape.retry_after, message=shape.message
        )
    if isinstance(shape, _Cut):
        answer = _answer(shape.answer, source, where)
        return _steps.fail.cut_stream(shape.after_chunks, answer=answer)
    if isinstance(shape, _Slow):
        answer = _answer(shape.answer, source, where)
        return _steps.fail.slow_first_byte(shape.seconds, answer=answer)
    return _steps.fail.hang()


def _answer(data: dict[str, Any] | None, source: str, where: str) -> _steps.Answer | None:
    if data is None:
        return None
    step = _step(data, source, f"{where}, answer")
    if not isinstance(step, _steps.Reply | _steps.Calls):
        raise ScriptError(
            f"{source}: {where}, answer: a reply, a call or calls, not a failure", source, where
        )
    return step


def _rule(data: object, source: str, where: str) -> _rules.Rule:
    shape = _validated(_Rule, data, source, where)
    when = _validated(_When, shape.when, source, f"{where}, when")
    tests = {name: value for name, value in when.model_dump().items() if value is not None}
    if len(tests) != 1:
        raise ScriptError(
            f"{source}: {where}, when: one of 'last_user_contains', "
            f"'last_tool_result_contains' or 'after_tool', got {len(tests)}",
            source,
            where,
        )
    ((name, value),) = tests.items()
    predicate = _PREDICATES[name](value)
    then: _steps.Step | Sequence[_steps.Step]
    if isinstance(shape.then, list):
        then = [_step(step, source, f"{where}, then {n}") for n, step in enumerate(shape.then, 1)]
        if not then:
            raise ScriptError(f"{source}: {where}, then: an empty list", source, where)
    else:
        then = _step(shape.then, source, f"{where}, then")
    try:
        return _rules.rule(predicate, then, times=shape.times)
    except (TypeError, ValueError) as error:
        raise ScriptError(f"{source}: {where}: {error}", source, where) from error


_PREDICATES = {
    "last_user_contains": _rules.last_user_contains,
    "last_tool_result_contains": _rules.last_tool_result_contains,
    "after_tool": _rules.after_tool,
}
