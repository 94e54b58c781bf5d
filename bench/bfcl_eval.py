"""Evaluate a model's tool calling on BFCL cases through tooldeck, with a llama.cpp baseline.

Each case is one BFCL record (Berkeley Function Calling Leaderboard, Apache-2.0; the data
is in tests/data/bfcl). Its functions become tools (``tooldeck.tools.dialects``), the model
gets one turn through ``tooldeck.Agent`` (``max_rounds=1``: the calls of the first turn
are validated and run against stub handlers, then the run stops), and those calls are
scored with BFCL's AST rules (``bfcl_scoring``). Reported per category: accuracy by BFCL's
rule (a turn with a call whose arguments do not parse made no call) and by the stricter
rule (every call made counts), the share of calls that passed tooldeck's schema
validation, and seconds per case.

``--baseline`` runs the same cases on the same GGUF through llama-cpp-python's own
tool-calling chat handler (``chatml-function-calling``, ``bfcl_baseline``), without
tooldeck, scored the same.

Settings: temperature 0, ``tool_choice="auto"``, ``parallel_tool_calls=True`` in the
``parallel*`` categories (the model's default otherwise), and ``--max-tokens`` per turn
(1024: enough that the budget does not cut a call short). Calls are scored on the
arguments the tool receives:
tooldeck's strict schema form makes the model write ``null`` for an optional parameter it
leaves out, and validation turns that ``null`` back into "absent" (the same is applied to
the baseline's calls).

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
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tooldeck
from bfcl_scoring import Call, score
from tooldeck import Agent, Limits, Message, Model, ModelSettings, RunResult
from tooldeck.errors import InvalidArguments, LimitExceeded, RunStopped
from tooldeck.models.local import CallRule, LocalModel
from tooldeck.models.resolve import resolve_model
from tooldeck.tools.dialects import BfclToolset, bfcl_tools

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "bfcl"
FILES = ("bfcl_tools.jsonl", "bfcl_irrelevance.jsonl")
_REFUSED = frozenset({"unknown_tool", "invalid_json", "invalid_arguments"})


@dataclass
class CaseResult:
    """One case run by one system."""

    id: str
    category: str
    system: str
    correct: bool
    """Right by BFCL's rule: a turn with a call whose arguments do not parse made no call."""
    reason: str
    calls: int
    valid_calls: int
    seconds: float
    made: list[dict[str, Any]] = field(default_factory=list)
    """The calls as made: BFCL name and arguments (or the raw text that did not parse)."""
    text: str = ""
    """What the model wrote besides its calls (its answer when it made none)."""
    strict: bool | None = None
    """Right by the stricter rule: every call made counts, and one that does not parse is
    wrong (None: the same as ``correct``)."""
    call_score: float | None = None
    """A local model's log-odds of calling over answering at the start of its turn."""
    fit: float | None = None
    """How well the question fits the best-matching tool, by a local model's embeddings."""

    @property
    def strictly_correct(self) -> bool:
        return self.correct if self.strict is None else self.strict


def load_cases(data: Path, categories: Sequence[str], start: int, limit: int | None) -> list[Any]:
    cases = []
    for name in FILES:
        with (data / name).open(encoding="utf-8") as lines:
            rows = [json.loads(line) for line in lines]
        for category in categories:
            chosen = [row for row in rows if row["category"] == category]
            cases.extend(chosen[start : None if limit is None else start + limit])
    return cases


def conversation(case: dict[str, Any]) -> tuple[str, list[dict[str, str]], str]:
    """(system text, earlier turns, the last user message) of a case."""
    turns = case.get("messages") or [{"role": "user", "content": case["question"]}]
    system = "\n".join(t["content"] for t in turns if t["role"] == "system") or (
        case.get("system") or ""
    )
    chat = [t for t in turns if t["role"] != "system"]
    return system, chat[:-1], chat[-1]["content"]


