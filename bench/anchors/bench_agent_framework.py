"""Microsoft Agent Framework (`agent-framework-core`, import `agent_framework`) overhead benchmark.

Run:  $BENCH_VENVS/agent_framework/bin/python bench_agent_framework.py [--no-trace]
Fake model: a chat client composed exactly like the shipped OpenAIChatCompletionClient
(FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer, BaseChatClient) whose
_inner_get_response() returns a ChatResponse built from Content.from_function_call / from_text.
The tool loop lives in FunctionInvocationLayer, so without it tools would never run.
"""

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
    tool,
)
from agent_framework.observability import ChatTelemetryLayer


def _results(messages):
    return [c for m in messages for c in m.contents if c.type == "function_result"]


def _final(text):
    return ChatResponse(messages=[Message("assistant", [Content.from_text(text)])])


def _calls(name, args_list):
    return ChatResponse(messages=[Message("assistant", [
        Content.from_function_call(call_id=B.next_call_id(), name=name, arguments=a) for a in args_list])])


class _FakeBase(FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer, BaseChatClient):
    OTEL_PROVIDER_NAME = "fake"

    def _inner_get_response(self, *, messages, stream, options, **kwargs):
        if stream:
            raise NotImplementedError
        return self._respond(messages)


class LoopClient(_FakeBase):
    def __init__(self, k, delay, **kw):
        super().__init__(**kw)
        self.k, self.delay = k, delay

    async def _respond(self, messages):
        if self.delay:
            await asyncio.sleep(self.delay)
        res = _results(messages)
        prev = int(res[-1].result) if res else 0
        args = B.loop_decision(len(res), prev, self.k)
        return _final("done") if args is None else _calls("add_numbers", [args])


class ParallelClient(_FakeBase):
    async def _respond(self, messages):
        if _results(messages):
            return _final("done")
        return _calls("slow_lookup", B.parallel_args())


class Adapter:
    NAME = "agent_framework"
    PKG = "agent_framework"
    FULL_IMPORT = "from agent_framework import Agent, BaseChatClient, FunctionInvocationLayer, tool"
    NOTES = ("agent.run('go'), no session. Default = OTel instrumentation ON, but only opentelemetry-api "
             "is installed so spans are no-op; --no-trace calls observability.disable_instrumentation().")

    @staticmethod
    def version():
        from importlib.metadata import version
        return version("agent-framework-core")

    @staticmethod
    def disable_tracing():
        from agent_framework.observability import disable_instrumentation
        disable_instrumentation()

    @staticmethod
    def setup_loop(k, delay, async_tool):
        fn = B.make_add_numbers_async() if async_tool else B.add_numbers
        agent = Agent(client=LoopClient(k, delay), instructions="Use tools.", tools=[fn])

        async def run():
            r = await agent.run("go")
            return r.text

        return run

    @staticmethod
    def setup_parallel(n_calls):
        agent = Agent(client=ParallelClient(), instructions="Use tools.", tools=[B.slow_lookup])

        async def run():
            r = await agent.run("go")
            return r.text

        return run

    @staticmethod
    def build_tool_schema(fn):
        return tool(fn).parameters()

    @staticmethod
    def tool_spec(fn):
        return tool(fn).to_json_schema_spec()["function"]


if __name__ == "__main__":
    B.main(Adapter)
