"""DurableAgent in one process, on a real SQLite system database: what a durable run returns,
the steps DBOS records, pauses and decisions, deps by name, and every refusal's message."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helpers import answer, call, calls, tool_messages
from tooldeck import (
    Agent,
    Approve,
    FunctionTool,
    Reject,
    RunContext,
    ScriptedModel,
    ToolRegistry,
    ToolResult,
    external_tool,
    tool,
)
from tooldeck.durable import DurableAgent, recover_runs
from tooldeck.errors import (
    CheckpointError,
    LimitExceeded,
    ModelError,
    ModelRetry,
    ToolExecutionError,
)
from tooldeck.results import RecordedError
from tooldeck.run.policy import Limits
from tooldeck.tools.registry import ToolsLike

pytestmark = pytest.mark.usefixtures("launched_dbos")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@tool
async def wait_then_echo(text: str, seconds: float) -> str:
    """Wait, then echo the text."""
    await asyncio.sleep(seconds)
    return text


@tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money (a person approves it first)."""
    return f"moved {amount}"


locate = external_tool(
    "locate_phone",
    "Where the user's phone is.",
    {"type": "object", "properties": {}, "additionalProperties": False},
)


def durable(model: ScriptedModel, tools: ToolsLike, **options: Any) -> DurableAgent[Any, Any]:
    name = unique("agent")
    return DurableAgent(Agent(model, tools, **options), name=name)


async def steps(run_id: str) -> list[str]:
    return [step["function_name"] for step in await DBOS.list_workflow_steps_async(run_id)]


async def test_a_durable_run_returns_what_a_plain_run_returns() -> None:
    def script() -> ScriptedModel:
        return ScriptedModel(
            [calls(call("wait_then_echo", "c1", text="hi", seconds=0)), answer("said hi")]
        )

    plain = await Agent(script(), [wait_then_echo]).run("Say hi.")
    agent = durable(script(), [wait_then_echo])
    result = await agent.run("Say hi.", run_id="run-said-hi-" + uuid.uuid4().hex)

    assert result.answer == plain.answer == "said hi"
    assert result.messages == plain.messages
    assert [t.result for t in result.tool_trace] == [t.result for t in plain.tool_trace]
    assert result.usage == plain.usage
    assert result.run_id.startswith("run-said-hi-")  # the workflow id is the run id
    assert await steps(result.run_id) == [
        f"{agent.name}.model",
        f"{agent.name}.tool:wait_then_echo:c1",
        f"{agent.name}.model",
    ]
    handle = await DBOS.retrieve_workflow_async(result.run_id)
    assert await handle.get_result() == result


async def test_parallel_calls_take_their_steps_in_the_models_order_whatever_finishes_first() -> (
    None
):
    turn = calls(
        call("wait_then_echo", "slow", text="a", seconds=0.3),
        call("wait_then_echo", "quick", text="b", seconds=0),
        call("wait_then_echo", "middle", text="c", seconds=0.1),
    )
    for max_concurrency in (None, 1):
        model = ScriptedModel([turn, answer("ok")])
        agent = durable(model, [wait_then_echo], max_concurrency=max_concurrency)
        result = await agent.run("Go.")
        assert tool_messages(result.messages) == ["a", "b", "c"]
        assert await steps(result.run_id) == [
            f"{agent.name}.model",
            f"{agent.name}.tool:wait_then_echo:slow",
            f"{agent.name}.tool:wait_then_echo:quick",
            f"{agent.name}.tool:wait_then_echo:middle",
            f"{agent.name}.model",
        ]


async def test_a_tool_that_times_out_is_recorded_as_a_timeout_inside_its_step() -> None:
    @tool(timeout=0.05)
    async def stuck() -> str:
        """Never finish in time."""
        await asyncio.sleep(30)
        return "never"

    model = ScriptedModel([calls(call("stuck", "c1")), answer("gave up")])
    result = await durable(model, [stuck]).run("Try.")

    assert tool_messages(result.messages) == [
        "error[tool_timeout]: 'stuck' did not finish within 0.05 s and was stopped; "
        "try smaller inputs or another approach"
    ]
    outputs = await DBOS.list_workflow_steps_async(result.run_id)
    assert outputs[1]["output"] == result.tool_trace[0].result


