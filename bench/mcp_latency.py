"""Tool-call latency through MCP, against a direct call: tooldeck's MCPToolset beside the
bare ``mcp`` SDK client, on the same server, in one run.

    nice .venv/bin/python bench/mcp_latency.py [--calls 500] [--rounds 8] [--quick]

The server is bench/mcp_add_server.py (the SDK's MCPServer with one ``add`` tool), a
process of its own for each client, over stdio and over streamable HTTP on 127.0.0.1.
After connecting and listing, each client makes warm sequential calls ``add(a, b)``. The
clients take turns call by call (``--calls`` x ``--rounds`` calls each, the order rotating),
so load on the (shared) machine falls on all of them alike; each figure is the median of
all its calls. MCPToolset's figure is what the agent loop runs for a call: the handler's
``validate`` (against the server's inputSchema) and ``run`` (tools/call, result to text).
"direct" is the same tool as a tooldeck ``@tool(inline=True)`` in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from tooldeck import RunContext, tool
from tooldeck.tools.mcp import MCPToolset

SERVER = str(Path(__file__).resolve().parent / "mcp_add_server.py")
Call = Callable[[int], Awaitable[Any]]
CONTEXT: RunContext[None] = RunContext("bench", "add", None)


def bare_call(client: Client) -> Call:
    return lambda i: client.call_tool("add", {"a": i, "b": 2})


async def toolset_call(toolset: MCPToolset) -> Call:
    (entry,) = await toolset.entries()
    handler = entry.handler

    async def call(i: int) -> str:
        return await handler.run(handler.validate({"a": i, "b": 2}), CONTEXT)

    return call


def own_work(toolset: MCPToolset, entry_handler: Any) -> Call:
    """What MCPToolset adds to a call, without the I/O: validation and result to text."""
    from mcp_types import CallToolResult, TextContent

    from tooldeck.tools.mcp._content import result_text

    reply = CallToolResult(content=[TextContent(text="3")], structured_content={"result": 3})

    async def call(i: int) -> str:
        entry_handler.validate({"a": i, "b": 2})
        return result_text(reply)

    return call


def direct_call() -> Call:
    @tool(inline=True)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def call(i: int) -> str:
        return await add.run(add.validate({"a": i, "b": 2}), CONTEXT)

    return call


async def timed(call: Call, count: int) -> list[float]:
    samples = []
    for i in range(count):
        started = time.perf_counter()
        await call(i)
        samples.append(time.perf_counter() - started)
    return samples


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_http(*flags: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, SERVER, "--http", str(port), *flags]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the HTTP server did not listen on {port}")


async def connect(stack: AsyncExitStack, seconds: dict[str, float]) -> dict[str, Call]:
    """Every client, connected and listed (the time that took, in ``seconds``)."""
    calls: dict[str, Call] = {"direct": direct_call()}
    processes = [start_http(), start_http("--tooldeck")]
    for process, _ in processes:
        stack.callback(process.wait, 30)
        stack.callback(process.terminate)
    (_, url), (_, tooldeck_url) = processes
    clients: dict[str, Any] = {
        "stdio bare": Client(StdioServerParameters(command=sys.executable, args=[SERVER])),
        "stdio MCPToolset": MCPToolset.stdio(sys.executable, [SERVER]),
        "http bare": Client(url),
        "http MCPToolset": MCPToolset.http(url),
        "stdio bare, tooldeck server": Client(
            StdioServerParameters(command=sys.executable, args=[SERVER, "--tooldeck"])
        ),
        "http bare, tooldeck server": Client(tooldeck_url),
    }
    for name, client in clients.items():
        started = time.perf_counter()
        entered = await stack.enter_async_context(client)
        if isinstance(entered, MCPToolset):
            calls[name] = await toolset_call(entered)
            if name == "stdio MCPToolset":
                (entry,) = await entered.entries()
                calls["MCPToolset's own work (no I/O)"] = own_work(entered, entry.handler)
        else:
            await entered.list_tools()
            calls[name] = bare_call(entered)
        seconds[name] = time.perf_counter() - started
    return calls


async def measure(count: int, rounds: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    connect_s: dict[str, float] = {}
    async with AsyncExitStack() as stack:
        calls = await connect(stack, connect_s)
        for call in calls.values():
            await timed(call, 50)  # warm up
        samples: dict[str, list[float]] = {name: [] for name in calls}
        names = list(calls)
        for i in range(count * rounds):  # one call of each client in turn, order rotating
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                started = time.perf_counter()
                await calls[name](i)
                samples[name].append(time.perf_counter() - started)
    return {
        "median_ms": {n: round(statistics.median(s) * 1e3, 4) for n, s in samples.items()},
        "p90_ms": {
            n: round(statistics.quantiles(s, n=10)[-1] * 1e3, 4) for n, s in samples.items()
        },
        "connect_and_list_s": {n: round(s, 3) for n, s in connect_s.items()},
        "calls_each": count * rounds,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cpus": os.cpu_count(),
    }


def report(figures: dict[str, Any]) -> str:
    median = figures["median_ms"]
    lines = [f"{'client':<31} {'median ms':>10} {'p90 ms':>10} {'connect s':>10}"]
    for name, value in median.items():
        connect = figures["connect_and_list_s"].get(name)
        shown = f"{connect:>10.2f}" if connect is not None else f"{'-':>10}"
        lines.append(f"{name:<31} {value:>10.3f} {figures['p90_ms'][name]:>10.3f} {shown}")
    for transport in ("stdio", "http"):
        bare, ours = median[f"{transport} bare"], median[f"{transport} MCPToolset"]
        lines.append(f"{transport}: MCPToolset / bare client = {ours / bare:.3f}")
    before, after = figures["load_average_before"], figures["load_average_after"]
    lines.append(
        f"{figures['calls_each']} calls each; load average {before[0]:.1f} before, "
        f"{after[0]:.1f} after, on {figures['cpus']} CPUs"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="calls per block")
    parser.add_argument("--rounds", type=int, default=8, help="blocks per client")
    parser.add_argument("--quick", action="store_true", help="a few calls: proves it runs")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    count, rounds = (20, 2) if args.quick else (args.calls, args.rounds)
    figures = asyncio.run(measure(count, rounds))
    print(report(figures))
    if args.quick:
        print("quick mode: too few calls for figures")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
