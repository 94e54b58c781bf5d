"""Evaluate a model's tool calling on BFCL cases through tooldeck, with a llama.cpp baseline.

Each case is one BFCL record (Berkeley Function Calling Leaderboard, Apache-2.0; the data
is in tests/data/bfcl). Its functions become tools (``tooldeck.tools.dialects``), the model
gets one turn through ``tooldeck.Agent`` (``max_rounds=1``: the calls of the first turn
are validated and run against stub handlers, then the run stops), and those calls are
scored with BFCL's AST rules (``bfcl_scoring``). Reported per category: accuracy, the
share of calls that passed tooldeck's schema validation, and seconds per case.

``--baseline`` runs the same cases on the same GGUF through llama-cpp-python's own
tool-calling chat handler (``chatml-function-calling``), without tooldeck, scored the same.

Settings: temperature 0, ``tool_choice="auto"``, ``parallel_tool_calls=True`` in the
``parallel*`` categories (tooldeck's local model makes one call per turn otherwise), and
``--max-tokens`` per turn. Calls are scored on the arguments the tool receives:
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
from tooldeck import (
    Agent,
    LimitExceeded,
    Limits,
    Message,
    Model,
    ModelSettings,
    RunResult,
    resolve_model,
)
from tooldeck.errors import InvalidArguments, RunStopped
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
    reason: str
    calls: int
    valid_calls: int
    seconds: float
    made: list[dict[str, Any]] = field(default_factory=list)
    """The calls as made: BFCL name and arguments (or the raw text that did not parse)."""
    text: str = ""
    """What the model wrote besides its calls (its answer when it made none)."""


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
    correct = verdict.correct and not error and not unparsed
    reason = error or ("arguments did not parse" if unparsed else verdict.reason)
    return CaseResult(
        id=case["id"],
        category=case["category"],
        system=system,
        correct=correct,
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


async def run_tooldeck(model: Model, case: dict[str, Any], max_tokens: int | None) -> CaseResult:
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
            tool_choice="auto",
            parallel_tool_calls=True if "parallel" in case["category"] else None,
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
    return judge(case, "tooldeck", made, seconds, error, assistant.content if assistant else "")


# -- llama-cpp-python's own tool calling (the baseline) ---------------------------------------


class LlamaCppBaseline:
    """The GGUF through ``Llama(chat_format="chatml-function-calling")``, no tooldeck."""

    def __init__(self, gguf: Path, n_ctx: int, n_threads: int | None, max_tokens: int) -> None:
        self.llm = _bounded_llama(max_tokens)(
            model_path=str(gguf),
            chat_format="chatml-function-calling",
            n_ctx=n_ctx,
            n_threads=n_threads or os.cpu_count(),
            seed=0,
            verbose=False,
        )

    def run(self, case: dict[str, Any], max_tokens: int | None) -> CaseResult:
        toolset = bfcl_tools(case["functions"])
        tools = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.arguments.json_schema,
                },
            }
            for tool in toolset.tools
        ]
        system, earlier, prompt = conversation(case)
        # The handler lists the tools inside the system message: without one the model
        # would never see them, so there always is one.
        messages = [{"role": "system", "content": system}, *earlier]
        messages.append({"role": "user", "content": prompt})
        started = time.perf_counter()
        error = text = ""
        made: list[tuple[str, Any]] = []
        try:
            response: Any = self.llm.create_chat_completion(
                messages=messages,
                tools=tools,
                tool_choice="auto",
                temperature=0.0,
                max_tokens=max_tokens,
            )
            message = response["choices"][0]["message"]
            made = [_parsed(c["function"]) for c in message.get("tool_calls") or ()]
            text = message.get("content") or ""
        except Exception as failed:  # a context overflow or a handler failure: that case fails
            error = f"{type(failed).__name__}: {failed}"
        return judge(case, "llama-cpp", made, time.perf_counter() - started, error, text)


MAX_BASELINE_CALLS = 8
"""Calls the baseline may make in one turn (tooldeck's local model allows at most 8, too)."""


def _bounded_llama(max_tokens: int) -> Any:
    """``Llama`` with bounds on what llama-cpp-python's handler generates in one turn.

    The handler generates each call and each message with ``max_tokens=None`` (up to the
    context size) whatever the request says, and after each call lets the model choose
    another one without limit; a small model repeating itself runs for many minutes. Here
    each generation stops at ``max_tokens`` and the turn after MAX_BASELINE_CALLS calls.
    """
    from llama_cpp import Llama

    class BoundedLlama(Llama):
        calls_left = MAX_BASELINE_CALLS

        def create_chat_completion(self, *args: Any, **kwargs: Any) -> Any:
            self.calls_left = MAX_BASELINE_CALLS
            return super().create_chat_completion(*args, **kwargs)

        def create_completion(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("max_tokens") is None:
                kwargs["max_tokens"] = max_tokens
            grammar = getattr(kwargs.get("grammar"), "_grammar", "")
            if '"<|im_end|>"' in grammar:  # "another call, or the end of the turn?"
                self.calls_left -= 1
                if self.calls_left <= 0:
                    return {"choices": [{"text": "<|im_end|>"}]}
            return super().create_completion(*args, **kwargs)

    return BoundedLlama


def _parsed(function: dict[str, Any]) -> tuple[str, Any]:
    try:
        return function["name"], json.loads(function["arguments"])
    except ValueError:
        return function["name"], function["arguments"]


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
            "calls": calls,
            "schema_valid": sum(r.valid_calls for r in rows) / calls if calls else None,
            "mean_s": statistics.fmean(r.seconds for r in rows),
            "median_s": statistics.median(r.seconds for r in rows),
        }


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| system | category | cases | accuracy | calls made | schema-valid calls "
        "| s/case (mean, median) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        valid = "–" if row["schema_valid"] is None else f"{row['schema_valid']:.1%}"
        lines.append(
            f"| {row['system']} | {row['category']} | {row['cases']} | {row['accuracy']:.1%} | "
            f"{row['calls']} | {valid} | {row['mean_s']:.2f}, {row['median_s']:.2f} |"
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
    options = {"n_ctx": args.n_ctx} if args.model.startswith("local") else {}
    model = resolve_model(args.model, **options)
    info = {**environment(model), "max_tokens": args.max_tokens, "cases": len(cases)}
    print(json.dumps(info), file=sys.stderr)
    sink = _Sink(args.out)
    results = (
        []
        if args.skip_tooldeck
        else asyncio.run(_tooldeck_all(model, cases, args.max_tokens, sink))
    )
    if args.baseline:
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


class _Sink:
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
    model: Model, cases: list[Any], max_tokens: int | None, sink: _Sink
) -> list[CaseResult]:
    results = [sink.add(await run_tooldeck(model, case, max_tokens)) for case in cases]
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
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="tokens per turn (baseline: per generation of its handler, which sends None)",
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=None, help="write per-case JSON lines here")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
