"""The errors of ``tooldeck.eval``: a case file or a stored result file that cannot be read."""

from __future__ import annotations

from tooldeck.errors import ToolDeckError


class CaseFileError(ToolDeckError, ValueError):
    """A case file with a mistake; the message names the file, the line and the field."""

    def __init__(self, path: str, line: int | None, field: str, problem: str) -> None:
        where = f"{path}, line {line}" if line is not None else path
        spot = f", field {field!r}" if field else ""
        super().__init__(f"{where}{spot}: {problem}")
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem


class ResultFileError(ToolDeckError, ValueError):
    """A stored result file that cannot be read or continued; the message names the line."""


class UnknownSuite(ToolDeckError, LookupError):
    """A suite name that is neither a BFCL category nor a case file."""
