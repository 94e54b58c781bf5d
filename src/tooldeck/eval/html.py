"""The HTML report: one self-contained file, readable offline, no request leaves the page.

Sections: the summary table; accuracy per category and model (bars), the call/no-call
confusion of each model, seconds per case (matplotlib, inline SVG); every case in a table
that filters by model, category, outcome and text, a failed case showing what was expected
beside what the model did. Everything the models wrote is escaped.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

try:  # here, so that a missing matplotlib fails before any work, saying what to install
    import matplotlib  # noqa: F401
except ImportError as missing:
    raise ImportError(
        f'the HTML report draws its plots with matplotlib ({missing}): pip install "tooldeck[eval]"'
    ) from missing

from tooldeck.eval._plots import accuracy_svg, confusion_svg, latency_svg
from tooldeck.eval.report import EvalReport, Summary, per_case, per_request, percent
from tooldeck.eval.results import CaseResult

_TEXT_SHOWN = 600
"""Characters of an answer shown in the case table."""

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:top}
td.n{text-align:right}tr.bad td.v{color:#b00020}tr.ok td.v{color:#1b7f3b}
pre{margin:0;white-space:pre-wrap;word-break:break-word;font-size:12px;max-width:34em}
.plot svg{max-width:100%;height:auto}#filters{display:flex;gap:1em;margin:1em 0}
.hidden{display:none}#shown{color:#666}
"""

_SCRIPT = """
const rows=[...document.querySelectorAll('#cases tbody tr')];
const pick=id=>document.getElementById(id);
function filter(){
  const m=pick('f-model').value,c=pick('f-category').value,o=pick('f-outcome').value;
  const q=pick('f-text').value.toLowerCase();let n=0;
  for(const r of rows){
    const show=(!m||r.dataset.model===m)&&(!c||r.dataset.category===c)&&
      (!o||r.dataset.outcome===o)&&(!q||r.textContent.toLowerCase().includes(q));
    r.classList.toggle('hidden',!show);if(show)n++;
  }
  pick('shown').textContent=n+' of '+rows.length+' cases';
}
for(const id of ['f-model','f-category','f-outcome','f-text'])
  pick(id).addEventListener('input',filter);
filter();
"""


def write_report(report: EvalReport, path: str | Path, title: str = "tooldeck eval") -> Path:
    """Write the report as one self-contained HTML file; returns its path."""
    target = Path(path)
    target.write_text(render_report(report, title), encoding="utf-8")
    return target


def render_report(report: EvalReport, title: str = "tooldeck eval") -> str:
    """The whole page as text."""
    results = len(report.results)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>{results} result{'' if results == 1 else 's'}; models: "
        f"{escape(', '.join(report.models))}</p>",
        '<h2 id="summary">Summary</h2>',
        _summary_table(report.summary()),
        '<h2>Accuracy per category</h2><div class="plot" id="plot-accuracy">',
        accuracy_svg(report),
        "</div><h2>Call or no call: the first turn's decision</h2>",
        '<div class="plot" id="plot-confusion">',
        confusion_svg(report),
        '</div><h2>Seconds per case</h2><div class="plot" id="plot-latency">',
        latency_svg(report),
        "</div>",
        _case_table(report),
        f"<script>{_SCRIPT}</script></body></html>",
    ]
    return "\n".join(parts)


def _summary_table(rows: list[Summary]) -> str:
    head = (
        "<tr><th>model</th><th>category</th><th>cases</th><th>accuracy</th><th>strict</th>"
        "<th>call decision</th><th>calls</th><th>schema-valid</th><th>s/case mean</th>"
        "<th>median</th><th>requests/case</th><th>tool calls/case</th><th>tokens in/out</th>"
        "<th>tokens in/request</th><th>cost</th></tr>"
    )
    body = "".join(
        f"<tr><td>{escape(r.model)}</td><td>{escape(r.category)}</td>"
        f'<td class="n">{r.cases}</td><td class="n">{r.accuracy:.1%}</td>'
        f'<td class="n">{r.strict_accuracy:.1%}</td>'
        f'<td class="n">{percent(r.decision_accuracy)}</td><td class="n">{r.calls}</td>'
        f'<td class="n">{percent(r.schema_valid)}</td><td class="n">{r.mean_s:.2f}</td>'
        f'<td class="n">{r.median_s:.2f}</td><td class="n">{per_case(r, r.requests)}</td>'
        f'<td class="n">{per_case(r, r.tool_calls)}</td><td class="n">{_tokens(r)}</td>'
        f'<td class="n">{per_request(r)}</td>'
        f'<td class="n">{_cost(r.cost)}</td></tr>'
        for r in rows
    )
    return f'<table id="summary-table"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _tokens(row: Summary) -> str:
    if row.input_tokens is None or row.output_tokens is None:
        return "–"
    return f"{row.input_tokens:,} / {row.output_tokens:,}"


def _cost(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


def _case_table(report: EvalReport) -> str:
    options = {
        "f-model": ["", *report.models],
        "f-category": ["", *report.categories],
        "f-outcome": ["", "failed", "passed"],
    }
    selects = "".join(
        f'<label>{name.removeprefix("f-")} <select id="{name}">'
        + "".join(f'<option value="{escape(v)}">{escape(v) or "all"}</option>' for v in values)
        + "</select></label>"
        for name, values in options.items()
    )
    head = (
        "<tr><th>model</th><th>case</th><th>category</th><th>result</th><th>expected</th>"
        "<th>made</th><th>answer</th><th>s</th></tr>"
    )
    body = "".join(_case_row(result) for result in report.results)
    return (
        '<h2 id="cases-title">Cases</h2>'
        f'<div id="filters">{selects}<label>text <input id="f-text" type="search"></label>'
        '<span id="shown"></span></div>'
        f'<table id="cases"><thead>{head}</thead><tbody>{body}</tbody></table>'
    )


def _case_row(result: CaseResult) -> str:
    outcome = "passed" if result.correct else "failed"
    verdict = "right" if result.correct else f"wrong: {result.reason}"
    text = result.text if len(result.text) <= _TEXT_SHOWN else result.text[:_TEXT_SHOWN] + "…"
    return (
        f'<tr class="{"ok" if result.correct else "bad"}" data-model="{escape(result.model)}" '
        f'data-category="{escape(result.category)}" data-outcome="{outcome}">'
        f"<td>{escape(result.model)}</td><td>{escape(result.id)}</td>"
        f'<td>{escape(result.category)}</td><td class="v">{escape(verdict)}</td>'
        f'<td class="expected"><pre>{_json(result.expected)}</pre></td>'
        f'<td class="made"><pre>{_json(result.made) if result.made else "no call"}</pre></td>'
        f'<td><pre>{escape(text)}</pre></td><td class="n">{result.seconds:.2f}</td></tr>'
    )


def _json(value: Any) -> str:
    return escape(json.dumps(value, ensure_ascii=False, indent=1))
