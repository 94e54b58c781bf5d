"""The many-tools plot and table (docs/evaluation.md, bench/README.md) from stored eval runs.

Reads ``tooldeck eval bfcl:many_tools ... --out FILE`` result files, each given as
``LABEL=FILE`` (a label per model or per library version), and the search's own recall
(``tooldeck eval bfcl:many_tools --recall --json``, same ``--limit``); prints the markdown
table and writes the PNG::

    .venv/bin/python bench/many_tools_plot.py --recall recall.json \\
        "embedded=local.jsonl" "llama.cpp server=server.jsonl" \\
        --png docs/images/many-tools.png

Accuracy is BFCL's (the scored turn's calls, checked by BFCL's rules); tokens per request
are the model's input tokens over its requests (a searching case makes two or more).
``all`` (every one of the 1,842 tools shown) is drawn as the estimate the suite refuses
it with, against the model's context, when no run holds it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODES = ("own", "search", "all")
ALL_TOOLS_TOKENS = 305_300
"""Input tokens a request showing every tool would take (the suite's estimate, JSON / 4)."""


@dataclass
class Row:
    label: str
    mode: str
    questions: str
    cases: int = 0
    correct: int = 0
    called: int = 0
    """Cases whose scored turn called a tool (right or wrong), not answered in text."""
    requests: int = 0
    input_tokens: int = 0

    @property
    def accuracy(self) -> float:
        return self.correct / self.cases if self.cases else 0.0

    @property
    def per_request(self) -> float:
        return self.input_tokens / self.requests if self.requests else 0.0


def read_rows(runs: list[tuple[str, Path]]) -> list[Row]:
    """One row per (label, mode, question category), in the order met, plus a row per
    (label, mode) over both categories."""
    rows: dict[tuple[str, str, str], Row] = {}
    for label, path in runs:
        for line in path.read_text().splitlines():
            record: dict[str, Any] = json.loads(line)
            if "format" in record:  # the file's header
                continue
            mode, _, questions = record["category"].partition("/")
            for key in ((label, mode, questions), (label, mode, "both")):
                row = rows.setdefault(key, Row(*key))
                row.cases += 1
                row.correct += bool(record["correct"])
                row.called += bool(record["made_call"])
                row.requests += record["requests"] or 0
                row.input_tokens += record["input_tokens"] or 0
    labels = [label for label, _ in runs]
    order = {"simple_python": 0, "multiple": 1, "both": 2}
    return sorted(
        rows.values(),
        key=lambda row: (labels.index(row.label), MODES.index(row.mode), order[row.questions]),
    )


def markdown(rows: list[Row], recall: dict[str, Any]) -> str:
    found = {row["category"].partition("/")[2] or "both": row for row in recall["summary"]}
    lines = [
        "| model | mode | questions | cases | accuracy (BFCL) | called a tool | requests/case "
        "| input tokens/request | search recall@5 (the question as query) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        hit = found.get(row.questions) if row.mode == "search" else None
        shown = f"{hit['recall@5']:.0%}" if hit else "–"
        lines.append(
            f"| {row.label} | {row.mode} | {row.questions} | {row.cases} "
            f"| {row.accuracy:.0%} ({row.correct}/{row.cases}) | {row.called}/{row.cases} "
            f"| {row.requests / row.cases:.2f} "
            f"| {row.per_request:,.0f} | {shown} |"
        )
    return "\n".join(lines)


def plot(rows: list[Row], recall: dict[str, Any], png: Path, contexts: dict[str, int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    both = [row for row in rows if row.questions == "both"]
    labels = list(dict.fromkeys(row.label for row in both))
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / max(1, len(labels))
    for place, label in enumerate(labels):
        mine = {row.mode: row for row in both if row.label == label}
        ran = [index for index, mode in enumerate(MODES) if mode in mine]
        xs = [index + place * width for index in ran]
        bars = left.bar(xs, [mine[MODES[i]].accuracy * 100 for i in ran], width, label=label)
        for bar, index in zip(bars, ran, strict=True):
            row = mine[MODES[index]]
            left.annotate(f"{row.correct}/{row.cases}", (bar.get_x() + width / 2,
                          bar.get_height()), ha="center", va="bottom", fontsize=8)  # fmt: skip
        right.bar(xs, [mine[MODES[i]].per_request for i in ran], width, label=label)
    last = MODES.index("all")
    if not any(row.mode == "all" for row in both):  # not run: the suite's estimate
        centre_all = last + width * (len(labels) - 1) / 2
        right.bar([centre_all], [ALL_TOOLS_TOKENS], width * len(labels), color="lightgrey",
                  hatch="//", edgecolor="grey")  # fmt: skip
        left.text(centre_all, 2, "not run:\ndoes not fit", ha="center", fontsize=8)
    recall_at_5 = next(row["recall@5"] for row in recall["summary"] if row["category"] == "all")
    left.axhline(recall_at_5 * 100, color="grey", linestyle="--", linewidth=1)
    left.text(-0.4, recall_at_5 * 100 + 1.5, f"search recall@5, the question as query: "
              f"{recall_at_5:.0%}", fontsize=8, color="grey")  # fmt: skip
    centre = [index + width * (len(labels) - 1) / 2 for index in range(len(MODES))]
    for axis in (left, right):
        axis.set_xticks(centre, MODES)
        axis.set_xlabel("tools shown")
    left.set_ylabel("accuracy, % (BFCL's rules)")
    left.set_title("Accuracy on a registry of 1,842 tools")
    right.set_yscale("log")
    right.set_ylabel("input tokens per request (log)")
    right.set_title("Input tokens per request (hatched: estimate)")
    for name, size in contexts.items():
        right.axhline(size, color="grey", linestyle=":", linewidth=1)
        right.text(0.55, size * 1.1, name, fontsize=8, color="grey")
    left.set_ylim(0, 115)
    left.legend(fontsize=8, loc="upper right", bbox_to_anchor=(1.0, 0.93))
    figure.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(png, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="LABEL=FILE")
    parser.add_argument("--recall", type=Path, required=True, help="--recall --json output")
    parser.add_argument("--png", type=Path, help="write the plot here")
    args = parser.parse_args(argv)
    runs = [(label, Path(path)) for label, _, path in (run.partition("=") for run in args.runs)]
    rows = read_rows(runs)
    recall = json.loads(args.recall.read_text())
    print(markdown(rows, recall))
    if args.png:
        contexts = {"context 8,192 (embedded)": 8192, "context 32,768 (Gemma 3 270M)": 32768}
        plot(rows, recall, args.png, contexts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
