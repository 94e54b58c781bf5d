"""Middleware around model requests and tool calls: order, changes, short cuts, failures."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from helpers import answer, call, calls
from tooldeck import (
    Agent,
    AssistantOutput,
    Message,
    RunContext,
    ScriptedModel,
    StopReason,
    ToolCall,
    ToolResult,
    tool,
)
from tooldeck.errors import ErrorCode, MiddlewareError
from tooldeck.run.middleware import Middleware, ModelCall, RequestContext


@tool
def add(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


class Recorder(Middleware):
    """Writes each hook it passes through into a shared log."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def before_request(
        self, request: ModelCall, ctx: RequestContext
    ) -> ModelCall | AssistantOutput:
        self.log.append(f"{self.name}.before_request")
        return request

    async def after_response(
        self, request: ModelCall, output: AssistantOutput, ctx: RequestContext
    ) -> AssistantOutput:
        self.log.append(f"{self.name}.after_response")
        return output

    async def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> ToolCall | ToolResult:
        self.log.append(f"{self.name}.before_tool_call")
        return call

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
    ) -> ToolResult:
        self.log.append(f"{self.name}.after_tool_call")
        return result


def test_hooks_run_in_list_order_going_in_and_reverse_order_coming_out() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    agent = Agent(model, [add], middleware=[Recorder("outer", log), Recorder("inner", log)])

    assert agent.run_sync("1+2?").answer == "3"
    request_hooks = [
        "outer.before_request",
        "inner.before_request",
        "inner.after_response",
        "outer.after_response",
    ]
    tool_hooks = [
        "outer.before_tool_call",
        "inner.before_tool_call",
        "inner.after_tool_call",
        "outer.after_tool_call",
    ]
    assert log == [*request_hooks, *tool_hooks, *request_hooks]


class CallBudget(Middleware):
    """A call-count guard: at most ``limit`` tool calls per run; later ones are refused."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used: dict[str, int] = {}

    async def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> ToolCall | ToolResult:
        run = str(ctx.deps)
        self.used[run] = self.used.get(run, 0) + 1
        if self.used[run] > self.limit:
            return ToolResult.failure(
                ErrorCode.CALL_LIMIT, f"not run: the guard allows {self.limit} calls per run"
            )
        return call


def test_a_call_count_guard_answers_calls_past_its_budget_without_running_them() -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> str:
        """Record a number."""
        ran.append(n)
        return f"recorded {n}"

    model = ScriptedModel(
        [
            calls(call("record", "c1", n=1), call("record", "c2", n=2), call("record", "c3", n=3)),
            answer("done"),
        ]
    )
    result = Agent(model, [record], middleware=[CallBudget(2)]).run_sync("go", deps="run-1")

    assert sorted(ran) == [1, 2]
    assert [trace.result.output for trace in result.tool_trace] == [
        "recorded 1",
        "recorded 2",
        "error[call_limit]: not run: the guard allows 2 calls per run",
    ]
    assert model.requests[1].messages[-1].content.startswith("error[call_limit]")


class RedactingLog(Middleware):
    """Logs every call and its result, with secret arguments replaced by '***'."""

    SECRET = frozenset({"password", "token"})

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> ToolCall | ToolResult:
        shown = {k: "***" if k in self.SECRET else v for k, v in call.arguments.items()}
        self.lines.append(f"call {call.name} {shown}")
        return call

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
    ) -> ToolResult:
        self.lines.append(f"result {call.name} ok={result.ok}")
        return result


def test_a_log_middleware_redacts_secret_arguments_while_the_tool_gets_them() -> None:
    received: list[str] = []

    @tool
    def login(user: str, password: str) -> str:
        """Log in."""
        received.append(password)
        return f"welcome {user}"

    log = RedactingLog()
    model = ScriptedModel([calls(call("login", user="ada", password="hunter2")), answer("in")])
    Agent(model, [login], middleware=[log]).run_sync("log me in")

    assert received == ["hunter2"]
    assert log.lines == ["call login {'user': 'ada', 'password': '***'}", "result login ok=True"]
    assert "hunter2" not in "\n".join(log.lines)


class ResultCache(Middleware):
    """Answers a call seen before (same tool, same arguments) from a cache."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, str], ToolResult] = {}
        self.hits = 0

    async def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> ToolCall | ToolResult:
        cached = self.cache.get((call.name, call.arguments_json))
        if cached is not None:
            self.hits += 1
            return cached
        return call

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
    ) -> ToolResult:
        if result.ok:
            self.cache[(call.name, call.arguments_json)] = result
        return result