def scored_call(toolset: BfclToolset, name: str, arguments: Any) -> tuple[Call, bool]:
    """The call under its BFCL name with the arguments the tool receives, and whether valid."""
    bfcl_name = toolset.original_name(name)
    if name not in toolset.original_names or not isinstance(arguments, dict):
        return Call(bfcl_name, arguments if isinstance(arguments, dict) else {}), False
    try:
        return Call(bfcl_name, toolset.tool(bfcl_name).validate(arguments)), True
    except InvalidArguments:
        return Call(bfcl_name, arguments), False


def judge(
    case: dict[str, Any],
    system: str,
    made: list[tuple[str, Any]],
    seconds: float,
    error: str,
    text: str = "",
) -> CaseResult:
    toolset = bfcl_tools(case["functions"])
    calls = [scored_call(toolset, name, arguments) for name, arguments in made]
    verdict = score(case, [call for call, _ in calls])
    unparsed = any(not isinstance(arguments, dict) for _, arguments in made)
    strict = verdict.correct and not error and not unparsed
    # BFCL decodes a turn as a whole: when a call in it does not parse, it made no call.
    correct = strict if not unparsed else score(case, []).correct and not error
    reason = error or ("arguments did not parse" if unparsed else verdict.reason)
    return CaseResult(
        id=case["id"],
        category=case["category"],
        system=system,
        correct=correct,
        strict=None if strict == correct else strict,
        reason=reason,
        calls=len(made),
        valid_calls=sum(valid for _, valid in calls),
        seconds=seconds,
        made=[{"name": n, "arguments": a} for n, a in made],
        text=text,
    )


# -- tooldeck --------------------------------------------------------------------------------


def _stub(**arguments: Any) -> str:
    return "ok"


PARALLEL_MODES = ("category", "model", "on", "off")


def parallel_setting(mode: str, category: str) -> bool | None:
    """``ModelSettings.parallel_tool_calls`` for a case: ``category`` asks for parallel calls
    in the ``parallel*`` categories and leaves the model's default elsewhere."""
    if mode == "category":
        return True if "parallel" in category else None
    return {"model": None, "on": True, "off": False}[mode]


async def run_tooldeck(
    model: Model,
    case: dict[str, Any],
    max_tokens: int | None,
    tool_choice: str = "auto",
    parallel: str = "category",
) -> CaseResult:
    """One case through tooldeck; ``parallel`` is a ``--parallel-tool-calls`` mode."""
    toolset = bfcl_tools(case["functions"], {f["name"]: _stub for f in case["functions"]})
    system, earlier, prompt = conversation(case)
    history = [
        Message(role="assistant" if t["role"] == "assistant" else "user", content=t["content"])
        for t in earlier
    ]
    agent: Agent[None] = Agent(
        model,
        list(toolset.tools),
        instructions=system,
        settings=ModelSettings(
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_setting(parallel, case["category"]),
            temperature=0.0,
            max_tokens=max_tokens,
        ),
        limits=Limits(max_rounds=1, repeat_limit=None, tool_retries=100),
    )
    started = time.perf_counter()
    error = ""
    result: RunResult | None
    try:
        result = await agent.run(prompt, history=history)
    except LimitExceeded as stopped:  # the model called tools: the first turn is all we want
        result = stopped.result
    except RunStopped as failed:
        error = f"{type(failed).__name__}: {failed}"
        result = failed.result
    seconds = time.perf_counter() - started
    turn = result.messages[len(history) + 1 :] if result is not None else ()
    assistant = next((m for m in turn if m.role == "assistant"), None)
    made = [
        (c.name, c.arguments if c.raw_arguments is None else c.raw_arguments)
        for c in (assistant.tool_calls if assistant else ())
    ]
    result = judge(case, "tooldeck", made, seconds, error, assistant.content if assistant else "")
    if isinstance(model, LocalModel) and model.last_turn is not None:
        result.call_score = model.last_turn.call_score
        result.fit = model.last_turn.fit
    return result


# -- report -----------------------------------------------------------------------------------


