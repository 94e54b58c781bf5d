"""A case file's checked fields -> an ``EvalCase``: its tools, conversation and expectation.

Tools named by a module are loaded as the CLI's ``--tools`` loads them (a file path is read
from the case file's folder; a module that also defines guardrails, handoffs or an
untrusted policy is refused: a case runs without them); tools given as JSON Schemas become
tools with stub handlers (strict when their schema has a strict form). The scorer reads each
tool's parameters with JSON Schema type names (``scoring_parameters``), and a Python
function's arguments through its JSON Schema twin, so they are compared as the JSON the
model wrote.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tooldeck.errors import ToolDefinitionError
from tooldeck.eval._casefields import CaseIn, ExpectIn
from tooldeck.eval.cases import (
    EvalCase,
    ExpectAnswer,
    Expectation,
    ExpectCalls,
    ExpectDecision,
    ExpectOutput,
)
from tooldeck.eval.errors import CaseFileError
from tooldeck.messages import Message
from tooldeck.run.module_settings import module_settings
from tooldeck.tools import modules
from tooldeck.tools.function import FunctionTool
from tooldeck.tools.registry import ToolEntry

LineOf = Callable[[tuple[Any, ...]], int | None]


_SCORED_ALONE = (
    "a case scores the model's own calls and answer, with no guardrail, handoff or "
    "untrusted policy between them"
)


def _stub(**arguments: Any) -> str:
    return "ok"


class CaseBuilder:
    """Builds the cases of one file; a tools module is loaded once for all its cases."""

    def __init__(self, path: str, folder: Path) -> None:
        self.path = path
        self.folder = folder
        self._modules: dict[str, tuple[ToolEntry, ...]] = {}

    def build(self, fields: CaseIn, number: int, line_of: LineOf) -> EvalCase:
        tools, twins = self._tools(fields.tools, line_of)
        instructions, messages = _conversation(fields)
        return EvalCase(
            id=fields.id or str(number),
            suite=self.path,
            category=fields.category or Path(self.path).stem,
            messages=messages,
            tools=tools,
            expect=self._expect(fields.expect, tools, line_of),
            instructions=instructions,
            functions=tuple(_scoring_function(entry) for entry in tools),
            scoring_tools=twins,
        )

    def fail(self, line_of: LineOf, path: tuple[Any, ...], problem: str) -> CaseFileError:
        field = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path)
        return CaseFileError(self.path, line_of(path), field.replace(".[", "["), problem)

    def _tools(
        self, given: str | list[dict[str, Any]], line_of: LineOf
    ) -> tuple[tuple[ToolEntry, ...], tuple[FunctionTool[..., Any], ...]]:
        if isinstance(given, str):
            entries = self._module_tools(given, line_of)
            return entries, tuple(
                _twin(e.handler) for e in entries if isinstance(e.handler, FunctionTool)
            )
        built = []
        for index, definition in enumerate(given):
            try:
                built.append(ToolEntry.of(schema_tool(definition)))
            except (ToolDefinitionError, ValueError, KeyError, TypeError) as error:
                raise self.fail(line_of, ("tools", index), _said(error)) from None
        return tuple(built), ()

    def _module_tools(self, target: str, line_of: LineOf) -> tuple[ToolEntry, ...]:
        where, colon, attribute = target.rpartition(":")
        if not colon or not attribute.isidentifier():
            where, colon, attribute = target, "", ""
        if where.endswith(".py") and not Path(where).is_absolute():
            where = str(self.folder / where)
        resolved = f"{where}{colon}{attribute}"
        if resolved not in self._modules:
            try:
                registry, settings = module_settings(resolved)
                settings.refuse_unhonoured("tooldeck eval", settings.given, _SCORED_ALONE)
            except modules.TargetError as error:
                raise self.fail(line_of, ("tools",), str(error)) from None
            if registry.toolsets_registered:
                raise self.fail(
                    line_of,
                    ("tools",),
                    f"{target!r} holds a Toolset (an MCP server's tools): a case file takes "
                    "tools defined in Python; name those (module:attr)",
                )
            self._modules[resolved] = tuple(registry.view().dispatch.values())
        return self._modules[resolved]

    def _expect(self, expect: ExpectIn, tools: Sequence[ToolEntry], line_of: LineOf) -> Expectation:
        if expect.calls is not None:
            for index, call in enumerate(expect.calls):
                problem = _call_problem(call, tools)
                if problem:
                    raise self.fail(line_of, ("expect", "calls", index), problem)
            return ExpectCalls(tuple(expect.calls), any_order=expect.any_order)
        if expect.no_call or expect.any_call:
            return ExpectDecision(call=bool(expect.any_call))
        if expect.answer is not None:
            answer = expect.answer
            problem = _pattern_problem(answer.matches)
            if problem:
                raise self.fail(line_of, ("expect", "answer", "matches"), problem)
            return ExpectAnswer(answer.contains, answer.equals, answer.matches)
        assert expect.output is not None  # ExpectIn holds exactly one kind
        try:
            output_type = modules.load_object(expect.output.type, "output type")
        except modules.TargetError as error:
            raise self.fail(line_of, ("expect", "output", "type"), str(error)) from None
        if not isinstance(output_type, type):
            problem = f"{expect.output.type!r} is not a type"
            raise self.fail(line_of, ("expect", "output", "type"), problem)
        return ExpectOutput(output_type, expect.output.equals)


def schema_tool(definition: Mapping[str, Any]) -> FunctionTool[..., Any]:
    """A tool from ``{name, description, parameters}`` (or OpenAI's ``{"type": "function",
    "function": {...}}``), with a stub handler; strict when its schema has a strict form."""
    function = definition.get("function", definition)
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValueError("a tool is {name, description, parameters}: the name is missing")
    extra = set(function) - {"name", "description", "parameters", "strict"}
    if extra:
        raise ValueError(
            f"unknown keys {sorted(extra)}; a tool is {{name, description, parameters}}"
        )
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    description = function.get("description") or ""
    try:
        return FunctionTool(function["name"], description, parameters, _stub, strict=True)
    except ToolDefinitionError:
        return FunctionTool(function["name"], description, parameters, _stub, strict=False)


def _conversation(fields: CaseIn) -> tuple[str, tuple[Message, ...]]:
    if fields.prompt is not None:
        return fields.system, (Message(role="user", content=fields.prompt),)
    given = fields.messages or []
    system = [m.content for m in given if m.role == "system"]
    instructions = "\n".join([fields.system, *system] if fields.system else system)
    said = tuple(Message(role=m.role, content=m.content) for m in given if m.role != "system")
    return instructions, said


def _pattern_problem(pattern: str | None) -> str:
    """Why ``pattern`` is not a regular expression, or ``""``: a case is refused at load,
    not when its run is scored."""
    if pattern is None:
        return ""
    try:
        re.compile(pattern)
    except re.error as error:
        return f"{pattern!r} is not a regular expression (Python's re): {error}"
    return ""


def _call_problem(call: Mapping[str, Mapping[str, Any]], tools: Sequence[ToolEntry]) -> str:
    ((name, arguments),) = call.items()
    entry = next((e for e in tools if e.name == name), None)
    if entry is None:
        known = ", ".join(e.name for e in tools) or "none"
        return f"no tool {name!r} among the case's tools ({known})"
    properties = entry.spec.parameters.get("properties", {})
    unknown = [key for key in arguments if key not in properties]
    if unknown:
        return f"{name!r} has no parameter {unknown[0]!r} (it has: {', '.join(properties)})"
    return ""


def _twin(tool: FunctionTool[..., Any]) -> FunctionTool[..., Any]:
    """The tool's JSON Schema as a tool: it validates to JSON values, not Python objects."""
    schema = tool.arguments.json_schema
    try:
        return FunctionTool(tool.name, "twin", schema, _stub, strict=tool.strict)
    except ToolDefinitionError:
        return FunctionTool(tool.name, "twin", schema, _stub, strict=False)


