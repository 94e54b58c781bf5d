#!/usr/bin/env python3
"""Driver: runs every bench_NAME.py alternately (rotating order each round) and aggregates.

Usage (system python3, stdlib only):
    python3 run_all.py [--rounds 5] [--w5-rounds 3] [--w3-per-round 2]
                       [--frameworks openai_agents,pydantic_ai,agent_framework,tooldeck]
                       [--add NAME=IMPORT:PYTHON:SCRIPT]
Virtual environments are looked up in $BENCH_VENVS/NAME (default ~/.cache/tooldeck-bench/venvs;
setup_venvs.sh creates them). Writes results.json (raw per-round results) into the current
folder, or --out, and prints a summary table.
To add a library without editing this file: write a bench script whose Adapter follows the
ones here and pass --add NAME=IMPORT_NAME:PYTHON_EXECUTABLE:SCRIPT_PATH.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402  (stdlib-only at import)

# name -> (import name, has a meaningful --no-trace variant)
FRAMEWORKS = {
    "openai_agents": ("agents", True),
    "pydantic_ai": ("pydantic_ai", False),
    "agent_framework": ("agent_framework", True),
}


VENVS = os.environ.get("BENCH_VENVS", os.path.expanduser("~/.cache/tooldeck-bench/venvs"))
EXTRA = {}  # name -> (python executable, script path), from --add


def py(name):
    if name in EXTRA:
        return EXTRA[name][0]
    return os.path.join(VENVS, name, "bin", "python")


def script(name):
    if name in EXTRA:
        return EXTRA[name][1]
    return os.path.join(HERE, f"bench_{name}.py")


def run_json(cmd, timeout=1800):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} failed rc={p.returncode}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def rotate(xs, r):
    r %= len(xs)
    return xs[r:] + xs[:r]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5, help="rounds of W1/W1a/W2/W4 and of W3")
    ap.add_argument("--w5-rounds", type=int, default=3)
    ap.add_argument("--w3-per-round", type=int, default=2, help="W3 samples per framework per round")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--phases", default="A,B,C", help="A=W1/W1a/W2/W4  B=W3  C=W5+RSS")
    ap.add_argument("--a-only", default="W1,W1a,W2,W4", help="workloads for phase A")
    ap.add_argument("--out", default=os.path.join(os.getcwd(), "results.json"))
    ap.add_argument("--add", action="append", default=[],
                    help="NAME=IMPORT:PYTHON:SCRIPT, a library benchmarked beside the others")
    a = ap.parse_args()
    for spec in a.add:
        name, rest = spec.split("=", 1)
        imp, python, path = rest.split(":", 2)
        FRAMEWORKS[name] = (imp, False)
        EXTRA[name] = (python, path)
    names = [n for n in a.frameworks.split(",") if n] + [s.split("=", 1)[0] for s in a.add
                                                         if s.split("=", 1)[0] not in a.frameworks.split(",")]
    phases = set(a.phases.split(","))
    # variants: (label, name, extra args)
    variants = [(n, n, []) for n in names]
    variants += [(n + "+notrace", n, ["--no-trace"]) for n in names if FRAMEWORKS[n][1]]
    raw = {"A": {}, "B": {}, "C": {}, "rss": {}, "started": time.ctime()}

    if "A" in phases:
        for r in range(a.rounds):
            for label, n, extra in rotate(variants, r):
                only = a.a_only if not extra else ",".join(w for w in a.a_only.split(",") if w != "W4")
                if not only:
                    continue
                t0 = time.time()
                res = run_json([py(n), script(n), "--only", only, *extra])
                raw["A"].setdefault(label, []).append(res)
                print(f"[A r{r}] {label:24s} "
                      + (f"W1={res['W1']['us_per_round']:.0f}us " if 'W1' in res else "")
                      + (f"W1a={res['W1a']['us_per_round']:.0f}us " if 'W1a' in res else "")
                      + (f"W2={res['W2']['ms_median']:.1f}ms " if 'W2' in res else "")
                      + (f"W4={res['W4']['us_per_tool']:.0f}us " if 'W4' in res else "")
                      + f"({time.time() - t0:.0f}s)", flush=True)

    if "B" in phases:
        for r in range(a.rounds):
            for n in rotate(names, r):
                res = run_json([py(n), script(n), "--only", "W3", "--w3-n", str(a.w3_per_round)])
                raw["B"].setdefault(n, []).append(res["W3"])
                print(f"[B r{r}] {n:24s} import={res['W3']['import_ms']:.0f}ms", flush=True)

    if "C" in phases:
        for r in range(a.w5_rounds):
            for label, n, extra in rotate(variants, r):
                # launched straight from this small driver so ru_maxrss is not inflated
                res = run_json([py(n), script(n), "--w5-inproc", *extra])
                raw["C"].setdefault(label, []).append(res)
                print(f"[C r{r}] {label:24s} W5={res['wall_s']:.2f}s maxrss={res['peak_rss_mb']:.0f}MB "
                      f"vmhwm={res['vmhwm_mb']:.0f}MB", flush=True)
        for n in names:
            pkg = FRAMEWORKS[n][0]
            vals = []
            for _ in range(3):
                r_, h = subprocess.run([py(n), "-c", f"import {pkg}; " + benchlib._RSS_SNIPPET],
                                       capture_output=True, text=True, check=True).stdout.split()[-2:]
                vals.append((int(r_) / 1024, int(h) / 1024))
            raw["rss"][n] = {"import_maxrss_mb": med([v[0] for v in vals]),
                             "import_vmhwm_mb": med([v[1] for v in vals])}
        r_, h = subprocess.run([sys.executable, "-c", "pass; " + benchlib._RSS_SNIPPET],
                               capture_output=True, text=True, check=True).stdout.split()[-2:]
        raw["rss"]["bare_python"] = {"maxrss_mb": int(r_) / 1024, "vmhwm_mb": int(h) / 1024}

    raw["finished"] = time.ctime()
    with open(a.out, "w") as f:
        json.dump(raw, f, indent=1)

    # ------------------------------------------------------------------ summary
    print("\nSUMMARY (median over rounds; [min..max] of per-round medians)")
    for label, n, extra in variants:
        line = [f"{label:24s}"]
        A = raw["A"].get(label, [])
        if A:
            ver = A[0]["version"]
            line.insert(1, f"v{ver:8s}")
            for key, sub, unit in (("W1", "us_per_round", "us/round"), ("W1a", "us_per_round", "us/round(async tool)"),
                                   ("W2", "ms_median", "ms"), ("W4", "us_per_tool", "us/tool")):
                xs = [x[key][sub] for x in A if key in x]
                if xs:
                    line.append(f"{key}={med(xs):.0f} [{min(xs):.0f}..{max(xs):.0f}] {unit}")
            par = [x["W2"]["parallel"] for x in A if "W2" in x]
            if par:
                line.append(f"parallel={all(par)}")
        if not extra and raw["B"].get(n):
            imp = [s for x in raw["B"][n] for s in x["raw_import_s"]]
            full = [s for x in raw["B"][n] for s in x["raw_full_s"]]
            base = [s for x in raw["B"][n] for s in x["raw_pass_s"]]
            line.append(f"W3={1e3 * (med(imp) - med(base)):.0f}ms (full bench imports "
                        f"{1e3 * (med(full) - med(base)):.0f}ms, n={len(imp)})")
        C = raw["C"].get(label, [])
        if C:
            line.append(f"W5={med([x['wall_s'] for x in C]):.2f}s "
                        f"[{min(x['wall_s'] for x in C):.2f}..{max(x['wall_s'] for x in C):.2f}] "
                        f"peak maxrss={med([x['peak_rss_mb'] for x in C]):.0f}MB "
                        f"vmhwm={med([x['vmhwm_mb'] for x in C]):.0f}MB")
            if not extra and n in raw["rss"]:
                line.append(f"import-only maxrss={raw['rss'][n]['import_maxrss_mb']:.0f}MB "
                            f"vmhwm={raw['rss'][n]['import_vmhwm_mb']:.0f}MB")
        print("  ".join(line))
    if "bare_python" in raw["rss"]:
        print("bare python:", raw["rss"]["bare_python"])


if __name__ == "__main__":
    main()
