"""Tool search at the edges (issue 37): ``--tool-search`` and ``--defer-tools-after N`` on
real ``tooldeck`` processes against the provider simulator, the display's and ``--json``'s
searches, the run log read back (``tooldeck logs show``), the web run page's timeline, a
``tool_search`` span per search, ``tooldeck mcp serve`` serving deferred tools to an MCP
client, and a deferred MCPToolset whose server adds a tool and sends
``notifications/tools/list_changed``: the new tool is searchable (a new index), in an Agent
and in ``tooldeck run`` and ``chat``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _mcp import GROWING_SERVER, ROOT, SLOW
from helpers import answer, call, calls, tool_messages
from test_web_pages import shown, site  # noqa: F401  (site: the web app's fixture)
from tooldeck import Agent, AssistantOutput, ScriptedModel, ToolCall, tool
from tooldeck.observe import Instrumentation
from tooldeck.runlog import RunLog
from tooldeck.search import ToolSearch
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call
from tooldeck.tools.mcp import MCPToolset

Provider = Callable[..., ProviderSimulator]
MODEL = "openai-chat:shop-model"
FOUND = "tools found (callable from your next turn):"
SHOP = textwrap.dedent(
    '''
    from tooldeck import tool

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: paid"

    @tool
    def refund(order: str) -> str:
        """Refund an order's payment."""
        return f"refunded order {order}"

    @tool
    def track(parcel: str) -> str:
        """Track a parcel in transit."""
        return "in transit"

    __all__ = ["lookup", "refund", "track"]
    '''
)
DEFERRING = textwrap.dedent(
    '''
    from tooldeck import tool
    from tooldeck.search import ToolSearch

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: paid"

    @tool(defer_loading=True)
    def refund(order: str) -> str:
        """Refund an order's payment."""
        return f"refunded order {order}"

    __all__ = ["lookup", "refund"]
    capabilities = [ToolSearch(strategy="regex")]
    '''
)
DEFERRED_ONLY = DEFERRING.replace('capabilities = [ToolSearch(strategy="regex")]\n', "")
SEARCH_THEN_REFUND = [
    sim_call("search_tools", {"query": "refund an order", "limit": 1}),
    sim_call("refund", {"order": "7"}),
    reply("Order 7 is refunded."),
]


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    (tmp_path / "deferring.py").write_text(DEFERRING, encoding="utf-8")
    (tmp_path / "deferred_only.py").write_text(DEFERRED_ONLY, encoding="utf-8")
    return tmp_path


def tooldeck(
    cwd: Path, sim: ProviderSimulator | None, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``tooldeck ARGS`` in ``cwd`` on the simulator ``sim`` (None: a model never asked)."""
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    reach = ["--base-url", sim.base_url] if sim else ["--base-url", "http://127.0.0.1:9/v1"]
    command = [sys.executable, "-m", "tooldeck.cli", *args]
    if args[0] in ("run", "chat"):
        command += ["--model", MODEL, *reach]
    return subprocess.run(
        command,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={
            **base,
            "TOOLDECK_HOME": str(cwd / "home"),
            "OPENAI_API_KEY": "sk-test",
            **(sim.env if sim else {}),
        },
        timeout=120,
        check=False,
    )


def offered(request: dict[str, Any]) -> list[str]:
    return [item["function"]["name"] for item in request.get("tools", [])]


# -- the command line ----------------------------------------------------------------------


def test_defer_tools_after_shows_the_first_tools_and_the_display_shows_the_search(
    shop: Path, provider: Provider
) -> None:
    sim = provider(SEARCH_THEN_REFUND, model="shop-model")
    ran = tooldeck(
        shop,
        sim,
        "run",
        "Refund order 7",
        "-t",
        "shop.py",
        "--defer-tools-after",
        "1",
        "--approve",
        "refund",  # a deferred tool may be named: it is a tool of the module
        "--no-stream",
    )

    assert ran.returncode == 0, ran.stderr
    first, second, third = sim.requests
    assert offered(first) == ["lookup", "search_tools"]  # refund and track deferred
    assert offered(second) == ["lookup", "search_tools", "refund"]
    assert offered(third) == offered(second)
    assert second["messages"][-1]["content"] == f"{FOUND}\nrefund: Refund an order's payment."
    assert re.search(
        r'^  ⌕ searched "refund an order": revealed refund  \([0-9.]+ m?s\)$', ran.stdout, re.M
    ), ran.stdout
    assert '  → refund(order="7")' in ran.stdout
    assert "answer: Order 7 is refunded." in ran.stdout


def test_json_and_the_run_log_name_what_each_search_revealed(
    shop: Path, provider: Provider
) -> None:
    sim = provider(SEARCH_THEN_REFUND, model="shop-model")
    ran = tooldeck(
        shop, sim, "run", "Refund order 7", "-t", "shop.py", "--defer-tools-after", "1", "--json"
    )
    assert ran.returncode == 0, ran.stderr
    document = json.loads(ran.stdout)
    searched, refunded = document["calls"]
    assert searched["name"] == "search_tools"
    assert searched["revealed"] == ["refund"]
    assert "revealed" not in refunded  # only a search has reveals
    assert document["revealed"] == ["refund"]

    logged = tooldeck(shop, None, "logs", "show", document["run_id"])
    assert logged.returncode == 0, logged.stderr
    assert re.search(r'^  ⌕ searched "refund an order": revealed refund', logged.stdout, re.M)
    as_json = json.loads(tooldeck(shop, None, "logs", "show", document["run_id"], "--json").stdout)
    first, second = as_json["calls"]
    assert first["revealed"] == ["refund"]
    assert "revealed" not in second


def test_tool_search_keeps_the_modules_own_search_and_its_deferred_tools(
    shop: Path, provider: Provider
) -> None:
    sim = provider(
        [
            sim_call("search_tools", {"query": "refund"}),
            sim_call("refund", {"order": "7"}),
            reply("Done."),
        ],
        model="shop-model",
    )
    ran = tooldeck(shop, sim, "run", "Refund 7", "-t", "deferring.py", "--tool-search", "--json")
    assert ran.returncode == 0, ran.stderr
    first, second, _ = sim.requests
    assert offered(first) == ["lookup", "search_tools"]  # one search: the module's (regex)
    assert offered(second) == ["lookup", "search_tools", "refund"]
    assert json.loads(ran.stdout)["revealed"] == ["refund"]


@pytest.mark.parametrize(
    ("after", "said"),
    [
        ("1", "with lookup (and 2 deferred, found with search_tools);"),
        ("0", "with no tools (and 3 deferred, found with search_tools);"),
    ],
)
def test_chat_says_how_many_tools_wait_for_a_search(shop: Path, after: str, said: str) -> None:
    done = tooldeck(
        shop, None, "chat", "-t", "shop.py", "--defer-tools-after", after, stdin="exit\n"
    )
    assert done.returncode == 0, done.stderr
    assert said in done.stdout


def test_tools_lists_deferred_tools_marked(shop: Path) -> None:
    listed = tooldeck(shop, None, "tools", "deferred_only.py")
    assert listed.returncode == 0, listed.stderr
    assert "refund  [deferred: shown once search_tools finds it]" in listed.stdout
    described = json.loads(tooldeck(shop, None, "tools", "deferred_only.py", "--json").stdout)
    assert [(tool["name"], tool.get("deferred")) for tool in described] == [
        ("lookup", None),
        ("refund", True),
    ]


async def test_mcp_serve_serves_a_modules_deferred_tools_too(shop: Path) -> None:
    # an MCP client is served every tool, the deferred ones included: it defers its own
    served = ["-m", "tooldeck.cli", "mcp", "serve", str(shop / "deferred_only.py")]
    this_tooldeck = {"PYTHONPATH": str(ROOT / "src")}
    # (the SDK starts a server with a minimal environment: without PYTHONPATH a checkout's
    # test would serve whichever tooldeck is installed)
    async with MCPToolset.stdio(
        sys.executable, served, env=this_tooldeck, connect_timeout=SLOW
    ) as toolset:
        names = [(entry.name, entry.spec.description) for entry in await toolset.entries()]
        refunded = await toolset.call("refund", {"order": "7"})
    assert names == [("lookup", "Look an order up."), ("refund", "Refund an order's payment.")]
    assert refunded == "refunded order 7"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["-t", "shop.py", "--defer-tools-after", "-1"],
            "argument --defer-tools-after: must be 0 or more, got -1",
        ),
        (
            ["-t", "shop.py", "--defer-tools-after", "two"],
            "argument --defer-tools-after: expected a whole number, got 'two'",
        ),
        (
            ["-t", "shop.py", "--defer-tools-after", "3"],
            "--defer-tools-after 3 defers none of the 3 tools of 'shop.py': give a smaller N",
        ),
        (
            ["-t", "shop.py", "--tool-search"],
            "--tool-search finds deferred tools, and 'shop.py' has none: give "
            "--defer-tools-after N, or mark tools @tool(defer_loading=True) in the module",
        ),
        (
            ["--tool-search"],
            "--tool-search finds deferred tools of -t/--tools: give -t/--tools too",
        ),
        (
            ["--defer-tools-after", "1"],
            "--defer-tools-after defers tools of -t/--tools: give -t/--tools too",
        ),
        (
            ["-t", "shop.py", "--defer-tools-after", "1", "--tool-choice", "refund"],
            "--tool-choice 'refund' is deferred (not shown until search_tools finds it): leave "
            "it among the first --defer-tools-after N tools, or choose another",
        ),
    ],
)
def test_what_cannot_work_is_a_usage_error(shop: Path, args: list[str], error: str) -> None:
    done = tooldeck(shop, None, "run", "Hi", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert error in done.stderr
    assert done.stderr.count("\n") == 1  # one line, no traceback


# -- spans, the web page -------------------------------------------------------------------


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid"


@tool(defer_loading=True)
def refund_order(order_id: str) -> str:
    """Refund an order's payment to the customer."""
    return f"refunded {order_id}"


@tool(defer_loading=True)
def track_parcel(parcel_id: str) -> str:
    """Track a parcel in transit."""
    return "in transit"


def searching_model() -> ScriptedModel:
    return ScriptedModel(
        [
            calls(call("search_tools", "c1", query="refund")),
            calls(call("refund_order", "c2", order_id="A1")),
            answer("Refunded."),
        ]
    )


@pytest.mark.parametrize("capture", [False, True])
async def test_each_search_is_a_tool_search_span_under_its_call(capture: bool) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(
        searching_model(),
        [lookup_order, refund_order, track_parcel],
        capabilities=[ToolSearch(strategy="regex")],
        instrument=Instrumentation(tracer_provider, capture_content=capture),
    )
    await agent.run("Refund order A1")
    tracer_provider.shutdown()

    spans = exporter.get_finished_spans()
    (search,) = [span for span in spans if span.name == "tool_search"]
    (parent,) = [span for span in spans if span.name == "execute_tool search_tools"]
    assert search.parent is not None
    assert parent.context is not None
    assert search.parent.span_id == parent.context.span_id
    attributes = dict(search.attributes or {})
    expected: dict[str, Any] = {
        "gen_ai.operation.name": "tool_search",
        "gen_ai.tool.call.id": "c1",
        "tooldeck.tool_search.strategy": "regex",
        "tooldeck.tool_search.revealed": ("refund_order",),
        "tooldeck.tool_search.revealed_count": 1,
    }
    if capture:  # the query is the model's words: content, recorded only when asked
        expected["tooldeck.tool_search.query"] = "refund"
    assert attributes == expected
    assert [s.name for s in spans].count("tool_search") == 1  # the other call has none


async def test_a_providers_own_search_is_named_on_its_chat_span() -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    searched_there: dict[str, Any] = {  # Anthropic's block naming the tools its search loaded
        "type": "tool_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "refund_order"}],
        },
    }
    model = ScriptedModel(
        [
            AssistantOutput(
                tool_calls=(ToolCall(id="c1", name="refund_order", arguments={"order_id": "A1"}),),
                provider_items=(searched_there,),
            ),
            answer("Refunded."),
        ]
    )
    agent = Agent(
        model,
        [lookup_order, refund_order],
        instrument=Instrumentation(tracer_provider),
    )
    await agent.run("Refund order A1")
    tracer_provider.shutdown()

    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    revealed = [dict(span.attributes or {}).get("tooldeck.tool_search.revealed") for span in chats]
    assert revealed == [("refund_order",), None]
    assert "tool_search" not in [span.name for span in exporter.get_finished_spans()]


async def test_the_run_page_marks_searches_and_what_they_revealed(
    site: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    agent = Agent(
        searching_model(),
        [lookup_order, refund_order, track_parcel],
        capabilities=[ToolSearch(strategy="regex")],
    )
    agent.run_log = log = RunLog(tmp_path / "logs.db")
    result = await agent.run("Refund order A1")
    log.close()
    client = site(None)

    page = await client.get(f"/runs/{result.run_id}")

    assert page.status_code == 200
    assert page.text.count('class="lane lane-search"') == 1
    text = shown(page.text)
    assert re.search(r'search_tools [0-9.]+ m?s · "refund" → revealed refund_order', text), text
    assert '⌕ searched "refund" → revealed refund_order' in text
    assert re.search(r"refund_order [0-9.]+ m?s · ok", text)


async def test_the_tools_page_lists_deferred_tools_marked(
    site: Any,  # noqa: F811
) -> None:
    agent = Agent(searching_model(), [lookup_order, refund_order, track_parcel])
    client = site(agent)

    text = shown((await client.get("/tools")).text)

    assert text.index("lookup_order") < text.index("refund_order") < text.index("track_parcel")
    assert text.count("deferred shown to the model once search_tools finds it") == 2


# -- MCP: a server that adds a tool ----------------------------------------------------------


async def test_a_deferred_mcp_toolsets_new_tools_become_searchable() -> None:
    toolset = MCPToolset.stdio(
        GROWING_SERVER[0], GROWING_SERVER[1:], connect_timeout=SLOW, defer_loading=True
    )
    model = ScriptedModel(
        [
            calls(call("search_tools", "c1", query="grow")),
            calls(call("grow", "c2")),  # adds extra_1 and sends tools/list_changed
            calls(call("search_tools", "c3", query="extra")),
            calls(call("extra_1", "c4")),
            answer("ok"),
        ]
    )
    async with Agent(model, [toolset], capabilities=[ToolSearch()]) as agent:
        result = await agent.run("Grow.")

    assert tool_messages(result.messages) == [
        f"{FOUND}\ngrow: Add a tool.",
        '{"result": "added extra_1"}',
        f"{FOUND}\nextra_1: Added by grow.",  # the old tool set's index did not have it
        '{"result": "extra"}',
    ]
    shown_tools = [request.tool_names for request in model.requests]
    assert shown_tools == [
        ["search_tools"],  # every tool of the server deferred
        ["search_tools", "grow"],
        ["search_tools", "grow"],  # extra_1 is deferred too, until found
        ["search_tools", "grow", "extra_1"],
        ["search_tools", "grow", "extra_1"],
    ]
    assert toolset.changes_announced == 1


@pytest.mark.parametrize("command", ["run", "chat"])
def test_run_and_chat_follow_a_deferred_mcp_toolset_of_their_module_that_adds_a_tool(
    command: str, shop: Path, provider: Provider
) -> None:
    (shop / "growing.py").write_text(
        "import sys\n"
        "from tooldeck.tools.mcp import MCPToolset\n\n"
        f"growing = MCPToolset.stdio(sys.executable, [{GROWING_SERVER[1]!r}], "
        f"connect_timeout={SLOW}, defer_loading=True)\n",
        encoding="utf-8",
    )
    sim = provider(
        [
            sim_call("search_tools", {"query": "grow"}),
            sim_call("grow", {}),  # adds extra_1 and sends tools/list_changed
            sim_call("search_tools", {"query": "extra"}),
            sim_call("extra_1", {}),
            reply("Grown."),
        ],
        model="shop-model",
    )
    if command == "run":
        ran = tooldeck(shop, sim, "run", "Grow.", "-t", "growing.py", "--json")
    else:
        ran = tooldeck(shop, sim, "chat", "-t", "growing.py", stdin="Grow.\nexit\n")

    assert ran.returncode == 0, ran.stderr
    assert [offered(request) for request in sim.requests] == [
        ["search_tools"],  # every tool of the server deferred
        ["search_tools", "grow"],
        ["search_tools", "grow"],  # extra_1 is deferred too, until found
        ["search_tools", "grow", "extra_1"],
        ["search_tools", "grow", "extra_1"],
    ]
    assert sim.requests[3]["messages"][-1]["content"] == f"{FOUND}\nextra_1: Added by grow."
    assert sim.requests[4]["messages"][-1]["content"] == '{"result": "extra"}'
    if command == "run":
        assert json.loads(ran.stdout)["revealed"] == ["grow", "extra_1"]
    else:  # the banner names the tools the chat starts with, read before its first turn
        assert "with no tools (and 1 deferred, found with search_tools);" in ran.stdout
        assert "Grown." in ran.stdout
