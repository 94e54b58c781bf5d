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

from tooldeck.eval._casefields import MAX_DEPTH, CaseIn, Located, dotted, problem_text
from tooldeck.eval._casetools import CaseBuilder
from tooldeck.eval.cases import EvalCase
from tooldeck.eval.errors import CaseFileError


def load_case_file(path: str | Path) -> list[EvalCase]:
    """The cases of a ``.jsonl`` or ``.yaml``/``.yml`` file.

    Raises:
        CaseFileError: A line that does not parse, a field that is missing or wrong, a tools
            module that cannot be loaded, an expected call of an unknown tool or parameter,
            or two cases with one id; the message names the line and the field.
        OSError: The file cannot be read.
    """
    where = Path(path)
    if where.suffix not in (".yaml", ".yml", ".jsonl"):
        raise CaseFileError(str(where), None, "", "a case file ends in .jsonl, .yaml or .yml")
    text = _utf8(str(where), where.read_bytes())
    if where.suffix == ".jsonl":
        located = _jsonl_cases(str(where), text)
    else:
        located = _yaml_cases(str(where), text)
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
            builder.path, _line_of(lines, path, start), dotted(path), problem_text(first)
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
        except RecursionError:
            raise CaseFileError(path, number, "", _TOO_DEEP) from None
        if not isinstance(data, dict):
            raise CaseFileError(path, number, "", "a case is a JSON object")
        deep = _too_deep(data)
        if deep is not None:
            raise CaseFileError(path, number, dotted(deep), _TOO_DEEP)
        found.append((data, {(): number}))
    return found


_TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"


def _too_deep(case: dict[str, Any]) -> tuple[Any, ...] | None:
    """The path of a value nested past ``MAX_DEPTH`` (counted as in a YAML file, where a
    case is the second level), or None."""
    pending: list[tuple[Any, tuple[Any, ...]]] = [(case, ())]
    while pending:
        value, path = pending.pop()
        if len(path) + 2 > MAX_DEPTH:
            return path
        if isinstance(value, dict):
            pending.extend((item, (*path, key)) for key, item in value.items())
        elif isinstance(value, list):
            pending.extend((item, (*path, index)) for index, item in enumerate(value))
    return None


def _utf8(path: str, data: bytes) -> str:
    """The file's text; a byte that is not UTF-8 is named with its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[: error.start]
        line = before.count(b"\n") + 1
        column = error.start - (before.rfind(b"\n") + 1) + 1
        bad = " ".join(f"0x{byte:02x}" for byte in data[error.start : error.end])
        problem = (
            f"not UTF-8 text: byte {bad} at column {column} ({error.reason}); save the file "
            "as UTF-8"
        )
        raise CaseFileError(path, line, "", problem) from None


def _yaml_cases(path: str, text: str) -> list[Located]:
    try:
        from tooldeck.eval._caseyaml import yaml_cases
    except ImportError as error:
        problem = 'reading YAML needs PyYAML: pip install "tooldeck[eval]" (or use .jsonl)'
        raise CaseFileError(path, None, "", problem) from error
    return yaml_cases(path, text)
