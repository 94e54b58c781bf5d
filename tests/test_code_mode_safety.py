"""Code mode's sandbox, proved the way it fails: escape attempts (imports of os, sys,
subprocess, socket and ctypes, dunder and frame tricks, files outside the mounts, fork
bombs), exhaustion (time, memory, recursion, printing) and a worker killed mid-program —
each contained, each an observation whose code and text the model reads, and the pool
serving the next program.

Through the provider simulator (fresh call ids); the worker is killed for real (SIGKILL).
"""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tooldeck import Agent, tool
from tooldeck.code import CodeLimits, CodeMode, Mount
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call

Provider = Callable[..., ProviderSimulator]
TIGHT = CodeLimits(duration_s=2, memory_bytes=64 * 1024 * 1024, max_output_chars=2_000)


@tool
def stock(item: str) -> int:
    """Units of an item in stock."""
    return 3


def run_code(code: str) -> Any:
    return sim_call("run_code", {"code": textwrap.dedent(code).strip()})


async def read_after(provider: Provider, *codes: str, mode: CodeMode | None = None) -> list[str]:
    """What the model reads after each of its ``run_code`` calls, one a turn."""
    sim = provider([*(run_code(code) for code in codes), reply("done")])
    agent = Agent(sim.model(), tools=[stock], capabilities=[mode or CodeMode(limits=TIGHT)])
    result = await agent.run("go")
    assert result.answer == "done"
    return [request["messages"][-1]["content"] for request in sim.requests[1:]]


ESCAPES = {
    "import os, list the root": (
        "import os\nos.listdir('/')",
        "PermissionError: Permission denied: '/'\nat line 2 (os.listdir('/'))",
    ),
    "os.environ": (
        "import os\nos.getenv('HOME')",
        "RuntimeError: 'os.getenv' is not supported in this environment",
    ),
    "subprocess": ("import subprocess", "ModuleNotFoundError: No module named 'subprocess'"),
    "socket": ("import socket", "ModuleNotFoundError: No module named 'socket'"),
    "ctypes": ("import ctypes", "ModuleNotFoundError: No module named 'ctypes'"),
    "threading": ("import threading", "ModuleNotFoundError: No module named 'threading'"),
    "sys.modules": ("import sys\nsys.modules['os']", "module 'sys' has no attribute 'modules'"),
    "a frame": ("import sys\nsys._getframe(0)", "module 'sys' has no attribute '_getframe'"),
    "dunder subclasses": (
        "().__class__.__base__.__subclasses__()",
        "AttributeError: 'tuple' object has no attribute '__class__'",
    ),
    "a tool's globals": ("stock.__globals__", "NameError: name 'stock' is not defined"),
    "/etc/passwd": ("open('/etc/passwd').read()", "PermissionError: Permission denied"),
    "pathlib": (
        "from pathlib import Path\nPath('/etc/passwd').read_text()",
        "PermissionError: Permission denied: '/etc/passwd'",
    ),
    "a fork bomb": (
        "import os\nwhile True:\n    os.fork()",
        "AttributeError: module 'os' has no attribute 'fork'",
    ),
}


@pytest.mark.parametrize("attempt", sorted(ESCAPES))
async def test_an_escape_attempt_is_contained_and_read_as_an_error(
    provider: Provider, attempt: str
) -> None:
    code, reason = ESCAPES[attempt]
    (text,) = await read_after(provider, code)
    assert text.startswith("error[code_error]: the program raised: ")
    assert reason in text


LIMITS = {
    "time": ("while True:\n    pass", "the program ran longer than its limit of 2 s"),
    "memory": (
        "x = [0] * (10 ** 9)",
        "the program used more than its 64 MiB of memory: MemoryError",
    ),
    "memory, doubling": (
        "x = 'a'\nwhile True:\n    x = x + x",
        "the program used more than its 64 MiB of memory",
    ),
    "recursion": (
        "def f(n):\n    return f(n + 1)\nf(0)",
        "the program nested calls deeper than 200: RecursionError",
    ),
    "printing": (
        "while True:\n    print('x' * 100)",
        "the program printed more than 8000 bytes and was stopped",
    ),
}


