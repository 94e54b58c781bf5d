"""A tools module's ``capabilities`` at every front door: ``tooldeck run`` and ``web`` give
them to the agent (tools, instructions, call hooks), ``mcp serve`` and ``eval`` refuse to
start naming them. Real ``tooldeck`` processes, the provider simulator for the model.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from ag_ui.core import RunFinishedEvent, ToolCallResultEvent

from _agui import of_type
from test_cli_doors import MODEL, chat, on, tooldeck
from test_cli_web import started, url_of
from tooldeck.testing import ProviderSimulator, call, reply

BOOKING = textwrap.dedent(
    '''
    from tooldeck import ToolResult, tool
    from tooldeck.errors import ErrorCode
    from tooldeck.run.capabilities import Capability


    @tool(side_effects=True)
    def book(day: str) -> str:
        """Book a table on a day of the week."""
        return f"booked for {day}"


    def opening_hours() -> str:
        """When the restaurant is open."""
        return "Monday to Friday, 12:00 to 22:00"


    class Weekdays(Capability):
        def tools(self):
            return [opening_hours]

        def instructions(self, ctx):
            return "We are closed on weekends."

        async def wrap_call(self, call, ctx, call_next):
            if call.name == "book" and call.arguments["day"] in ("Saturday", "Sunday"):
                return ToolResult.failure(ErrorCode.REFUSED, "closed on weekends")
            return await call_next(call)


    __all__ = ["book"]
    capabilities = [Weekdays()]
    '''
)


def _module(tmp_path: Path) -> Path:
    (tmp_path / "booking.py").write_text(BOOKING, encoding="utf-8")
    return tmp_path


def _script() -> list[object]:
    return [call("book", {"day": "Sunday"}), reply("We are closed on Sunday.")]


def test_run_gives_the_agent_the_modules_capabilities(
    tmp_path: Path, provider: Callable[..., ProviderSimulator]
) -> None:
    sim = provider(_script(), model="shop-model")
    done = tooldeck(_module(tmp_path), sim, "run", "Book Sunday", "-t", "booking.py", *on(sim))

    assert done.returncode == 0, done.stderr
    assert "We are closed on Sunday." in done.stdout
    first, second = sim.requests
    assert [tool["function"]["name"] for tool in first["tools"]] == ["book", "opening_hours"]
    assert "We are closed on weekends." in first["messages"][0]["content"]
    assert second["messages"][-1]["content"] == "error[refused]: closed on weekends"


def test_web_gives_the_agent_the_modules_capabilities_as_run_does(
    tmp_path: Path,
    provider: Callable[..., ProviderSimulator],
    sim_env: Callable[[ProviderSimulator], None],
) -> None:
    root = _module(tmp_path)
    sim = provider(_script(), model="shop-model")
    sim_env(sim)
    arguments = ["--tools", str(root / "booking.py"), *on(sim), "--port", "0"]
    with started(arguments, root / "home") as (_, printed):
        _, port, token = url_of(printed)
        events = chat(f"http://127.0.0.1:{port}", token, "Book Sunday")

    (shown,) = [event.content for event in of_type(events, ToolCallResultEvent)]
    assert shown == "error[refused]: closed on weekends"
    (finished,) = of_type(events, RunFinishedEvent)
    assert finished.result == "We are closed on Sunday."
    assert "We are closed on weekends." in sim.requests[0]["messages"][0]["content"]


def test_mcp_serve_and_eval_refuse_a_modules_capabilities(tmp_path: Path) -> None:
    root = _module(tmp_path)
    served = tooldeck(root, None, "mcp", "serve", "booking.py")
    assert served.returncode == 2
    assert served.stderr.startswith(
        "tooldeck mcp serve: error: 'booking.py' defines capabilities, which tooldeck mcp "
        "serve cannot apply"
    )
    (root / "cases.yaml").write_text(
        "- prompt: Book Sunday\n  tools: booking.py\n  expect:\n    no_call: true\n",
        encoding="utf-8",
    )
    evaluated = tooldeck(root, None, "eval", "cases.yaml", "--model", MODEL)
    assert evaluated.returncode == 2
    assert "'booking.py' defines capabilities, which tooldeck eval cannot apply" in (
        evaluated.stderr
    )


def test_a_module_capability_that_is_not_one_is_refused_naming_the_module(
    tmp_path: Path,
) -> None:
    (tmp_path / "bad.py").write_text(
        "from tooldeck import tool\n\n@tool\ndef ping() -> str:\n    '''Ping.'''\n"
        "    return 'pong'\n\ncapabilities = ['polite']\n",
        encoding="utf-8",
    )
    done = tooldeck(tmp_path, None, "run", "hi", "-t", "bad.py", "--model", MODEL)
    assert done.returncode == 1  # as every setting written wrong (test_cli_doors)
    (line,) = done.stderr.splitlines()
    assert line == (
        "tooldeck: error: 'bad.py': capabilities must be Capability objects "
        "(tooldeck.run.capabilities), got str: 'polite'"
    )
