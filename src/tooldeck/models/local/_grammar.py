"""GBNF grammars that make a local model's turn either a final answer or calls of real tools.

A turn has one of two shapes (``_prompt`` shows the model this format)::

    answer <text>
    call {"name": "<tool>", "arguments": <arguments>}      one line per call

Each tool's arguments follow that tool's own JSON Schema, converted to GBNF by llama.cpp's
converter (``llama_cpp.llama_grammar.SchemaConverter``), so the model cannot name a tool that
does not exist, and its arguments keep the schema's types, properties, enums and patterns.
Ranges (``minimum``/``maximum``) and string lengths, which the converter ignores or nests too
deep, are written by ``_bounds``; every value is bounded (digits, characters, items), so
a call always closes. Where the converter cannot express a schema (an unusual ``pattern``, a
keyword it does not know), that tool's arguments fall back to "any JSON object": the call
still names a real tool, and the loop still validates the arguments against the full schema,
answering a violation with ``invalid_arguments``.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tooldeck.errors import ModelError
from tooldeck.messages import ToolSpec
from tooldeck.models.base import ModelSettings
from tooldeck.models.local._bounds import JSON_CHAR, MAX_OPEN_ITEMS, PRIMITIVES, leaf_rule

CALL_PREFIX = "call "
ANSWER_PREFIX = "answer "
MAX_CALLS_PER_TURN = 8
"""At most this many calls in one turn (the grammar's bound; small models repeat themselves)."""

_ANY: dict[str, Any] = {"type": ["string", "number", "boolean", "null", "object", "array"]}
_STRUCTURAL = frozenset(
    ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "properties", "items")
) | {"prefixItems", "additionalProperties", "pattern"}
_DROPPED = frozenset(("description", "title", "default", "examples", "$schema", "$id"))
_MAX_ITEMS = 64
"""The most items the grammar lets an array have (llama.cpp's converter nests one level per
item); a larger ``maxItems`` is cut to this, a larger ``minItems`` left to validation."""
_LEAF = re.compile(r'"\\"(tooldeck-leaf-[a-z0-9-]+)\\""')
"""A placeholder constant, as the converter writes it, for a leaf ``_bounds`` writes."""


@dataclass(frozen=True, slots=True)
class TurnSyntax:
    """What a prompt format adds to the two shapes of a turn."""

    multiline_answer: bool
    """Whether an answer may span lines (a chat template ends a turn with its own token)."""
    end_of_calls: str = ""
    """Text the model may write after its calls to end the turn; the engine strips it."""
    lead: str = ""
    """Text the model writes before either shape: the prompt stops short of it, because the
    tokenizer joins it with the word after it (the transcript's space after ``assistant:``)."""


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """What one turn may contain, from the request's tools and tool choice."""

    allow_answer: bool
    tools: tuple[ToolSpec, ...]
    """The tools the turn may call; empty when it must answer."""
    max_calls: int

    def only_calls(self) -> TurnPlan:
        return replace(self, allow_answer=False)

    def only_answer(self) -> TurnPlan:
        return TurnPlan(allow_answer=True, tools=(), max_calls=0)


def plan_turn(
    tools: Sequence[ToolSpec], settings: ModelSettings, parallel_by_default: bool = False
) -> TurnPlan:
    """The shape a turn may take; a tool choice that cannot be met is a ModelError.

    ``settings.parallel_tool_calls=None`` leaves it to the model: ``parallel_by_default``.
    """
    choice = settings.tool_choice
    parallel = settings.parallel_tool_calls
    max_calls = MAX_CALLS_PER_TURN if (parallel_by_default if parallel is None else parallel) else 1
    if choice == "none" or (choice == "auto" and not tools):
        return TurnPlan(allow_answer=True, tools=(), max_calls=0)
    if choice == "auto":
        return TurnPlan(allow_answer=True, tools=tuple(tools), max_calls=max_calls)
    if not tools:
        raise ModelError(f"tool_choice={choice!r} asks for a tool call, but no tools were given")
    if choice == "required":
        return TurnPlan(allow_answer=False, tools=tuple(tools), max_calls=max_calls)
    forced = tuple(spec for spec in tools if spec.name == choice)
    if not forced:
        names = ", ".join(repr(spec.name) for spec in tools)
        raise ModelError(f"tool_choice names {choice!r}, which is not one of the tools: {names}")
    return TurnPlan(allow_answer=False, tools=forced, max_calls=max_calls)