class Unpicklable(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")


async def test_an_exception_pickle_cannot_read_back_is_recorded_as_a_recorded_error() -> None:
    @tool
    def fails() -> str:
        """Fail in a way pickle cannot replay."""
        raise Unpicklable(7, "disk full")

    model = ScriptedModel([calls(call("fails", "c1")), answer("sorry")])
    result = await durable(model, [fails], include_error_details=True).run("Try.")

    error = result.tool_trace[0].error
    assert isinstance(error, RecordedError)
    assert (error.type_name, str(error)) == ("Unpicklable", "7: disk full")
    assert tool_messages(result.messages) == ["error[tool_error]: RecordedError: 7: disk full"]


async def test_model_retry_from_a_tool_reaches_the_model() -> None:
    @tool
    def picky(n: int) -> str:
        """Only even numbers."""
        if n % 2:
            raise ModelRetry("give me an even number")
        return "ok"

    model = ScriptedModel(
        [calls(call("picky", "c1", n=1)), calls(call("picky", "c2", n=2)), answer("done")]
    )
    result = await durable(model, [picky]).run("Try.")
    assert tool_messages(result.messages) == ["error[tool_error]: give me an even number", "ok"]


async def test_a_stop_is_raised_with_its_partial_result_in_every_process() -> None:
    model = ScriptedModel([calls(call("wait_then_echo", "c1", text="a", seconds=0))] * 3)
    agent = durable(model, [wait_then_echo], limits=Limits(max_rounds=1))
    run_id = unique("stopped")
    with pytest.raises(LimitExceeded) as raised:
        await agent.run("Loop.", run_id=run_id)
    assert raised.value.limit == "max_rounds"
    assert raised.value.result is not None
    assert tool_messages(raised.value.result.messages) == ["a"]

    handle = await DBOS.retrieve_workflow_async(run_id)
    with pytest.raises(LimitExceeded) as read_back:
        await handle.get_result()
    assert str(read_back.value) == str(raised.value)


async def test_a_tool_that_raises_ends_the_run_with_its_error_kept_by_name() -> None:
    @tool(on_error="raise")
    def explode() -> str:
        """Fail loudly."""
        raise KeyError("missing")

    model = ScriptedModel([calls(call("explode", "c1")), answer("never")])
    with pytest.raises(ToolExecutionError) as raised:
        await durable(model, [explode]).run("Go.")
    assert raised.value.result is not None
    error = raised.value.result.tool_trace[0].error
    assert isinstance(error, RecordedError)
    assert repr(error) == "KeyError(\"'missing'\")"


class Weather(BaseModel):
    city: str
    degrees: int


async def test_a_typed_answer_comes_back_typed() -> None:
    model = ScriptedModel([calls(call("final_answer", "c1", city="Oslo", degrees=4))])
    agent = DurableAgent(Agent(model, output_type=Weather), name=unique("typed"))
    result = await agent.run("Weather?")
    assert result.output == Weather(city="Oslo", degrees=4)
    handle = await DBOS.retrieve_workflow_async(result.run_id)
    assert (await handle.get_result()).output == Weather(city="Oslo", degrees=4)


async def test_starting_a_run_id_again_joins_that_run_without_asking_the_model() -> None:
    model = ScriptedModel([answer("once")])
    agent = durable(model, [])
    run_id = unique("same")
    first = await agent.run("Hi.", run_id=run_id)
    again = await agent.run("Hi.", run_id=run_id)
    assert again == first
    assert len(model.requests) == 1


async def test_deps_are_named_and_found_in_the_process_that_runs() -> None:
    @tool
    def whoami(ctx: RunContext[dict[str, str]]) -> str:
        """Say who the run is for."""
        return f"{ctx.deps['user']} in {ctx.run_id}"

    model = ScriptedModel([calls(call("whoami", "c1")), answer("done")])
    deps = {"ana": {"user": "Ana"}}
    agent = DurableAgent(Agent(model, [whoami]), name=unique("deps"), deps=deps)
    result = await agent.run("Who?", deps="ana", run_id="for-ana")
    assert tool_messages(result.messages) == ["Ana in for-ana"]

    resolved: list[str] = []

    def lookup(name: str) -> dict[str, str]:
        resolved.append(name)
        return {"user": name.title()}

    model = ScriptedModel([calls(call("whoami", "c1")), answer("done")])
    agent = DurableAgent(Agent(model, [whoami]), name=unique("deps"), deps=lookup)
    result = await agent.run("Who?", deps="bo", run_id=unique("for-bo"))
    assert tool_messages(result.messages)[0].startswith("Bo in for-bo-")
    assert resolved == ["bo"]


async def test_deps_given_as_an_object_or_an_unknown_name_are_refused_before_starting() -> None:
    agent = DurableAgent(Agent(ScriptedModel([])), name=unique("deps"), deps={"default": object()})
    with pytest.raises(TypeError, match=r"takes its deps by name .* got dict"):
        await agent.run("Hi.", deps={"user": "Ana"})  # type: ignore[arg-type]
    with pytest.raises(KeyError, match=r"has no deps named 'prod'; known: 'default'"):
        await agent.run("Hi.", deps="prod")


async def test_a_run_whose_deps_this_process_lacks_fails_saying_so() -> None:
    agent = DurableAgent(Agent(ScriptedModel([answer("never")])), name=unique("nodeps"))
    with pytest.raises(LookupError, match=r"asks for deps 'prod', but DurableAgent .* has none"):
        await agent.run("Hi.", deps="prod")


def test_declaring_is_checked() -> None:
    name = unique("declared")
    DurableAgent(Agent(ScriptedModel([])), name=name)
    with pytest.raises(ValueError, match=rf"a DurableAgent named '{name}' is already declared"):
        DurableAgent(Agent(ScriptedModel([])), name=name)
    with pytest.raises(ValueError, match=r"name must be a non-empty string .* got ' x'"):
        DurableAgent(Agent(ScriptedModel([])), name=" x")
    with pytest.raises(TypeError, match=r"DurableAgent wraps an Agent, got ScriptedModel"):
        DurableAgent(ScriptedModel([]), name=unique("bad"))  # type: ignore[arg-type]


async def replay_from_last_request(run_id: str) -> Any:
    """Execute the run again from its last model request (as a recovery would)."""
    recorded = await DBOS.list_workflow_steps_async(run_id)
    last = max(s["function_id"] for s in recorded if s["function_name"].endswith(".model"))
    handle = await DBOS.fork_workflow_async(run_id, last)
    return await handle.get_result()


def lookup_tool(parameter: str, description: str = "Look a word up.") -> FunctionTool[..., Any]:
    schema = {"type": "object", "properties": {parameter: {"type": "string"}}}
    return FunctionTool("lookup", description, schema, lambda **arguments: "found")


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ("remove", r"\(gone: 'lookup'\)"),
        ("parameters", r"\(other parameters: 'lookup'\)"),
        ("add", r"\(new: 'define'\)"),
    ],
)
async def test_a_replay_refuses_recorded_calls_to_tools_that_changed(
    change: str, refusal: str
) -> None:
    turn = calls(call("lookup", "l1", word="owl"), call("define", "d1", word="owl"))
    registry = ToolRegistry([lookup_tool("word")])
    agent = durable(ScriptedModel([turn, answer("an owl"), answer("again")]), registry)
    done = await agent.run("Look up owl.")
    assert tool_messages(done.messages)[1].startswith("error[unknown_tool]")

    if change in ("remove", "parameters"):
        registry.remove("lookup")
    if change == "parameters":
        registry.register(lookup_tool("term"))
    if change == "add":
        word = {"type": "object", "properties": {"word": {"type": "string"}}}
        registry.register(FunctionTool("define", "Define a word.", word, lambda **_: "a bird"))
    with pytest.raises(ModelError, match=rf"cannot be replayed: .* {refusal}\. A recovered run"):
        await replay_from_last_request(done.run_id)


