"""What ``tooldeck eval`` shows: a progress bar on stderr, the summary table on stdout."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tooldeck.eval import CaseResult, EvalReport
from tooldeck.eval.report import Summary, per_case, per_request, percent, tokens_per_case


@contextmanager
def progress(total: int) -> Iterator[Callable[[CaseResult], None]]:
    """A rich progress bar on stderr (only on a terminal); yields "one case is done"."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[green]{task.fields[right]} right"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    )
    task = bar.add_task("cases", total=total, right=0)
    right = 0

    def advance(result: CaseResult) -> None:
        nonlocal right
        right += result.correct
        bar.update(task, advance=1, right=right, description=result.model)

    with bar:
        yield advance


def show_table(report: EvalReport) -> None:
    """The summary per model and category, as a table on stdout."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="tooldeck eval")
    for name, numeric in _COLUMNS:
        table.add_column(name, justify="right" if numeric else "left")
    for row in report.summary():
        table.add_row(*_cells(row))
    console = Console()
    if not console.is_terminal:  # a file or a pipe: the whole table, nothing cut
        console = Console(width=200)
    console.print(table)


_COLUMNS = (
    ("model", False),
    ("category", False),
    ("cases", True),
    ("accuracy", True),
    ("strict", True),
    ("call decision", True),
    ("calls", True),
    ("schema-valid", True),
    ("s/case", True),
    ("requests/case", True),
    ("tool calls/case", True),
    ("tokens in/out per case", True),
    ("tokens/request", True),
    ("cost", True),
)


def _cells(row: Summary) -> list[str]:
    cost = "–" if row.cost is None else f"${row.cost:.4f}"
    return [
        row.model,
        row.category,
        str(row.cases),
        f"{row.accuracy:.1%}",
        f"{row.strict_accuracy:.1%}",
        percent(row.decision_accuracy),
        str(row.calls),
        percent(row.schema_valid),
        f"{row.mean_s:.2f}",
        per_case(row, row.requests),
        per_case(row, row.tool_calls),
        tokens_per_case(row),
        per_request(row),
        cost,
    ]