def call_head(name: str) -> str:
    """The text of a call line up to its arguments (what the model writes before them)."""
    return f'{CALL_PREFIX}{{"name": {json.dumps(name)}, "arguments": '


@dataclass(frozen=True, slots=True)
class BuiltGrammar:
    text: str
    loose: tuple[str, ...]
    """Tools whose arguments are constrained only to "a JSON object" (schema not expressible)."""


def build_grammar(
    plan: TurnPlan, syntax: TurnSyntax, is_valid: Callable[[str], bool]
) -> BuiltGrammar:
    """The GBNF for ``plan``; ``is_valid`` asks llama.cpp whether a grammar parses.

    A tool whose converted schema llama.cpp refuses is retried with the loose form.
    """
    pieces = {spec.name: _arguments_grammar(spec, index) for index, spec in enumerate(plan.tools)}
    text = _assemble(plan, pieces, syntax)
    if is_valid(text):
        return BuiltGrammar(text, tuple(name for name, piece in pieces.items() if piece.loose))
    for index, spec in enumerate(plan.tools):
        single = TurnPlan(allow_answer=False, tools=(spec,), max_calls=1)
        if not is_valid(_assemble(single, {spec.name: pieces[spec.name]}, syntax)):
            pieces[spec.name] = _loose_arguments(index)
    text = _assemble(plan, pieces, syntax)
    if not is_valid(text):
        raise ModelError("could not build a grammar for the tools' schemas (llama.cpp refused it)")
    return BuiltGrammar(text, tuple(name for name, piece in pieces.items() if piece.loose))


@dataclass(frozen=True, slots=True)
class _Arguments:
    rule: str
    """The rule name of the arguments object."""
    rules: tuple[str, ...]
    """GBNF lines defining it (and the primitives it uses)."""
    loose: bool = False


def _arguments_grammar(spec: ToolSpec, index: int) -> _Arguments:
    prefix = f"t{index}-"
    leaves: dict[str, str] = {}
    converter = _converter()
    try:
        prepared = _prepared(spec.parameters, prefix, leaves)
        schema = converter.resolve_refs(prepared, f"t{index}")
        rule = str(converter.visit(schema, f"{prefix}args"))
        return _Arguments(rule, _rules(converter, leaves))
    except Exception:  # the converter asserts or raises on what it cannot express
        return _loose_arguments(index)


def _loose_arguments(index: int) -> _Arguments:
    converter = _converter()
    rule = str(converter.visit({"type": "object"}, f"t{index}-args"))
    return _Arguments(rule, _rules(converter, {}), loose=True)


def _converter() -> Any:
    """llama.cpp's JSON Schema -> GBNF converter (untyped, hence Any)."""
    module: Any = importlib.import_module("llama_cpp.llama_grammar")
    return module.SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def _rules(converter: Any, leaves: Mapping[str, str]) -> tuple[str, ...]:
    """The converter's rules, with its JSON primitives replaced by bounded ones and each
    placeholder constant by the leaf it stands for."""
    lines = []
    placed = set()
    for line in str(converter.format_grammar()).splitlines():
        name, _, body = line.partition(" ::= ")
        leaf = _LEAF.fullmatch(body)
        if name in PRIMITIVES:
            body = PRIMITIVES[name]
        elif leaf is not None and leaf.group(1) in leaves:
            body = leaves[leaf.group(1)]
            placed.add(leaf.group(1))
        lines.append(f"{name} ::= {body}")
    if placed != leaves.keys():
        raise ValueError(f"the converter wrote no rule for {sorted(leaves.keys() - placed)}")
    return tuple(lines)