def test_a_cache_middleware_answers_a_repeated_call_without_running_the_tool() -> None:
    lookups: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look up a city's population."""
        lookups.append(city)
        return f"{city}: 2.1 million"

    log: list[str] = []
    cache = ResultCache()
    model = ScriptedModel(
        [
            calls(call("lookup", "c1", city="Paris")),
            calls(call("lookup", "c2", city="Paris")),
            answer("2.1 million"),
        ]
    )
    agent = Agent(model, [lookup], middleware=[Recorder("log", log), cache])
    result = agent.run_sync("How many people live in Paris?")

    assert lookups == ["Paris"]
    assert cache.hits == 1
    assert [t.result.output for t in result.tool_trace] == ["Paris: 2.1 million"] * 2
    assert result.tool_trace[1].duration_s == 0.0
    # the outer layer saw both calls and both results, the cached one included
    assert log.count("log.before_tool_call") == 2
    assert log.count("log.after_tool_call") == 2


class Rewriter(Middleware):
    """Keeps only the latest user message, adds a rule to the instructions, and forbids tools
    after the first turn."""

    async def before_request(
        self, request: ModelCall, ctx: RequestContext
    ) -> ModelCall | AssistantOutput:
        latest = [m for m in request.messages if m.role == "user"][-1:]
        kept = request.messages if ctx.round > 1 else tuple(latest)
        settings = request.settings.with_tool_choice("none" if ctx.round > 1 else "required")
        return dataclasses.replace(
            request,
            messages=kept,
            settings=settings,
            instructions=request.instructions + " Answer in French.",
        )


def test_a_request_rewriter_changes_messages_instructions_and_tool_choice_per_request() -> None:
    model = ScriptedModel([calls(call("add", left=1, right=1)), answer("deux")])
    agent = Agent(model, [add], instructions="Be brief.", middleware=[Rewriter()])
    history = [Message.user("old question"), Message(role="assistant", content="old answer")]

    result = agent.run_sync("1+1?", history=history)

    first, second = model.requests
    assert [m.content for m in first.messages] == ["1+1?"]
    assert first.settings.tool_choice == "required"
    assert second.settings.tool_choice == "none"
    assert first.instructions == second.instructions == "Be brief. Answer in French."
    assert result.answer == "deux"
    assert len(result.messages) == 6  # the run's own transcript is not rewritten


def test_a_before_request_hook_can_answer_in_the_models_place() -> None:
    log: list[str] = []

    class Canned(Middleware):
        async def before_request(
            self, request: ModelCall, ctx: RequestContext
        ) -> ModelCall | AssistantOutput:
            return AssistantOutput(content=f"canned answer for round {ctx.round}")

    model = ScriptedModel([])
    agent = Agent(model, middleware=[Recorder("outer", log), Canned(), Recorder("inner", log)])

    assert agent.run_sync("Hi").answer == "canned answer for round 1"
    assert model.requests == []
    assert log == ["outer.before_request", "outer.after_response"]


def test_request_hooks_read_the_round_the_deps_and_the_tools_shown() -> None:
    seen: list[tuple[int, Any, list[str]]] = []

    class Watch(Middleware):
        async def before_request(
            self, request: ModelCall, ctx: RequestContext
        ) -> ModelCall | AssistantOutput:
            seen.append((ctx.round, ctx.deps, [spec.name for spec in ctx.tools]))
            return request

    model = ScriptedModel([calls(call("add", left=1, right=1)), answer("2")])
    Agent(model, [add], middleware=[Watch()]).run_sync("1+1?", deps={"user": "ada"})

    assert seen == [(1, {"user": "ada"}, ["add"]), (2, {"user": "ada"}, ["add"])]


def test_changed_arguments_are_validated_again_and_then_run() -> None:
    class Clamp(Middleware):
        async def before_tool_call(
            self, call: ToolCall, ctx: RunContext[Any]
        ) -> ToolCall | ToolResult:
            # the text "10" reaches the tool as the integer 10 only if it is validated again
            left = "10" if call.arguments["left"] > 10 else call.arguments["left"]
            return call.model_copy(update={"arguments": {**call.arguments, "left": left}})

    model = ScriptedModel([calls(call("add", left=100, right=5)), answer("15")])
    result = Agent(model, [add], middleware=[Clamp()]).run_sync("add")

    assert result.tool_trace[0].result.output == "15"
    assert result.tool_trace[0].call.arguments == {"left": "10", "right": 5}  # the call as it ran


def test_arguments_changed_into_invalid_ones_end_the_run_naming_the_middleware() -> None:
    class Breaker(Middleware):
        async def before_tool_call(
            self, call: ToolCall, ctx: RunContext[Any]
        ) -> ToolCall | ToolResult:
            return call.model_copy(update={"arguments": {"left": "many"}})

    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    with pytest.raises(MiddlewareError) as caught:
        Agent(model, [add], middleware=[Breaker()]).run_sync("add")

    assert str(caught.value) == (
        "middleware Breaker changed the arguments of 'add' (call 'c1') into ones its schema "
        "refuses: left: Input should be a valid integer, unable to parse string as an integer "
        "(got 'many'); right: missing (required)"
    )
    assert caught.value.hook == "before_tool_call"


