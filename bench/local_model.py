"""Local model benchmark: seconds per turn, tokens per second, and where a round's time goes.

Runs the demo agent (``tooldeck demo``: add_numbers, get_weather) on a LocalModel and
reports, per model turn, the prompt tokens, how many of them were actually processed (the
rest came from the KV cache of the previous round), the prompt-processing time and the
generation time. Two controls follow:

- cold round 2: the last round's prompt sent to a freshly loaded model (nothing cached),
  to show what the cache reuse saves;
- sampler: one forced tool call decoded by llama-cpp-python's own grammar sampler (which
  filters the whole vocabulary at every token) against tooldeck's greedy decoder (which
  asks the grammar about the model's favourite token first).

    .venv/bin/python bench/local_model.py [--model local:/path/model.gguf] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass

from tooldeck import FinalAnswer, Message, ModelResponse, ModelSettings
from tooldeck.cli.demo import DEMO_PROMPTS, add_numbers, demo_agent, get_weather
from tooldeck.models.local import LocalModel, TurnStats


@dataclass
class Row:
    prompt: str
    round: int
    what: str
    stats: TurnStats


def local_model(args: argparse.Namespace) -> LocalModel:
    path = args.model.partition(":")[2] or None
    return LocalModel(path, n_threads=args.threads)


async def run_demo(model: LocalModel, prompt: str) -> tuple[list[Row], list[Message]]:
    rows: list[Row] = []
    messages: list[Message] = []
    async for event in demo_agent(model).stream(prompt):
        if isinstance(event, ModelResponse) and model.last_turn is not None:
            calls = event.output.tool_calls
            what = ", ".join(call.name for call in calls) if calls else "answer"
            rows.append(Row(prompt, event.round, what, model.last_turn))
        if isinstance(event, FinalAnswer):
            messages = list(event.result.messages)
    return rows, messages


def table(rows: list[Row]) -> str:
    lines = [
        "| prompt | round | output | prompt tokens | processed | cached | prompt s "
        "| output tokens | generation s | tokens/s | turn s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        s = row.stats
        lines.append(
            f"| {row.prompt} | {row.round} | {row.what} | {s.prompt_tokens} | "
            f"{s.evaluated_tokens} | {s.cached_tokens} | {s.prompt_s:.2f} | {s.output_tokens} | "
            f"{s.generation_s:.2f} | {s.tokens_per_s:.1f} | {s.seconds:.2f} |"
        )
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    stats = [row.stats for row in rows]
    generated = sum(s.output_tokens - 1 for s in stats if s.output_tokens > 1)
    generation_s = sum(s.generation_s for s in stats)
    processed = sum(s.evaluated_tokens for s in stats)
    prompt_s = sum(s.prompt_s for s in stats)
    later = [s for row, s in zip(rows, stats, strict=True) if row.round > 1]
    lines = [
        f"- seconds per turn: mean {statistics.mean(s.seconds for s in stats):.2f}, "
        f"median {statistics.median(s.seconds for s in stats):.2f} ({len(stats)} turns)",
        f"- generation: {generated / generation_s:.1f} tokens/s; prompt processing: "
        f"{processed / prompt_s:.0f} tokens/s",
        f"- time split: {prompt_s / (prompt_s + generation_s):.0%} prompt processing, "
        f"{generation_s / (prompt_s + generation_s):.0%} generation",
    ]
    if later:
        lines.append(
            f"- rounds after the first processed {sum(s.evaluated_tokens for s in later)} of "
            f"{sum(s.prompt_tokens for s in later)} prompt tokens (the rest came from the cache)"
        )
    return "\n".join(lines)


async def cold_round(args: argparse.Namespace, messages: list[Message], warm: Row) -> str:
    """The last round's prompt on a fresh model: everything is processed."""
    fresh = local_model(args)
    fresh.load()
    agent = demo_agent(fresh)
    tools = agent.tools.specs
    await fresh.complete(messages, tools, ModelSettings(), agent.instructions)
    cold = fresh.last_turn
    assert cold is not None
    await fresh.aclose()
    return (
        f"- round {warm.round} of {warm.prompt!r}: warm (cache reused) processed "
        f"{warm.stats.evaluated_tokens} tokens in {warm.stats.prompt_s:.2f} s; cold (fresh "
        f"model) processed {cold.evaluated_tokens} tokens in {cold.prompt_s:.2f} s"
    )


async def sampler_comparison(args: argparse.Namespace) -> str:
    """One forced call: llama-cpp-python's grammar sampler vs tooldeck's greedy decoder."""
    tools = (add_numbers.spec, get_weather.spec)
    request = [Message.user("What's the weather like in Tokyo?")]
    lines = []
    for label, temperature in (("tooldeck greedy decoder", 0.0), ("llama-cpp sampler", 1e-6)):
        model = local_model(args)
        model.load()
        settings = ModelSettings(tool_choice="get_weather", temperature=temperature)
        await model.complete(request, tools, settings)
        stats = model.last_turn
        assert stats is not None
        lines.append(
            f"- {label}: {stats.output_tokens} tokens in {stats.generation_s:.2f} s "
            f"({stats.tokens_per_s:.1f} tokens/s)"
        )
        await model.aclose()
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="local or local:/path/model.gguf")
    parser.add_argument("--threads", type=int, default=None, help="n_threads (default: all)")
    args = parser.parse_args()
    model = local_model(args)
    started = time.perf_counter()
    model.load()
    print(
        f"# {model.name}, n_threads={model.n_threads}, load {time.perf_counter() - started:.2f} s"
    )
    print(f"(load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())})\n")
    rows: list[Row] = []
    last: list[Message] = []
    for prompt in DEMO_PROMPTS:
        prompt_rows, messages = await run_demo(model, prompt)
        rows += prompt_rows
        last = messages[:-1] if prompt_rows and prompt_rows[-1].round > 1 else last
    print(table(rows), "\n")
    print(summary(rows))
    if last:
        print(await cold_round(args, last, rows[-1]))
    print(await sampler_comparison(args))
    print(f"\n(load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
