"""Stored results: a JSON-lines file that a run appends each scored case to as it finishes.

The first line of each run is its header ``{"format": "tooldeck-eval", "version": 1,
"started": ..., "settings": {...}}``; every other line is one ``CaseResult``. Appending as
cases finish is what makes a run resumable (``--resume`` reads the file and skips the cases
it holds) and comparable later (``--compare FILE`` adds its results to a report). A file
that cannot be read raises ``ResultFileError`` naming its line; nothing is skipped silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from tooldeck.eval.errors import ResultFileError
from tooldeck.eval.report import EvalReport
from tooldeck.eval.results import CaseResult

FORMAT = "tooldeck-eval"
VERSION = 1


@dataclass(frozen=True, slots=True)
class StoredRuns:
    """What a result file holds: its runs' headers and every result, in file order."""

    headers: tuple[dict[str, Any], ...]
    results: tuple[CaseResult, ...]

    @property
    def report(self) -> EvalReport:
        return EvalReport(self.results).merged()


def read_results(path: str | Path) -> StoredRuns:
    """Read a result file.

    Raises:
        ResultFileError: A line that is not JSON, not a header or result, or a first line
            that is not a header; the message names the file and the line.
        OSError: The file cannot be read.
    """
    headers: list[dict[str, Any]] = []
    results: list[CaseResult] = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            record = _record(path, number, line)
            if record.get("format") == FORMAT:
                headers.append(_header(path, number, record))
            elif not headers:
                raise ResultFileError(f"{path}, line {number}: not a tooldeck eval result file")
            else:
                results.append(_result(path, number, record))
    return StoredRuns(tuple(headers), tuple(results))


def _record(path: str | Path, number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as error:
        raise ResultFileError(f"{path}, line {number}: not JSON ({error})") from None
    if not isinstance(record, dict):
        raise ResultFileError(f"{path}, line {number}: expected a JSON object")
    return record


def _header(path: str | Path, number: int, record: dict[str, Any]) -> dict[str, Any]:
    if record.get("version") != VERSION:
        raise ResultFileError(
            f"{path}, line {number}: version {record.get('version')!r} of the result format; "
            f"this tooldeck reads version {VERSION}"
        )
    return record


def _result(path: str | Path, number: int, record: dict[str, Any]) -> CaseResult:
    try:
        return CaseResult.from_json(record)
    except ValueError as error:
        raise ResultFileError(f"{path}, line {number}: {error}") from None


class ResultWriter:
    """Appends a run's header, then each result as it is scored (flushed at once)."""

    def __init__(self, path: str | Path, settings: Mapping[str, Any], resume: bool) -> None:
        self.path = Path(path)
        if self.path.exists() and not resume:
            raise ResultFileError(
                f"{self.path} exists: resume it (--resume) or write to another file"
            )
        header = {
            "format": FORMAT,
            "version": VERSION,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "settings": dict(settings),
        }
        self._file: IO[str] = self.path.open("a", encoding="utf-8")
        self._write(header)

    def add(self, result: CaseResult) -> None:
        """Append one scored case (flushed at once)."""
        self._write(result.to_json())

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def _write(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()


def check_resumable(stored: StoredRuns, settings: Mapping[str, Any], path: str | Path) -> None:
    """Refuse to resume a run whose settings differ (its results would not compare)."""
    for header in stored.headers:
        if header.get("settings") != dict(settings):
            raise ResultFileError(
                f"{path} was run with settings {header.get('settings')!r}, not "
                f"{dict(settings)!r}: resume with the same settings, or write to another file"
            )