def test_an_exception_in_a_tool_hook_ends_the_run_with_the_partial_result() -> None:
    class Broken(Middleware):
        async def after_tool_call(
            self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
        ) -> ToolResult:
            raise KeyError("audit log is full")

    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    with pytest.raises(MiddlewareError) as caught:
        Agent(model, [add], middleware=[Broken()]).run_sync("add")

    error = caught.value
    assert (
        str(error) == "middleware Broken failed in after_tool_call: KeyError: 'audit log is full'"
    )
    assert (error.middleware, error.hook) == ("Broken", "after_tool_call")
    assert isinstance(error.__cause__, KeyError)
    assert error.result is not None
    assert error.result.stop_reason is StopReason.MIDDLEWARE_ERROR
    assert error.result.messages[-1].tool_calls[0].name == "add"  # the turn is kept
    assert len(model.requests) == 1


async def test_an_exception_in_a_request_hook_ends_the_stream_with_the_partial_result() -> None:
    class Broken(Middleware):
        async def before_request(
            self, request: ModelCall, ctx: RequestContext
        ) -> ModelCall | AssistantOutput:
            if ctx.round == 2:
                raise RuntimeError("quota service down")
            return request

    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    events: list[str] = []

    async def drain() -> None:
        async for event in Agent(model, [add], middleware=[Broken()]).stream("add"):
            events.append(type(event).__name__)

    with pytest.raises(MiddlewareError) as caught:
        await drain()

    assert "failed in before_request: RuntimeError: quota service down" in str(caught.value)
    assert caught.value.result is not None
    assert [t.result.output for t in caught.value.result.tool_trace] == ["3"]
    assert events[-1] == "ModelRequest"


def test_a_failure_in_one_of_several_concurrent_calls_ends_the_run() -> None:
    class FailOnSecond(Middleware):
        async def before_tool_call(
            self, call: ToolCall, ctx: RunContext[Any]
        ) -> ToolCall | ToolResult:
            if call.id == "c2":
                raise ValueError("no")
            return call

    model = ScriptedModel(
        [calls(call("add", "c1", left=1, right=2), call("add", "c2", left=3, right=4))]
    )
    with pytest.raises(MiddlewareError, match="FailOnSecond failed in before_tool_call"):
        Agent(model, [add], middleware=[FailOnSecond()]).run_sync("add")


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (
            None,
            "middleware Odd.before_tool_call returned NoneType, expected the ToolCall or a ToolResult",
        ),
        (
            ToolCall(id="other", name="add", arguments={"left": 1, "right": 2}),
            "middleware Odd.before_tool_call changed the call's id or tool name ('c1' 'add' -> "
            "'other' 'add'); it may change the arguments only",
        ),
    ],
)
def test_a_hook_that_returns_something_unusable_ends_the_run(returned: Any, expected: str) -> None:
    class Odd(Middleware):
        async def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> Any:
            return returned

    model = ScriptedModel([calls(call("add", left=1, right=2)), answer("3")])
    with pytest.raises(MiddlewareError) as caught:
        Agent(model, [add], middleware=[Odd()]).run_sync("add")
    assert str(caught.value) == expected


def test_an_after_tool_call_hook_changes_what_the_model_reads() -> None:
    class Shorten(Middleware):
        async def after_tool_call(
            self, call: ToolCall, result: ToolResult, ctx: RunContext[Any]
        ) -> ToolResult:
            return ToolResult.success(result.output[:5] + " [shortened]")

    @tool
    def essay() -> str:
        """Write an essay."""
        return "A very long essay."

    model = ScriptedModel([calls(call("essay")), answer("ok")])
    result = Agent(model, [essay], middleware=[Shorten()]).run_sync("write")

    assert model.requests[1].messages[-1].content == "A ver [shortened]"
    assert result.tool_trace[0].result.output == "A ver [shortened]"


def test_middleware_must_be_middleware_objects_with_async_hooks() -> None:
    class SyncHook(Middleware):
        def before_tool_call(self, call: ToolCall, ctx: RunContext[Any]) -> Any:  # type: ignore[override]
            return call

    with pytest.raises(TypeError, match=r"SyncHook.before_tool_call must be an async method"):
        Agent(ScriptedModel([]), middleware=[SyncHook()])
    with pytest.raises(TypeError, match="middleware must be Middleware objects"):
        Agent(ScriptedModel([]), middleware=[object()])  # type: ignore[list-item]
