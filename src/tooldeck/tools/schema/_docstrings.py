"""A function's docstring -> the tool description and one description per parameter.

Google, NumPy and Sphinx styles are detected automatically and parsed with griffe, which is
imported only when a docstring has more than a summary.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

# griffe's Sphinx heuristic wants a line break after the field line, so a docstring that
# ends with its only ``:param x: ...`` line goes undetected; this catches that case.
_SPHINX_FIELD = re.compile(r"^[ \t]*:(?:param|parameter|arg|argument|key|keyword)\b", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ParsedDocstring:
    description: str = ""
    """The prose of the docstring, without the parameter/returns/raises sections."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Parameter name -> its description."""


def parse_docstring(docstring: str | None) -> ParsedDocstring:
    """Split ``docstring`` into the tool description and the parameter descriptions."""
    if not docstring:
        return ParsedDocstring()
    text = inspect.cleandoc(docstring)
    if "\n" not in text:
        return ParsedDocstring(text)
    return _parse_with_griffe(text)


def _parse_with_griffe(text: str) -> ParsedDocstring:
    from griffe import (
        Docstring,
        DocstringSectionParameters,
        DocstringSectionText,
        Parser,
        infer_docstring_style,
    )

    docstring = Docstring(text)
    style, _ = infer_docstring_style(docstring)
    if style is None and _SPHINX_FIELD.search(text):
        style = Parser.sphinx
    if style is None:
        return ParsedDocstring(text)
    sections = docstring.parse(style, warn_missing_types=False, warnings=False)
    prose = [s.value for s in sections if isinstance(s, DocstringSectionText) and s.value]
    parameters = {
        parameter.name: " ".join(parameter.description.split())
        for section in sections
        if isinstance(section, DocstringSectionParameters)
        for parameter in section.value
        if parameter.description
    }
    return ParsedDocstring("\n\n".join(prose).strip(), parameters)
