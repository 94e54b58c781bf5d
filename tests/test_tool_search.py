"""Tool search (issue 37): deferred tools stay out of every request until ``search_tools``
reveals them, then join the request's tools at the end; a call before that reads
``error[unknown_tool]`` with a hint to search. BM25 (``bm25s``), a regular expression or a
user's function rank; reveals are the run's state, so a checkpoint resumed in another
process and a run met again from its journal after a SIGKILL keep them.

The wire through the provider simulator (fresh call ids, as a hosted provider gives);
the processes are tests/_search_child.py.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from _mcp import EXAMPLE_SERVER, SLOW
from helpers import (
    answer,
    call,
    calls,
    child_finished,
    child_started,
    kill_when_written,
    tool_messages,
)
from tooldeck import Agent, ScriptedModel, ToolRegistry, tool
from tooldeck.errors import MiddlewareError, ToolDefinitionError
from tooldeck.eval.bfcl.dialect import bfcl_tools
from tooldeck.run._engine.hooks import Hooks
from tooldeck.run.capabilities import Capability, LargeOutputs, RunView
from tooldeck.search import NO_MATCH, ToolSearch
from tooldeck.search._rank import ranker
from tooldeck.sessions import SQLiteSession
from tooldeck.testing import ProviderSimulator, reply
from tooldeck.testing import call as sim_call
from tooldeck.tools.mcp import MCPToolset
from tooldeck.tools.registry import ToolEntry, Toolset, ToolView

CHILD = Path(__file__).with_name("_search_child.py")
BFCL = Path(__file__).resolve().parents[1] / "src/tooldeck/eval/bfcl/data/bfcl_tools.jsonl"
HINT = (
    "error[unknown_tool]: the tool 'refund_order' is not loaded yet: call search_tools with "
    "words for what you need; the tools it finds can be called from the next turn"
)
Provider = Callable[..., ProviderSimulator]


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid, not refunded"


@tool(defer_loading=True)
def refund_order(order_id: str) -> str:
    """Refund an order's payment to the customer.

    Args:
        order_id: The order to refund.
    """
    return f"refunded {order_id}"


@tool(defer_loading=True)
def track_parcel(parcel_id: str) -> str:
    """Track a parcel in transit."""
    return "in transit"


def _bfcl_functions(count: int) -> list[dict[str, Any]]:
    """The first ``count`` BFCL functions of distinct tool names (simple_python first)."""
    seen: dict[str, dict[str, Any]] = {}
    for line in BFCL.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        for function in case["functions"]:
            name = function["name"].replace(".", "_")
            if name not in seen and len(seen) < count:
                seen[name] = {**function, "question": case["question"]}
    return list(seen.values())


def _deferred_bfcl(count: int) -> list[ToolEntry]:
    functions = _bfcl_functions(count)
    made = bfcl_tools([{k: v for k, v in f.items() if k != "question"} for f in functions])
    return [ToolEntry.of(item) for item in made.tools]


def names(request: dict[str, Any]) -> list[str]:
    return [item["function"]["name"] for item in request.get("tools", [])]


def last_read(request: dict[str, Any]) -> str:
    content: str = request["messages"][-1]["content"]
    return content


# -- the wire ------------------------------------------------------------------------------


async def test_deferred_tools_are_absent_until_revealed_then_appended(provider: Provider) -> None:
    many = _deferred_bfcl(300)
    registry = ToolRegistry([lookup_order])
    registry.register(refund_order)
    for entry in many:
        registry.register(entry, defer_loading=True)
    sim = provider(
        [
            sim_call("search_tools", {"query": "refund an order's payment", "limit": 1}),
            sim_call("refund_order", {"order_id": "A1"}),
            reply("Refunded."),
        ]
    )
    agent = Agent(sim.model(), tools=registry)

    result = await agent.run("Refund order A1")

    assert result.answer == "Refunded."
    first, second, third = sim.requests
    assert names(first) == ["lookup_order", "search_tools"]  # none of the 301 deferred
    assert names(second) == ["lookup_order", "search_tools", "refund_order"]
    assert names(third) == names(second)
    assert last_read(second) == (
        "tools found (callable from your next turn):\n"
        "refund_order: Refund an order's payment to the customer."
    )
    assert last_read(third) == "refunded A1"


async def test_reveals_are_appended_in_reveal_order(provider: Provider) -> None:
    sim = provider(
        [
            sim_call("search_tools", {"query": "parcel"}),
            sim_call("search_tools", {"query": "refund"}),
            reply("ok"),
        ]
    )
    tools = [lookup_order, refund_order, track_parcel]
    agent = Agent(sim.model(), tools=tools, capabilities=[ToolSearch(strategy="regex")])

    await agent.run("hi")

    assert [names(r) for r in sim.requests] == [
        ["lookup_order", "search_tools"],
        ["lookup_order", "search_tools", "track_parcel"],
        ["lookup_order", "search_tools", "track_parcel", "refund_order"],
    ]


async def test_a_call_before_the_reveal_reads_unknown_tool_with_the_hint(
    provider: Provider,
) -> None:
    sim = provider(
        [
            sim_call("refund_order", {"order_id": "A1"}),
            sim_call("cancel_everything", {}),
            reply("I could not."),
        ]
    )
    agent = Agent(sim.model(), tools=[lookup_order, refund_order])

    result = await agent.run("Refund order A1")

    assert last_read(sim.requests[1]) == HINT
    assert last_read(sim.requests[2]) == (
        "error[unknown_tool]: there is no tool named 'cancel_everything'; available tools: "
        "lookup_order, search_tools; more tools can be found with search_tools"
    )
    assert result.answer == "I could not."


async def test_an_mcp_toolset_with_defer_loading_is_searched_and_called(provider: Provider) -> None:
    server = MCPToolset.stdio(
        EXAMPLE_SERVER[0], EXAMPLE_SERVER[1:], connect_timeout=SLOW, defer_loading=True
    )
    sim = provider(
        [
            sim_call("search_tools", {"query": "temperature", "limit": 1}),
            sim_call("convert_temperature", {"celsius": 100, "to": "fahrenheit"}),
            reply("212 F."),
        ]
    )
    agent = Agent(sim.model(), tools=[server])
    try:
        result = await agent.run("100 C in F?")
    finally:
        await server.aclose()

    assert [type(item).__name__ for item in agent.capabilities] == ["ToolSearch"]
    first, second, third = sim.requests
    assert names(first) == ["search_tools"]
    assert names(second) == ["search_tools", "convert_temperature"]
    assert last_read(third) == "212.0"
    assert result.answer == "212 F."


# -- ranking -------------------------------------------------------------------------------


async def test_bm25_ranks_the_right_tool_first_on_a_few_hundred_bfcl_functions() -> None:
    functions = _bfcl_functions(400)
    entries = _deferred_bfcl(400)
    bm25 = ranker("bm25", entries)
    firsts = top5 = 0
    for function in functions:
        found = [entries[i].name for i in await bm25.rank(function["question"], 5)]
        expected = function["name"].replace(".", "_")
        firsts += bool(found) and found[0] == expected
        top5 += expected in found
    # measured: 330 and 385 of 400 (the case's question as the query, the expected tool
    # first and among the top 5)
    assert firsts >= 0.8 * len(functions)
    assert top5 >= 0.95 * len(functions)


async def test_the_search_answers_one_line_per_tool_and_reveals_them() -> None:
    search = ToolSearch()
    model = ScriptedModel(
        [
            calls(call("search_tools", "s1", query="refund the payment of an order", limit=2)),
            answer("ok"),
        ]
    )
    agent = Agent(model, tools=[lookup_order, refund_order, track_parcel], capabilities=[search])

    result = await agent.run("hi")

    assert tool_messages(result.messages) == [
        "tools found (callable from your next turn):\n"
        "refund_order: Refund an order's payment to the customer."
    ]
    assert model.requests[1].tool_names == ["lookup_order", "search_tools", "refund_order"]


@pytest.mark.parametrize(
    ("strategy", "query", "read"),
    [
        ("bm25", "quantum chromodynamics", NO_MATCH),
        ("regex", "^zzz", NO_MATCH),
        ("bm25", "   ", "the query is empty: give words for what you need to do"),
        (
            "regex",
            "(",
            "the query is not a valid regular expression (missing ), unterminated subpattern "
            "at position 0); search again with a simpler pattern, such as a word of the "
            "tool's name",
        ),
    ],
)
async def test_what_the_model_reads_when_a_search_finds_nothing(
    strategy: Any, query: str, read: str
) -> None:
    model = ScriptedModel([calls(call("search_tools", "s1", query=query)), answer("ok")])
    agent = Agent(model, tools=[refund_order], capabilities=[ToolSearch(strategy=strategy)])

    result = await agent.run("hi")

    assert tool_messages(result.messages) == [read]
    assert model.requests[1].tool_names == ["search_tools"]  # nothing revealed


async def test_regex_ranks_name_matches_first() -> None:
    model = ScriptedModel([calls(call("search_tools", "s1", query="order")), answer("ok")])
    agent = Agent(
        model, tools=[track_parcel, refund_order], capabilities=[ToolSearch(strategy="regex")]
    )

    result = await agent.run("hi")

    assert tool_messages(result.messages)[0].splitlines()[1:] == [
        "refund_order: Refund an order's payment to the customer."
    ]


async def test_a_users_ranking_function_chooses_what_is_revealed() -> None:
    seen: list[tuple[str, list[str]]] = []

    async def rank(query: str, tools: Sequence[ToolEntry]) -> list[str]:
        seen.append((query, [entry.name for entry in tools]))
        return ["no_such_tool", "track_parcel", "track_parcel"]

    model = ScriptedModel([calls(call("search_tools", "s1", query="where")), answer("ok")])
    agent = Agent(
        model, tools=[refund_order, track_parcel], capabilities=[ToolSearch(strategy=rank)]
    )

    result = await agent.run("hi")

    assert seen == [("where", ["refund_order", "track_parcel"])]
    assert tool_messages(result.messages) == [
        "tools found (callable from your next turn):\ntrack_parcel: Track a parcel in transit."
    ]
    assert model.requests[1].tool_names == ["search_tools", "track_parcel"]


async def test_a_ranking_function_that_fails_is_read_as_a_failed_search() -> None:
    def rank(query: str, tools: Sequence[ToolEntry]) -> str:
        return "track_parcel"  # a string, not a list of names

    model = ScriptedModel([calls(call("search_tools", "s1", query="where")), answer("ok")])
    agent = Agent(model, tools=[track_parcel], capabilities=[ToolSearch(strategy=rank)])

    result = await agent.run("hi")

    assert tool_messages(result.messages) == [
        "error[tool_error]: the tool search failed: TypeError: a ToolSearch ranking must "
        "return a list of tool names, got 'track_parcel'"
    ]


# -- declaring -----------------------------------------------------------------------------


def test_an_agent_with_deferred_tools_and_no_search_gets_one() -> None:
    plain = Agent(ScriptedModel([]), tools=[lookup_order])
    deferred = Agent(ScriptedModel([]), tools=[lookup_order, refund_order])
    own = ToolSearch(strategy="regex")
    given = Agent(ScriptedModel([]), tools=[refund_order], capabilities=[own])
    registry = Agent(ScriptedModel([]), tools=ToolRegistry([lookup_order], defer_loading=True))
    view = Agent(ScriptedModel([]), tools=ToolView.of([ToolEntry.of(refund_order)]))

    assert plain.capabilities == ()
    assert [repr(item) for item in deferred.capabilities] == ["ToolSearch(strategy='bm25')"]
    assert given.capabilities == (own,)
    assert [repr(item) for item in registry.capabilities] == ["ToolSearch(strategy='bm25')"]
    assert [repr(item) for item in view.capabilities] == ["ToolSearch(strategy='bm25')"]


def test_bm25_without_its_library_is_refused_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "bm25s" else real(name, *a)
    )
    with pytest.raises(ImportError) as refused:
        Agent(ScriptedModel([]), tools=[refund_order])
    assert str(refused.value) == (
        "ToolSearch(strategy='bm25') needs the bm25s library: pip install 'tooldeck[search]' "
        "(or give ToolSearch(strategy='regex'))"
    )
    Agent(ScriptedModel([]), tools=[refund_order], capabilities=[ToolSearch(strategy="regex")])


def test_a_registry_defers_what_it_is_told_to() -> None:
    registry = ToolRegistry([ToolEntry.of(refund_order)], defer_loading=True)
    registry.register(lookup_order, defer_loading=False)
    view = registry.view()

    assert view.names == ("lookup_order",)
    assert list(view.deferred) == ["refund_order"]
    assert [spec.name for spec in view.specs] == ["lookup_order"]
    assert registry.defers


def shown_later() -> str:
    """A tool declared with a wrong setting."""
    return "x"


async def test_a_registry_defers_a_toolsets_tools_when_told_to() -> None:
    class Shop(Toolset):
        version = 1

        async def entries(self) -> Sequence[ToolEntry]:
            return [ToolEntry.of(lookup_order)]

    registry = ToolRegistry()
    shop = Shop()
    registry.register(shop, defer_loading=True)
    assert registry.defers

    view = await registry.load_view()

    assert view.names == ()
    assert list(view.deferred) == ["lookup_order"]
    registry.remove(shop)
    assert not registry.defers


async def test_show_tools_is_an_extension_point_any_capability_may_use() -> None:
    class LaterTools(Capability):  # shows shown_later from the second request on
        def show_tools(self, view: ToolView, ctx: RunView) -> ToolView:
            if ctx.round == 0:
                return view
            return ToolView.of((*view.entries, ToolEntry.of(shown_later)))

    model = ScriptedModel([calls(call("lookup_order", "c1", order_id="A1")), answer("ok")])
    agent = Agent(model, tools=[lookup_order], capabilities=[LaterTools()])

    await agent.run("hi")

    assert [r.tool_names for r in model.requests] == [
        ["lookup_order"],
        ["lookup_order", "shown_later"],
    ]
    assert Hooks.of([LaterTools()]) is not None
    assert Hooks.of([ToolSearch()]).showing  # type: ignore[union-attr]
    unhooked = Hooks.of([LargeOutputs(10)])
    assert unhooked is None or unhooked.showing == ()


def test_wrong_settings_are_refused_naming_them() -> None:
    with pytest.raises(ToolDefinitionError, match="defer_loading must be True or False"):
        tool(defer_loading="yes")(shown_later)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="strategy must be 'bm25', 'regex' or a function"):
        ToolSearch(strategy="keywords")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_limit must be a whole number of at least 1"):
        ToolSearch(max_limit=0)


async def test_a_show_tools_hook_that_fails_ends_the_run_naming_it() -> None:
    class Broken(Capability):
        def show_tools(self, view: ToolView, ctx: RunView) -> ToolView:
            return "no view"  # type: ignore[return-value]

    agent = Agent(ScriptedModel([answer("x")]), tools=[lookup_order], capabilities=[Broken()])
    with pytest.raises(MiddlewareError) as stopped:
        await agent.run("hi")
    assert str(stopped.value) == "middleware Broken.show_tools returned str, expected a ToolView"


# -- reveals are the run's -----------------------------------------------------------------


async def test_a_sessions_next_run_starts_with_the_tools_its_last_run_revealed(
    tmp_path: Path, provider: Provider
) -> None:
    sim = provider(
        [
            sim_call("search_tools", {"query": "track a parcel", "limit": 1}),
            reply("Searched."),
            sim_call("track_parcel", {"parcel_id": "P1"}),
            reply("In transit."),
        ]
    )
    agent = Agent(sim.model(), tools=[lookup_order, refund_order, track_parcel])
    async with SQLiteSession(str(tmp_path / "shop.db"), "shop") as session:
        await agent.run("Find the parcel tool", session=session)
        result = await agent.run("Where is parcel P1?", session=session)

    assert result.answer == "In transit."
    assert names(sim.requests[2]) == ["lookup_order", "search_tools", "track_parcel"]
    assert last_read(sim.requests[3]) == "in transit"


def _child(scenario: str, workdir: Path, sim: ProviderSimulator) -> subprocess.Popen[str]:
    return child_started(CHILD, scenario, workdir, sim)


def _finished(scenario: str, workdir: Path, sim: ProviderSimulator) -> dict[str, Any]:
    return child_finished(CHILD, scenario, workdir, sim)


def test_a_reveal_survives_a_checkpoint_resumed_in_another_process(
    tmp_path: Path, provider: Provider
) -> None:
    sim = provider(
        [
            sim_call("search_tools", {"query": "refund payment", "limit": 1}),
            sim_call("refund_order", {"order_id": "A1"}),
            reply("Refunded."),
        ]
    )
    paused = _finished("pause", tmp_path, sim)
    assert paused["stop_reason"] == "paused"

    resumed = _finished("resume", tmp_path, sim)

    assert resumed["answer"] == "Refunded."
    assert (tmp_path / "effects").read_text() == "refund A1\n"
    after = sim.requests[-1]  # asked by the resuming process
    assert names(after) == ["lookup_order", "search_tools", "refund_order"]
    assert last_read(after) == "refunded A1"


@pytest.mark.parametrize("door", ["journal", "durable"])
def test_a_reveal_survives_a_kill_and_the_recovery(
    door: str, tmp_path: Path, provider: Provider
) -> None:
    """A session's journal, or a durable (DBOS) run: killed in the revealed tool's call,
    the run met again in a new process still shows that tool, calls it and goes on."""
    sim = provider(
        [
            sim_call("search_tools", {"query": "refund payment", "limit": 1}),
            sim_call("refund_order", {"order_id": "A1"}),
            reply("Refunded."),
        ]
    )
    kill_when_written(_child(door, tmp_path, sim), tmp_path / "hanging", "the refund")

    again = _finished(f"{door}-again", tmp_path, sim)

    assert again["recovered"] is (door == "journal")  # a durable run is DBOS's to recover
    assert again["answer"] == "Refunded."
    assert again["read"] == [
        "tools found (callable from your next turn):\nrefund_order: Refund an order's payment "
        "to the customer.",
        "refunded A1",
    ]
    assert (tmp_path / "effects").read_text() == "refund A1\n"
    assert len(sim.requests) == 3  # the turns before the kill were read back, not asked
    after = sim.requests[-1]  # the request the run met again made
    assert names(after) == ["lookup_order", "search_tools", "refund_order"]
    assert last_read(after) == "refunded A1"
