"""Shared, framework-neutral measurement harness for the agent-framework overhead benchmarks.

Stdlib only at import time.  Every bench_NAME.py defines an ``Adapter`` (how to build an
agent with a fake model for each workload) and calls ``benchlib.main(adapter)``; all timing,
repetition, validation and JSON output lives here so every framework runs the exact same
workload code.  To benchmark a new library, copy a bench_NAME.py and rewrite its Adapter.

Workloads
  W1  sequential loop: K=10 rounds of add_numbers (plain sync function), then final text.
      us per tool round = median(run wall time) / 10.     (W1a: same with an `async def` tool)
  W2  8 parallel calls of async slow_lookup (sleep 50 ms) in one model turn, then final text.
  W3  import time: median(python -c "import PKG") - median(python -c "pass"), fresh processes.
  W4  tool-object + JSON-schema build for a 5-parameter function, us per tool.
  W5  1000 concurrent runs (asyncio.gather); fake model sleeps 10 ms per turn; 3 rounds + final.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any, Literal

HERE = os.path.dirname(os.path.abspath(__file__))

K_W1 = 10
K_W5 = 3
N_W2_CALLS = 8
W2_SLEEP = 0.05
W5_DELAY = 0.01

# --------------------------------------------------------------------------- tools


def add_numbers(left: int, right: int) -> int:
    """Add two integers.

    Args:
        left: The first number.
        right: The second number.
    """
    return left + right


def make_add_numbers_async():
    async def add_numbers(left: int, right: int) -> int:
        """Add two integers.

        Args:
            left: The first number.
            right: The second number.
        """
        return left + right

    return add_numbers


async def slow_lookup(key: str) -> str:
    """Look up a key in a slow remote store.

    Args:
        key: The key to look up.
    """
    await asyncio.sleep(W2_SLEEP)
    return f"value-{key}"


def make_w4_function():
    """Return a *fresh* function object each call (defeats identity-keyed caches)."""

    def search_items(
        query: str,
        limit: int,
        min_score: float,
        tags: list[str],
        mode: Literal["a", "b"] | None = None,
    ) -> str:
        """Search the catalogue for matching items.

        Args:
            query: Free-text search query.
            limit: Maximum number of items to return.
            min_score: Minimum relevance score between 0 and 1.
            tags: Tags that every returned item must carry.
            mode: Optional search mode, either 'a' or 'b'.
        """
        return query

    return search_items


# --------------------------------------------------------------------------- fake-model logic
# Every fake model calls exactly these helpers so the "model" logic is identical everywhere.

_call_ids = itertools.count()
STATS = {"final_ok": 0, "final_bad": 0}


def next_call_id() -> str:
    return f"call_{next(_call_ids)}"


def loop_decision(n_results: int, prev: int, k: int) -> str | None:
    """W1/W5 model policy.  Returns JSON arguments for the next add_numbers call, or None
    for 'answer with final text "done"'.  Also checks the chain really happened."""
    if n_results < k:
        return json.dumps({"left": prev, "right": 1})
    if prev == k:
        STATS["final_ok"] += 1
    else:
        STATS["final_bad"] += 1
    return None


def parallel_args() -> list[str]:
    return [json.dumps({"key": f"k{i}"}) for i in range(N_W2_CALLS)]


# --------------------------------------------------------------------------- helpers


def med(xs):
    return statistics.median(xs)


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def peak_rss_mb() -> float:
    """ru_maxrss in MiB.  NB: on Linux a child started by (v)fork+exec inherits the parent's RSS
    high-water mark, so this is only clean when the launching process is small (run_all.py)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def vmhwm_mb() -> float:
    """Peak RSS of this process image from /proc/self/status (VmHWM); not inherited across exec."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


_RSS_SNIPPET = ("import resource; r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
                "h = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
                "print(r, h)")


def _assert_done(out: Any):
    if out != "done":
        raise AssertionError(f"final output {out!r} != 'done'")


# --------------------------------------------------------------------------- workloads


async def w1(adapter, runs: int, warmup: int, async_tool: bool) -> dict:
    run = adapter.setup_loop(k=K_W1, delay=0.0, async_tool=async_tool)
    STATS.update(final_ok=0, final_bad=0)
    for _ in range(warmup):
        _assert_done(await run())
    samples = []
    pc = time.perf_counter
    for _ in range(runs):
        t0 = pc()
        out = await run()
        samples.append(pc() - t0)
        _assert_done(out)
    assert STATS["final_bad"] == 0 and STATS["final_ok"] == warmup + runs, STATS
    m = med(samples)
    return {
        "us_per_round": m / K_W1 * 1e6,
        "run_ms_median": m * 1e3,
        "run_ms_p10": q(samples, 0.1) * 1e3,
        "run_ms_p90": q(samples, 0.9) * 1e3,
        "runs": runs,
    }


async def w2(adapter, runs: int, warmup: int = 2) -> dict:
    run = adapter.setup_parallel(n_calls=N_W2_CALLS)
    for _ in range(warmup):
        _assert_done(await run())
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = await run()
        samples.append(time.perf_counter() - t0)
        _assert_done(out)
    m = med(samples) * 1e3
    return {"ms_median": m, "ms_min": min(samples) * 1e3, "ms_max": max(samples) * 1e3,
            "parallel": m < 2 * W2_SLEEP * 1e3, "runs": runs}


def w4(adapter, n: int, save_path: str | None) -> dict:
    spec = adapter.tool_spec(make_w4_function())
    if save_path:
        with open(save_path, "w") as f:
            json.dump(spec, f, indent=2, sort_keys=False)
    for _ in range(50):  # warm-up
        adapter.build_tool_schema(make_w4_function())
    funcs = [make_w4_function() for _ in range(n)]
    samples = []
    pc = time.perf_counter
    build = adapter.build_tool_schema
    for fn in funcs:
        t0 = pc()
        schema = build(fn)
        samples.append(pc() - t0)
        assert isinstance(schema, dict)
        assert schema
    return {"us_per_tool": med(samples) * 1e6, "us_p10": q(samples, 0.1) * 1e6,
            "us_p90": q(samples, 0.9) * 1e6, "n": n, "schema": spec}


async def w5_inproc(adapter, n: int) -> dict:
    run = adapter.setup_loop(k=K_W5, delay=W5_DELAY, async_tool=False)
    _assert_done(await run())  # warm-up (lazy imports etc.)
    STATS.update(final_ok=0, final_bad=0)
    rss_before = peak_rss_mb()
    t0 = time.perf_counter()
    outs = await asyncio.gather(*(run() for _ in range(n)))
    wall = time.perf_counter() - t0
    for o in outs:
        _assert_done(o)
    assert STATS["final_ok"] == n and STATS["final_bad"] == 0, STATS
    return {"wall_s": wall, "peak_rss_mb": peak_rss_mb(), "vmhwm_mb": vmhwm_mb(),
            "rss_before_gather_mb": rss_before, "n": n}


def _time_proc(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def w3(adapter, n: int) -> dict:
    py = sys.executable
    imp_code = f"import {adapter.PKG}"
    full_code = adapter.FULL_IMPORT
    # warm the .pyc cache / page cache once
    _time_proc([py, "-c", imp_code]); _time_proc([py, "-c", full_code]); _time_proc([py, "-c", "pass"])
    imp, full, base = [], [], []
    for _ in range(n):
        imp.append(_time_proc([py, "-c", imp_code]))
        base.append(_time_proc([py, "-c", "pass"]))
        full.append(_time_proc([py, "-c", full_code]))
    return {
        "import_ms": (med(imp) - med(base)) * 1e3,
        "full_import_ms": (med(full) - med(base)) * 1e3,
        "raw_import_s": imp, "raw_full_s": full, "raw_pass_s": base,
        "full_import_code": full_code,
    }


def baseline_rss(adapter) -> dict:
    """RSS of fresh processes that only import the framework (and bare python for reference)."""
    out = {}
    for key, code in (("import", f"import {adapter.PKG}"), ("full_import", adapter.FULL_IMPORT),
                      ("bare_python", "pass")):
        r, h = subprocess.run([sys.executable, "-c", code + "; " + _RSS_SNIPPET], check=True,
                              capture_output=True, text=True).stdout.split()[-2:]
        out[f"{key}_maxrss_mb"] = int(r) / 1024.0
        out[f"{key}_vmhwm_mb"] = int(h) / 1024.0
    return out


# --------------------------------------------------------------------------- entry point


def main(adapter) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="W1,W1a,W2,W3,W4,W5",
                    help="comma list of W1,W1a,W2,W3,W4,W5 (W5 and RSS run in fresh subprocesses)")
    ap.add_argument("--no-trace", action="store_true",
                    help="disable the framework's default tracing/instrumentation")
    ap.add_argument("--w1-runs", type=int, default=200)
    ap.add_argument("--w1-warmup", type=int, default=30)
    ap.add_argument("--w2-runs", type=int, default=20)
    ap.add_argument("--w3-n", type=int, default=10)
    ap.add_argument("--w4-n", type=int, default=2000)
    ap.add_argument("--w5-n", type=int, default=1000)
    ap.add_argument("--w5-inproc", action="store_true", help="internal: run only W5 in this process")
    ap.add_argument("--rss-only", action="store_true", help="internal: print baseline RSS JSON only")
    a = ap.parse_args()

    if a.no_trace:
        adapter.disable_tracing()

    if a.w5_inproc:  # child process for W5: only this workload lives in the process
        print(json.dumps(asyncio.run(w5_inproc(adapter, a.w5_n))))
        return
    if a.rss_only:  # used by run_all.py so the measuring process is launched from a small parent
        print(json.dumps(baseline_rss(adapter)))
        return

    only = set(a.only.split(","))
    res: dict[str, Any] = {"framework": adapter.NAME, "version": adapter.version(),
                           "python": sys.version.split()[0], "tracing": "off" if a.no_trace else "default",
                           "notes": adapter.NOTES}

    async def inproc():
        if "W1" in only:
            res["W1"] = await w1(adapter, a.w1_runs, a.w1_warmup, async_tool=False)
        if "W1a" in only:
            res["W1a"] = await w1(adapter, a.w1_runs, a.w1_warmup, async_tool=True)
        if "W2" in only:
            res["W2"] = await w2(adapter, a.w2_runs)

    asyncio.run(inproc())
    if "W4" in only:
        res["W4"] = w4(adapter, a.w4_n, os.path.join(os.environ.get("BENCH_OUT", os.getcwd()), f"schema_{adapter.NAME}.json"))
    if "W3" in only:
        res["W3"] = w3(adapter, a.w3_n)
    if "W5" in only:
        cmd = [sys.executable, os.path.abspath(sys.argv[0]), "--w5-inproc", "--w5-n", str(a.w5_n)]
        if a.no_trace:
            cmd.append("--no-trace")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        res["W5"] = json.loads(out.strip().splitlines()[-1])
        res["W5"].update(baseline_rss(adapter))
    print(json.dumps(res))
