"""OpenAI Agents SDK (`openai-agents`, import `agents`) overhead benchmark.

Run:  $BENCH_VENVS/openai_agents/bin/python bench_openai_agents.py [--no-trace]
Fake model: a minimal `agents.models.interface.Model` subclass whose get_response() builds
Responses-API output items (ResponseFunctionToolCall / ResponseOutputMessage) directly.
"""

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B
from agents import Agent, ModelResponse, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


def _final(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_final", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])],
    )


def _call(name: str, args_json: str) -> ResponseFunctionToolCall:
    cid = B.next_call_id()
    return ResponseFunctionToolCall(id=cid, call_id=cid, type="function_call", name=name, arguments=args_json)


def _tool_outputs(inp):
    if isinstance(inp, str):
        return []
    return [it for it in inp if isinstance(it, dict) and it.get("type") == "function_call_output"]


class LoopModel(Model):
    """W1/W5: one add_numbers call per turn until K results are in the input, then 'done'."""

    def __init__(self, k: int, delay: float):
        self.k, self.delay = k, delay

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None, **kw):
        if self.delay:
            await asyncio.sleep(self.delay)
        outs = _tool_outputs(input)
        prev = int(outs[-1]["output"]) if outs else 0
        args = B.loop_decision(len(outs), prev, self.k)
        item = _final("done") if args is None else _call("add_numbers", args)
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *a, **k):
        raise NotImplementedError


class ParallelModel(Model):
    """W2: first turn -> 8 slow_lookup calls at once, second turn -> 'done'."""

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None, **kw):
        if _tool_outputs(input):
            out = [_final("done")]
        else:
            out = [_call("slow_lookup", a) for a in B.parallel_args()]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *a, **k):
        raise NotImplementedError


class Adapter:
    NAME = "openai_agents"
    PKG = "agents"
    FULL_IMPORT = "from agents import Agent, Runner, function_tool"
    NOTES = ("Runner.run(agent, 'go', max_turns=20) (default max_turns=10 is too small for W1). "
             "Default = SDK tracing ON (spans built + queued to BatchTraceProcessor; export skipped, no API key).")

    @staticmethod
    def version():
        from importlib.metadata import version
        return version("openai-agents")

    @staticmethod
    def disable_tracing():
        from agents import set_tracing_disabled
        set_tracing_disabled(True)

    @staticmethod
    def setup_loop(k, delay, async_tool):
        fn = B.make_add_numbers_async() if async_tool else B.add_numbers
        agent = Agent(name="bench", instructions="Use tools.", model=LoopModel(k, delay),
                      tools=[function_tool(fn)])

        async def run():
            r = await Runner.run(agent, "go", max_turns=k + 10)
            return r.final_output

        return run

    @staticmethod
    def setup_parallel(n_calls):
        agent = Agent(name="bench", instructions="Use tools.", model=ParallelModel(),
                      tools=[function_tool(B.slow_lookup)])

        async def run():
            r = await Runner.run(agent, "go", max_turns=10)
            return r.final_output

        return run

    @staticmethod
    def build_tool_schema(fn):
        return function_tool(fn).params_json_schema

    @staticmethod
    def tool_spec(fn):
        t = function_tool(fn)
        return {"name": t.name, "description": t.description, "strict": t.strict_json_schema,
                "parameters": t.params_json_schema}


if __name__ == "__main__":
    B.main(Adapter)