@pytest.mark.parametrize("limit", sorted(LIMITS))
async def test_an_exhausting_program_stops_at_its_limit(provider: Provider, limit: str) -> None:
    code, reason = LIMITS[limit]
    (text,) = await read_after(provider, code)
    assert text.startswith(f"error[code_limit]: {reason}")
    assert len(text) < 2_200  # what it printed before, cut to the output limit


async def test_a_huge_value_is_cut_to_the_output_limit(provider: Provider) -> None:
    (text,) = await read_after(provider, "'y' * 1_000_000")
    assert text.startswith("result: yyyy")
    assert text.endswith("... (cut: 1,000,008 characters in all; print less)")
    assert len(text) < 2_100


async def test_syntax_and_runtime_errors_name_the_line(provider: Provider) -> None:
    syntax, runtime = await read_after(provider, "total = (1 +\n", "a = 1\nb = 0\na / b")
    assert syntax == (
        "error[code_syntax]: the program is not valid Python: SyntaxError: unexpected EOF "
        "while parsing\nat line 1 (total = (1 +)"
    )
    assert runtime == (
        "error[code_error]: the program raised: ZeroDivisionError: division by zero\n"
        "at line 3 (a / b)"
    )


def _kill_workers() -> int:
    """SIGKILL every monty worker this process started; how many."""
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().split()
        except OSError:
            continue
        if fields[1] == "(monty)" and int(fields[3]) == os.getpid():
            os.kill(int(entry), signal.SIGKILL)
            killed += 1
    return killed


@tool
def crash_sandbox() -> int:
    """Kill the sandbox's workers (a test's stand-in for a segfault)."""
    return _kill_workers()


async def test_a_killed_worker_is_code_crashed_and_the_pool_serves_the_next_program(
    provider: Provider,
) -> None:
    sim = provider(
        [
            run_code("print('before')\nawait crash_sandbox()\nprint('after')"),
            run_code("await stock(item='apple') * 2"),
            reply("done"),
        ]
    )
    agent = Agent(sim.model(), tools=[stock, crash_sandbox], capabilities=[CodeMode()])
    result = await agent.run("go")

    crashed = sim.requests[1]["messages"][-1]["content"]
    assert crashed.startswith("error[code_crashed]: the sandbox's worker process stopped (")
    assert "run it again, smaller" in crashed
    assert sim.requests[2]["messages"][-1]["content"] == "result: 6"
    assert result.answer == "done"


async def test_a_read_only_mount_is_read_and_never_written(
    provider: Provider, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello from the host")
    mode = CodeMode(mounts=[Mount(tmp_path, "/data")], limits=TIGHT)
    read, written, outside = await read_after(
        provider,
        "from pathlib import Path\nPath('/data/notes.txt').read_text()",
        "from pathlib import Path\nPath('/data/new.txt').write_text('x')",
        "from pathlib import Path\nPath('/data/../etc/passwd').read_text()",
        mode=mode,
    )
    assert read == "result: hello from the host"
    assert written.startswith("error[code_error]: the program raised: PermissionError")
    assert not (tmp_path / "new.txt").exists()
    assert outside.startswith("error[code_error]: the program raised: ")
    assert "hello" not in outside


async def test_a_read_write_mount_keeps_what_the_program_wrote(
    provider: Provider, tmp_path: Path
) -> None:
    mode = CodeMode(mounts=[Mount(tmp_path, "/out", "read-write")], limits=TIGHT)
    (text,) = await read_after(
        provider, "from pathlib import Path\nPath('/out/report.txt').write_text('42')", mode=mode
    )
    assert text == "result: 2"
    assert (tmp_path / "report.txt").read_text() == "42"


async def test_a_program_whose_types_do_not_fit_the_tools_is_code_type(provider: Provider) -> None:
    mode = CodeMode(type_check=True, limits=TIGHT)
    wrong, right = await read_after(
        provider, "await stock(item=3)", 'await stock(item="apple") + 1', mode=mode
    )
    assert wrong.startswith("error[code_type]: the program does not type-check:\n")
    assert "Argument to function `stock` is incorrect: Expected `str`, found `Literal[3]`" in wrong
    assert right == "result: 4"
