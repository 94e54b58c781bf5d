"""Evaluate a model's tool calling on BFCL cases with tooldeck.eval, beside a llama.cpp baseline.

The cases, the run and the scoring are ``tooldeck.eval``'s (``tooldeck eval`` is the same
thing as a command): each BFCL record's functions become tools, the model gets one turn
through ``tooldeck.Agent`` and its calls are scored with BFCL's AST rules. This script adds
what only the benchmark needs: ``--baseline`` runs the same cases on the same GGUF through
llama-cpp-python's own tool-calling chat handler (``chatml-function-calling``,
``bfcl_baseline``), without tooldeck, scored the same; ``--min-fit`` tries a local model's
call threshold; a machine and version header on stderr.

Settings (``tooldeck.eval.EvalSettings``): temperature 0, ``tool_choice="auto"``, parallel
calls asked for in the ``parallel*`` categories, ``--max-tokens`` per turn (1024).

Examples::

    nice .venv/bin/python bench/bfcl_eval.py --category simple_python --limit 100 --baseline
    nice .venv/bin/python bench/bfcl_eval.py --model local:/models/qwen.gguf --category irrelevance
    .venv/bin/python bench/bfcl_eval.py --model openai:gpt-4.1-mini --category parallel --limit 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tooldeck
from tooldeck.eval import CaseResult, EvalCase, EvalReport, EvalSettings, load_suite, run_eval
from tooldeck.models.base import Model
from tooldeck.models.local import CallRule, LocalModel
from tooldeck.models.resolve import resolve_model

PARALLEL_MODES = ("case", "model", "on", "off")


def environment(model: Model) -> dict[str, Any]:
    import llama_cpp

    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{_cpu()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "tooldeck": tooldeck.__version__,
        "llama_cpp_python": llama_cpp.__version__,
        "model": model.name,
    }


def _cpu() -> str:
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


class Sink:
    """Prints each case as it is scored and appends it to ``--out`` (JSON lines)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.file = path.open("w", encoding="utf-8") if path else None

    def add(self, result: CaseResult) -> CaseResult:
        mark = "ok " if result.correct else "BAD"
        detail = "" if result.correct else f"  {result.reason[:100]}"
        line = f"{mark} {result.model:9} {result.id:28} {result.seconds:6.2f}s{detail}"
        print(line, file=sys.stderr, flush=True)
        if self.file:
            self.file.write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
            self.file.flush()
        return result

    def close(self, summary: dict[str, Any]) -> None:
        if self.file and self.path:
            self.file.close()
            summary_path = self.path.with_suffix(".summary.json")
            summary_path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def cases_of(args: argparse.Namespace) -> list[EvalCase]:
    categories = [c for item in args.category for c in item.split(",")]
    ids = [i for i in args.ids.split(",") if i]
    return [
        c for name in categories for c in load_suite(f"bfcl:{name}", args.start, args.limit, ids)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cases = cases_of(args)
    model = resolve_model(args.model, **_local_options(args))
    info = {**environment(model), "max_tokens": args.max_tokens, "cases": len(cases)}
    if isinstance(model, LocalModel):
        info["call_rule"] = asdict(model.call_rule)
    print(json.dumps(info), file=sys.stderr)
    sink = Sink(args.out)
    settings = EvalSettings(
        tool_choice=args.tool_choice, max_tokens=args.max_tokens, parallel=args.parallel_tool_calls
    )
    results: list[CaseResult] = []
    if not args.skip_tooldeck:
        report = asyncio.run(_scored(cases, model, settings, sink))
        results.extend(report.results)
    if args.baseline:
        from bfcl_baseline import LlamaCppBaseline

        gguf = args.gguf or (model.model_path if isinstance(model, LocalModel) else None)
        if gguf is None:
            raise SystemExit("--baseline needs a GGUF: a local model or --gguf PATH")
        threads = model.n_threads if isinstance(model, LocalModel) else None
        baseline = LlamaCppBaseline(Path(gguf), args.n_ctx, threads, args.max_tokens)
        results.extend(sink.add(baseline.run(case, args.max_tokens)) for case in cases)
    report = EvalReport(tuple(results))
    print(report.markdown())
    sink.close({"environment": info, "summary": [row.to_json() for row in report.summary()]})
    return 0


async def _scored(
    cases: list[EvalCase], model: Model, settings: EvalSettings, sink: Sink
) -> EvalReport:
    try:
        return await run_eval(cases, {"tooldeck": model}, settings, on_result=sink.add)
    finally:
        await model.aclose()


def _local_options(args: argparse.Namespace) -> dict[str, Any]:
    if not args.model.startswith("local"):
        return {}
    options: dict[str, Any] = {"n_ctx": args.n_ctx, "n_threads": args.threads}
    if args.min_fit is not None:
        options["call_rule"] = CallRule(min_fit=args.min_fit)
    return options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local", help="tooldeck model string (default: local)")
    parser.add_argument(
        "--category", action="append", required=True, help="BFCL category (repeat, or a,b)"
    )
    parser.add_argument("--start", type=int, default=0, help="skip this many cases per category")
    parser.add_argument("--limit", type=int, default=None, help="cases per category")
    parser.add_argument("--ids", default="", help="only these case ids (comma-separated)")
    parser.add_argument(
        "--baseline", action="store_true", help="also run llama-cpp-python's handler"
    )
    parser.add_argument("--gguf", type=Path, default=None, help="GGUF for the baseline")
    parser.add_argument("--skip-tooldeck", action="store_true", help="run only the baseline")
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=None, help="n_threads (default: all cores)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=1024,
        help="tokens per turn (baseline: per generation of its handler, which sends None)",
    )
    parser.add_argument(
        "--min-fit", type=float, default=None, help="LocalModel(call_rule=CallRule(min_fit=...))"
    )
    parser.add_argument("--tool-choice", default="auto", help="auto, required, none or a name")
    parser.add_argument(
        "--parallel-tool-calls",
        choices=PARALLEL_MODES,
        default="case",
        help="case: on in parallel* categories, the model's default elsewhere",
    )
    parser.add_argument("--out", type=Path, default=None, help="write per-case JSON lines here")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
