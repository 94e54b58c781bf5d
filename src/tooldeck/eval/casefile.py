"""A user's own cases: a JSON-lines file (one case a line) or a YAML file (a list of cases).

Each case::

    id: weather-tokyo              # optional: the case's number in the file
    category: weather              # optional: the file's name
    prompt: What's the weather like in Tokyo?   # or messages: [{role, content}, ...]
    system: You are a weather bot.  # optional
    tools: my_app.tools            # a module like the CLI's --tools (module:attr, file.py)
                                   # or a list of JSON Schema tools {name, description, parameters}
    expect:                        # exactly one of:
      calls:                       #   the first turn makes these calls (BFCL's form:
        - get_weather: {city: [Tokyo, tokyo], unit: [celsius, ""]}   # acceptable values,
      any_order: true              #   "" = may be left out)
      no_call: true                #   the first turn makes no call ("expect: no call" too)
      any_call: true               #   it makes some call ("expect: any call" too)
      answer: {contains: "24"}     #   the whole run's answer: contains, equals, matches
      output: {type: my_app.models:City, equals: {name: Tokyo}}   # a typed answer

A file with a mistake raises ``CaseFileError`` naming the file, the line and the field;
no case is run from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tooldeck.eval._casefields import CaseIn, problem_text
from tooldeck.eval._casetools import CaseBuilder
from tooldeck.eval.cases import EvalCase
from tooldeck.eval.errors import CaseFileError

Located = tuple[Any, Mapping[tuple[Any, ...], int]]
"""A parsed case and the line of each of its fields (by path), where known."""


def load_case_file(path: str | Path) -> list[EvalCase]:
    """The cases of a ``.jsonl`` or ``.yaml``/``.yml`` file.

    Raises:
        CaseFileError: A line that does not parse, a field that is missing or wrong, a tools
            module that cannot be loaded, an expected call of an unknown tool or parameter,
            or two cases with one id; the message names the line and the field.
        OSError: The file cannot be read.
    """
    where = Path(path)
    text = where.read_text(encoding="utf-8")
    if where.suffix in (".yaml", ".yml"):
        located = _yaml_cases(str(where), text)
    elif where.suffix == ".jsonl":
        located = _jsonl_cases(str(where), text)
    else:
        raise CaseFileError(str(where), None, "", "a case file ends in .jsonl, .yaml or .yml")
    if not located:
        raise CaseFileError(str(where), None, "", "the file holds no case")
    builder = CaseBuilder(str(where), where.parent)
    cases = [_case(builder, number, item) for number, item in enumerate(located, 1)]
    _check_unique(str(where), cases, located)
    return cases


def _case(builder: CaseBuilder, number: int, item: Located) -> EvalCase:
    data, lines = item
    start = lines.get((), None)
    try:
        fields = CaseIn.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        path = tuple(part for part in first["loc"] if not _is_variant(part))
        raise CaseFileError(
            builder.path, _line_of(lines, path, start), _dotted(path), problem_text(first)
        ) from None
    return builder.build(fields, number, lambda field: _line_of(lines, field, start))


def _is_variant(part: Any) -> bool:
    """pydantic names the branch of a union it tried (``str``, ``list[...]``): not a field."""
    return isinstance(part, str) and ("[" in part or part in ("str", "bool", "int"))


def _line_of(
    lines: Mapping[tuple[Any, ...], int], path: tuple[Any, ...], start: int | None
) -> int | None:
    """The line of ``path`` or of its nearest parent that has one."""
    for size in range(len(path), -1, -1):
        if path[:size] in lines:
            return lines[path[:size]]
    return start


def _dotted(path: Sequence[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _check_unique(path: str, cases: Sequence[EvalCase], located: Sequence[Located]) -> None:
    seen: dict[str, int] = {}
    for case, (_, lines) in zip(cases, located, strict=True):
        line = lines.get(("id",), lines.get(()))
        if case.id in seen:
            raise CaseFileError(
                path, line, "id", f"{case.id!r} is already the id of case {seen[case.id]}"
            )
        seen[case.id] = len(seen) + 1


def _jsonl_cases(path: str, text: str) -> list[Located]:
    found: list[Located] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as error:
            raise CaseFileError(path, number, "", f"not JSON: {error}") from None
        if not isinstance(data, dict):
            raise CaseFileError(path, number, "", "a case is a JSON object")
        found.append((data, {(): number}))
    return found


def _yaml_cases(path: str, text: str) -> list[Located]:
    try:
        import yaml
    except ImportError:
        problem = 'reading YAML needs PyYAML: pip install "tooldeck[eval]" (or use .jsonl)'
        raise CaseFileError(path, None, "", problem) from None

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        line = error.problem_mark.line + 1 if error.problem_mark is not None else None
        problem = " ".join(filter(None, (error.context, error.problem)))
        raise CaseFileError(path, line, "", f"not YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise CaseFileError(path, None, "", f"not YAML: {error}") from None
    if root is None:
        return []
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise CaseFileError(
            path, root.start_mark.line + 1, "", "a YAML case file is a list of cases"
        )
    return [(item, _node_lines(node)) for item, node in zip(data, root.value, strict=True)]


def _node_lines(node: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """The line of every field under a YAML node, by its path."""
    import yaml

    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines.update(_node_lines(value, (*path, key.value)))
            lines[(*path, key.value)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            lines.update(_node_lines(value, (*path, index)))
    return lines
