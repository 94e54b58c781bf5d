"""The report's plots, drawn by matplotlib and kept as inline SVG (text as text: small).

matplotlib is imported here only (the ``eval`` extra); figures are made without pyplot,
so nothing global changes and no display is needed.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from tooldeck.eval.report import Confusion, EvalReport

_WIDTH_IN = 7.5


def accuracy_svg(report: EvalReport) -> str:
    """Accuracy per category, one bar per model in each category."""
    with _style("accuracy"):
        return _svg(_accuracy_figure(report))


def _accuracy_figure(report: EvalReport) -> Any:
    from matplotlib.figure import Figure

    models, categories = report.models, report.categories
    rows = {(s.model, s.category): s.accuracy for s in report.summary(overall=False)}
    height = 0.8 / max(1, len(models))
    figure = Figure(figsize=(_WIDTH_IN, 0.9 + 0.3 * len(categories) * max(1, len(models))))
    axes = figure.add_subplot()
    for index, model in enumerate(models):
        offsets = [c + index * height for c in range(len(categories))]
        values = [rows.get((model, category), 0.0) * 100 for category in categories]
        bars = axes.barh(offsets, values, height=height, label=model)
        axes.bar_label(bars, fmt="%.0f%%", padding=2, fontsize=8)
    axes.set_yticks([c + height * (len(models) - 1) / 2 for c in range(len(categories))])
    axes.set_yticklabels(categories)
    axes.invert_yaxis()
    axes.set_xlim(0, 110)
    axes.set_xlabel("accuracy (% of cases right)")
    axes.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False)
    figure.tight_layout()
    return figure


def confusion_svg(report: EvalReport) -> str:
    """The call/no-call decision of each model: expected (rows) against made (columns)."""
    from matplotlib.figure import Figure

    with _style("confusion"):
        matrices = report.confusion()
        figure = Figure(figsize=(min(_WIDTH_IN, 2.8 * len(matrices) + 0.6), 2.8))
        for index, matrix in enumerate(matrices, 1):
            _confusion_axes(figure.add_subplot(1, len(matrices), index), matrix)
        figure.tight_layout()
        return _svg(figure)


def _confusion_axes(axes: Any, matrix: Confusion) -> None:
    counts = [
        [matrix.called_when_expected, matrix.answered_when_expected],
        [matrix.called_when_not, matrix.answered_when_not],
    ]
    most = max(1, max(max(row) for row in counts))
    axes.imshow(counts, cmap="Blues", vmin=0, vmax=most)
    for row, values in enumerate(counts):
        for column, count in enumerate(values):
            color = "white" if count > most / 2 else "black"  # readable on dark cells
            axes.text(column, row, str(count), ha="center", va="center", fontsize=11, color=color)
    axes.set_xticks([0, 1], ["called", "answered"])
    axes.set_yticks([0, 1], ["call\nexpected", "no call\nexpected"])
    axes.set_title(_short(matrix.model), fontsize=9)


def latency_svg(report: EvalReport) -> str:
    """Seconds per case, a box per model (each case a dot over it)."""
    with _style("latency"):
        return _svg(_latency_figure(report))


def _latency_figure(report: EvalReport) -> Any:
    from matplotlib.figure import Figure

    models = report.models
    seconds = [[r.seconds for r in report.of(model)] for model in models]
    figure = Figure(figsize=(_WIDTH_IN, 0.8 + 0.55 * len(models)))
    axes = figure.add_subplot()
    axes.boxplot(seconds, orientation="horizontal", widths=0.5, showfliers=False)
    for index, values in enumerate(seconds, 1):
        axes.scatter(values, [index] * len(values), s=6, alpha=0.4)
    axes.set_yticks(range(1, len(models) + 1), [_short(m) for m in models])
    axes.invert_yaxis()
    axes.set_xlabel("seconds per case")
    if _spread(seconds) > 50:
        axes.set_xscale("log")
    figure.tight_layout()
    return figure


def _spread(groups: Sequence[Sequence[float]]) -> float:
    values = [v for group in groups for v in group if v > 0]
    return max(values) / min(values) if values else 1.0


def _short(model: str) -> str:
    return model if len(model) <= 32 else model[:31] + "…"


def _style(name: str) -> Any:
    """The plots' style; SVG ids salted by ``name`` so two plots in one page do not collide."""
    import matplotlib

    return matplotlib.rc_context(
        {
            "svg.fonttype": "none",  # text stays text: a smaller file, and searchable
            "svg.hashsalt": name,
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )


def _svg(figure: Any) -> str:
    """The figure as an ``<svg>`` element (without the XML prologue)."""
    buffer = io.StringIO()
    unstamped = {"Date": None, "Creator": None, "Format": None, "Type": None}
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata=unstamped)
    text = buffer.getvalue()
    return text[text.index("<svg") :]