async def test_a_replay_goes_on_when_only_descriptions_changed() -> None:
    registry = ToolRegistry([lookup_tool("word")])
    model = ScriptedModel([calls(call("lookup", "l1", word="owl")), answer("an owl"), answer("2")])
    agent = durable(model, registry)
    done = await agent.run("Look up owl.")
    registry.remove("lookup")
    registry.register(lookup_tool("word", description="Look a word up in the dictionary."))
    again = await replay_from_last_request(done.run_id)
    assert (again.answer, tool_messages(again.messages)) == ("2", ["found"])


async def test_an_agent_tools_inner_run_is_steps_of_the_durable_run_and_replays() -> None:
    seen: list[str] = []

    @tool
    def lookup(ctx: RunContext[None], word: str) -> str:
        """Look a word up."""
        seen.append(f"{ctx.run_id} {ctx.call_id}")
        return f"{word}: a bird"

    inner_model = ScriptedModel([calls(call("lookup", "c1", word="owl")), answer("a bird")])
    researcher = Agent(inner_model, [lookup]).as_tool(name="researcher", description="Finds.")
    outer_model = ScriptedModel(
        [calls(call("researcher", "c1", input="owl?")), answer("It is a bird."), answer("again")]
    )
    agent = durable(outer_model, [researcher])
    done = await agent.run("What is an owl?")
    assert (done.answer, tool_messages(done.messages)) == ("It is a bird.", ["a bird"])
    assert done.tool_trace[0].inner_trace[0].result.output == "owl: a bird"
    inner = f"{agent.name}/researcher"
    assert await steps(done.run_id) == [
        f"{agent.name}.model",
        f"{inner}.model",
        f"{inner}.tool:lookup:c1",  # the same call id as the outer call: told apart
        f"{inner}.model",
        f"{agent.name}.model",
    ]
    assert seen == [f"{done.run_id}/c1 c1"]  # the inner run's id: the outer one and the call

    again = await replay_from_last_request(done.run_id)
    assert again.answer == "again"
    inner_trace = again.tool_trace[0].inner_trace
    assert inner_trace is not None
    assert [t.result.output for t in inner_trace] == ["owl: a bird"]  # read back, not run
    assert (len(inner_model.requests), len(seen)) == (2, 1)  # nothing inner ran again