def _assemble(plan: TurnPlan, pieces: Mapping[str, _Arguments], syntax: TurnSyntax) -> str:
    branches: list[str] = []
    lines: list[str] = []
    if plan.allow_answer:
        branches.append("turn-answer")
        text = '[^\\n]+ ("\\n" [^\\n]*)*' if syntax.multiline_answer else '[^\\n]+ "\\n"'
        lines.append(f"turn-answer ::= {gbnf_literal(ANSWER_PREFIX)} {text}")
    if plan.tools:
        branches.append("turn-calls")
        repeat = f' ("\\n" turn-call){{0,{plan.max_calls - 1}}}' if plan.max_calls > 1 else ""
        end = f" {gbnf_literal(syntax.end_of_calls)}?" if syntax.end_of_calls else ""
        lines.append(f"turn-calls ::= turn-call{repeat}{end}")
        calls = [f"turn-call-{index}" for index in range(len(plan.tools))]
        lines.append(f"turn-call ::= {' | '.join(calls)}")
        for index, spec in enumerate(plan.tools):
            piece = pieces[spec.name]
            head = gbnf_literal(call_head(spec.name))
            lines.append(f'turn-call-{index} ::= {head} {piece.rule} "}}"')
            lines.extend(piece.rules)
        lines.append(f"json-char ::= {JSON_CHAR}")
    unique = dict.fromkeys(lines)  # primitives shared by several tools are defined once
    lead = f"{gbnf_literal(syntax.lead)} " if syntax.lead else ""
    return "\n".join([f"root ::= {lead}({' | '.join(branches)})", *unique]) + "\n"


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def _prepared(node: Any, prefix: str, leaves: dict[str, str]) -> Any:
    """A copy of a schema the converter handles: names of ``$defs`` made unique per tool,
    "any value" and lists of types spelled out as alternatives, documentation removed, and
    bounded leaves (ranges, lengths) replaced by placeholders recorded in ``leaves``."""
    if node is True:
        node = {}
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED or (key == "minItems" and value > _MAX_ITEMS):
            continue
        if key == "$defs":
            out[key] = {f"{prefix}{n}": _prepared(s, prefix, leaves) for n, s in value.items()}
        elif key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
            out[key] = f"#/$defs/{prefix}{value.removeprefix('#/$defs/')}"
        elif key == "properties":
            out[key] = {n: _prepared(s, prefix, leaves) for n, s in value.items()}
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = [_prepared(sub, prefix, leaves) for sub in value]
        elif key in ("items", "additionalProperties"):
            out[key] = _prepared(value, prefix, leaves)
        else:
            out[key] = value
    if not _STRUCTURAL & out.keys():
        out = {**_ANY, **out}
    if isinstance(out.get("type"), list):
        rest = {key: value for key, value in out.items() if key != "type"}
        kinds = out["type"]
        return {"anyOf": [_bounded({**rest, "type": kind}, prefix, leaves) for kind in kinds]}
    return _bounded(out, prefix, leaves)


def _bounded(node: dict[str, Any], prefix: str, leaves: dict[str, str]) -> dict[str, Any]:
    """``node`` with an item bound if it is an open array, or as a placeholder if it is a
    leaf ``_bounds`` writes (the converter would drop its range or length)."""
    if isinstance(node.get("items"), dict) and "prefixItems" not in node:
        return {**node, "maxItems": min(node.get("maxItems", MAX_OPEN_ITEMS), _MAX_ITEMS)}
    rule = leaf_rule(node)
    if rule is None:
        return node
    marker = f"tooldeck-leaf-{prefix}{len(leaves)}"
    leaves[marker] = rule
    return {"const": marker}