def _scoring_function(entry: ToolEntry) -> dict[str, Any]:
    handler = entry.handler
    schema = (
        handler.arguments.json_schema
        if isinstance(handler, FunctionTool)
        else entry.spec.parameters
    )
    return {"name": entry.name, "parameters": scoring_parameters(schema)}


def scoring_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's JSON Schema as the scorer reads it: each parameter's one type name."""
    definitions = schema.get("$defs", {})
    properties = {
        name: _typed(node, definitions) for name, node in schema.get("properties", {}).items()
    }
    return {"type": "dict", "properties": properties, "required": list(schema.get("required", []))}


def _typed(given: Mapping[str, Any] | bool, definitions: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(given, bool):  # a boolean schema: any value (true) or none (false)
        return {"type": "any"}
    node = given
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        node = definitions.get(ref.removeprefix("#/$defs/"), {})
    for branch in (*node.get("anyOf", ()), *node.get("oneOf", ())):
        if not isinstance(branch, Mapping) or branch.get("type") != "null":
            return _typed(branch, definitions)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None:
        kind = "object" if "properties" in node else _enum_type(node.get("enum", ()))
    typed: dict[str, Any] = {"type": kind}
    if kind == "array" and isinstance(node.get("items"), Mapping):
        typed["items"] = _typed(node["items"], definitions)
    return typed


def _enum_type(values: Sequence[Any]) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return names.get(type(values[0]), "string") if values else "string"


def _said(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