async def test_a_call_inside_an_agent_tool_pauses_the_durable_run_until_approved() -> None:
    inner = Agent(
        ScriptedModel([calls(call("transfer", "t1", amount=5)), answer("moved")]), [transfer]
    )
    payer = inner.as_tool(name="payer", description="Pays.")
    agent = durable(
        ScriptedModel([calls(call("payer", "p1", input="pay 5")), answer("Paid.")]), [payer]
    )
    paused = await agent.run("Pay 5.")
    assert [(p.id, p.path) for p in paused.pending] == [("p1/t1", ("payer",))]

    done = await agent.resume(paused.run_id, {"p1/t1": Approve(by="ana")})
    assert done.answer == "Paid."
    assert done.tool_trace[0].inner_trace[0].result.output == "moved 5"
    assert f"{agent.name}/payer.tool:transfer:t1" in await steps(done.run_id)


async def test_a_pause_waits_in_the_workflow_and_resume_goes_on() -> None:
    model = ScriptedModel(
        [calls(call("transfer", "t1", amount=5), call("locate_phone", "p1")), answer("done")]
    )
    agent = durable(model, [transfer, locate])
    paused = await agent.run("Pay and find my phone.")
    assert paused.stop_reason == "paused"
    assert [(p.call.id, p.kind) for p in paused.pending] == [("t1", "approval"), ("p1", "external")]
    assert await agent.paused(paused.run_id) == paused

    again = await agent.resume(paused.run_id, {"t1": Approve(by="ana")})
    assert again.stop_reason == "paused"  # the external call still waits
    assert [p.call.id for p in again.pending] == ["p1"]

    done = await agent.resume(paused.run_id, {"p1": ToolResult.success("in the kitchen")})
    assert done.answer == "done"
    assert tool_messages(done.messages) == ["moved 5", "in the kitchen"]
    assert len(model.requests) == 2
    assert await agent.paused(paused.run_id) is None
    handle = await DBOS.retrieve_workflow_async(paused.run_id)
    assert await handle.get_result() == done


