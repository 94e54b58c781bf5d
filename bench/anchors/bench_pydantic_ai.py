"""Pydantic AI (`pydantic-ai-slim`, import `pydantic_ai`) overhead benchmark.

Run:  $BENCH_VENVS/pydantic_ai/bin/python bench_pydantic_ai.py
Fake model: the library's own `FunctionModel` with an *async* function (a sync one would be
run in a worker thread) that returns `ModelResponse` with an explicit `RequestUsage` (without
it FunctionModel estimates tokens over the whole history every turn - a fake-model cost).
"""

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

_USAGE = {"input_tokens": 10, "output_tokens": 10}


def _returns(messages):
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, ToolReturnPart)]


def make_loop_fn(k: int, delay: float):
    async def loop_model(messages, info: AgentInfo) -> ModelResponse:
        if delay:
            await asyncio.sleep(delay)
        rets = _returns(messages)
        prev = int(rets[-1].content) if rets else 0
        args = B.loop_decision(len(rets), prev, k)
        part = TextPart("done") if args is None else ToolCallPart(
            "add_numbers", args, tool_call_id=B.next_call_id())
        return ModelResponse(parts=[part], usage=RequestUsage(**_USAGE))

    return loop_model


async def parallel_model(messages, info: AgentInfo) -> ModelResponse:
    if _returns(messages):
        parts = [TextPart("done")]
    else:
        parts = [ToolCallPart("slow_lookup", a, tool_call_id=B.next_call_id()) for a in B.parallel_args()]
    return ModelResponse(parts=parts, usage=RequestUsage(**_USAGE))


class Adapter:
    NAME = "pydantic_ai"
    PKG = "pydantic_ai"
    FULL_IMPORT = "from pydantic_ai import Agent, Tool; from pydantic_ai.models.function import FunctionModel"
    NOTES = ("agent.run('go'); FunctionModel(async fn). Instrumentation is OFF by default "
             "(--no-trace is a no-op).")

    @staticmethod
    def version():
        from importlib.metadata import version
        return version("pydantic-ai-slim")

    @staticmethod
    def disable_tracing():
        pass  # nothing enabled by default

    @staticmethod
    def setup_loop(k, delay, async_tool):
        fn = B.make_add_numbers_async() if async_tool else B.add_numbers
        agent = Agent(FunctionModel(make_loop_fn(k, delay)), instructions="Use tools.", tools=[fn])

        async def run():
            r = await agent.run("go")
            return r.output

        return run

    @staticmethod
    def setup_parallel(n_calls):
        agent = Agent(FunctionModel(parallel_model), instructions="Use tools.", tools=[B.slow_lookup])

        async def run():
            r = await agent.run("go")
            return r.output

        return run

    @staticmethod
    def build_tool_schema(fn):
        return Tool(fn).tool_def.parameters_json_schema

    @staticmethod
    def tool_spec(fn):
        td = Tool(fn).tool_def
        return {"name": td.name, "description": td.description, "strict": td.strict,
                "parameters": td.parameters_json_schema}


if __name__ == "__main__":
    B.main(Adapter)
