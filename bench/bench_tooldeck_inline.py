"""tooldeck with its sync tool declared ``@tool(inline=True)``: runs on the event loop.

Same workloads as bench_tooldeck.py; only W1 differs (W1a and W2 use async tools).
"""

from __future__ import annotations

import sys

import bench_tooldeck

if __name__ == "__main__":
    bench_tooldeck.Adapter.NAME = "tooldeck_inline"
    bench_tooldeck.Adapter.INLINE = True
    bench_tooldeck.Adapter.NOTES = "as tooldeck, with the sync tool declared @tool(inline=True)"
    bench_tooldeck.B.main(bench_tooldeck.Adapter)
    sys.exit(0)