def summarize(results: Sequence[CaseResult]) -> Iterator[dict[str, Any]]:
    groups: dict[tuple[str, str], list[CaseResult]] = {}
    for result in results:
        groups.setdefault((result.system, result.category), []).append(result)
    for (system, category), rows in groups.items():
        calls = sum(r.calls for r in rows)
        yield {
            "system": system,
            "category": category,
            "cases": len(rows),
            "accuracy": sum(r.correct for r in rows) / len(rows),
            "strict_accuracy": sum(r.strictly_correct for r in rows) / len(rows),
            "calls": calls,
            "schema_valid": sum(r.valid_calls for r in rows) / calls if calls else None,
            "mean_s": statistics.fmean(r.seconds for r in rows),
            "median_s": statistics.median(r.seconds for r in rows),
        }


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| system | category | cases | accuracy (BFCL) | strict | calls made "
        "| schema-valid calls | s/case (mean, median) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        valid = "–" if row["schema_valid"] is None else f"{row['schema_valid']:.1%}"
        lines.append(
            f"| {row['system']} | {row['category']} | {row['cases']} | {row['accuracy']:.1%} | "
            f"{row['strict_accuracy']:.1%} | {row['calls']} | {valid} | "
            f"{row['mean_s']:.2f}, {row['median_s']:.2f} |"
        )
    return "\n".join(lines)


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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    categories = [c for item in args.category for c in item.split(",")]
    cases = load_cases(args.data, categories, args.start, args.limit)
    if args.ids:
        wanted = set(args.ids.split(","))
        cases = [c for c in cases if c["id"] in wanted]
    model = resolve_model(args.model, **_local_options(args))
    info = {**environment(model), "max_tokens": args.max_tokens, "cases": len(cases)}
    if isinstance(model, LocalModel):
        info["call_rule"] = asdict(model.call_rule)
    print(json.dumps(info), file=sys.stderr)
    sink = Sink(args.out)
    results = [] if args.skip_tooldeck else asyncio.run(_tooldeck_all(model, cases, args, sink))
    if args.baseline:
        from bfcl_baseline import LlamaCppBaseline

        gguf = args.gguf or getattr(model, "model_path", None)
        if gguf is None:
            raise SystemExit("--baseline needs a GGUF: a local model or --gguf PATH")
        threads = getattr(model, "n_threads", None)
        baseline = LlamaCppBaseline(Path(gguf), args.n_ctx, threads, args.max_tokens)
        results.extend(sink.add(baseline.run(case, args.max_tokens)) for case in cases)
    rows = list(summarize(results))
    print(markdown(rows))
    sink.close({"environment": info, "summary": rows})
    return 0


def _local_options(args: argparse.Namespace) -> dict[str, Any]:
    if not args.model.startswith("local"):
        return {}
    options: dict[str, Any] = {"n_ctx": args.n_ctx, "n_threads": args.threads}
    if args.min_fit is not None:
        options["call_rule"] = CallRule(min_fit=args.min_fit)
    return options


class Sink:
    """Prints progress and appends each case to ``--out`` as it finishes (JSON lines)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.file = path.open("w", encoding="utf-8") if path else None

    def add(self, result: CaseResult) -> CaseResult:
        mark = "ok " if result.correct else "BAD"
        detail = "" if result.correct else f"  {result.reason[:100]}"
        line = f"{mark} {result.system:9} {result.id:28} {result.seconds:6.2f}s{detail}"
        print(line, file=sys.stderr, flush=True)
        if self.file:
            self.file.write(json.dumps(asdict(result), ensure_ascii=False) + "\n")
            self.file.flush()
        return result

    def close(self, summary: dict[str, Any]) -> None:
        if self.file and self.path:
            self.file.close()
            summary_path = self.path.with_suffix(".summary.json")
            summary_path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


async def _tooldeck_all(
    model: Model, cases: list[Any], args: argparse.Namespace, sink: Sink
) -> list[CaseResult]:
    results = []
    for case in cases:
        result = await run_tooldeck(
            model, case, args.max_tokens, args.tool_choice, args.parallel_tool_calls
        )
        results.append(sink.add(result))
    await model.aclose()
    return results


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
        default="category",
        help="category: on in parallel* categories, the model's default elsewhere",
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=None, help="write per-case JSON lines here")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