async def test_decisions_that_do_not_fit_are_refused_before_they_are_sent() -> None:
    model = ScriptedModel([calls(call("transfer", "t1", amount=5)), answer("not paid")])
    agent = durable(model, [transfer])
    paused = await agent.run("Pay.")

    with pytest.raises(CheckpointError, match=r"no pending call with id 'nope'"):
        await agent.resume(paused.run_id, {"nope": Approve()})
    with pytest.raises(CheckpointError, match=r"needs Approve\(\) or Reject\(\), got ToolResult"):
        await agent.resume(paused.run_id, {"t1": ToolResult.success("paid")})
    with pytest.raises(CheckpointError, match=r"run 'no-such-run' is not waiting for decisions"):
        await agent.resume("no-such-run", {"t1": Approve()})

    done = await agent.resume(paused.run_id, {"t1": Reject(message="not today")})
    assert tool_messages(done.messages) == ["error[rejected]: not today"]
    with pytest.raises(CheckpointError, match=r"is not waiting for decisions"):
        await agent.resume(paused.run_id, {"t1": Approve()})


async def test_a_message_for_another_pause_is_ignored_and_the_run_keeps_waiting() -> None:
    from tooldeck.durable._pauses import DECISIONS_TOPIC, Decisions

    model = ScriptedModel([calls(call("transfer", "t1", amount=5)), answer("paid")])
    agent = durable(model, [transfer])
    paused = await agent.run("Pay.")
    await DBOS.send_async(paused.run_id, Decisions(7, {"t1": Approve()}), DECISIONS_TOPIC)
    await DBOS.send_async(paused.run_id, "not decisions", DECISIONS_TOPIC)
    await asyncio.sleep(0.3)
    assert await agent.paused(paused.run_id) == paused

    done = await agent.resume(paused.run_id, {"t1": Approve()})
    assert done.answer == "paid"


async def test_start_returns_dbos_handles_and_a_queue_runs_the_run() -> None:
    queue = await DBOS.register_queue_async(unique("queue"), worker_concurrency=2)
    model = ScriptedModel([answer("queued"), answer("started")])
    agent = durable(model, [])

    queued = await agent.start_async("Hi.", queue=queue, run_id=unique("queued"))
    assert queued.get_workflow_id().startswith("queued-")
    assert (await queued.get_result(polling_interval_sec=0.05)).answer == "queued"
    started = await agent.start_async("Hi.")
    assert (await started.get_result()).answer == "started"


def test_the_synchronous_api() -> None:
    model = ScriptedModel(
        [calls(call("transfer", "t1", amount=5)), answer("paid"), answer("in the background")]
    )
    agent = durable(model, [transfer])
    paused = agent.run_sync("Pay.")
    assert [p.call.id for p in paused.pending] == ["t1"]
    assert agent.resume_sync(paused.run_id, {"t1": Approve()}).answer == "paid"

    handle = agent.start("Hi.", run_id=unique("background"))
    assert handle.get_workflow_id().startswith("background-")
    assert handle.get_result().answer == "in the background"


async def test_a_signed_pause_refuses_decisions_checked_with_another_key() -> None:
    from tooldeck.durable._pauses import send

    model = ScriptedModel([calls(call("transfer", "t1", amount=5)), answer("paid")])
    agent = DurableAgent(
        Agent(model, [transfer], checkpoint_key=b"the workers' key"), name=unique("signed")
    )
    paused = await agent.run("Pay.")
    assert paused.checkpoint is not None
    assert paused.checkpoint.signature
    with pytest.raises(CheckpointError, match=r"signature does not match"):
        await send(paused.run_id, {"t1": Approve()}, b"another key")
    assert (await agent.resume(paused.run_id, {"t1": Approve()})).answer == "paid"


async def test_recover_runs_needs_the_dead_workers_id() -> None:
    with pytest.raises(ValueError, match=r"executor_id must name the worker whose runs"):
        await recover_runs("", queue="runs")
