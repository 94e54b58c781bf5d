"""tooldeck overhead benchmark: the five shared workloads (bench/anchors/benchlib.py).

Run:  .venv/bin/python bench/bench_tooldeck.py [--only W1,W1a,W2,W3,W4,W5]
Fake model: a `tooldeck.Model` whose `complete()` follows benchlib's policy and returns the
arguments as JSON text parsed by `ToolCall.from_json`, exactly as a provider adapter does.
It reads only the newest messages, so its own cost does not grow with the conversation.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "anchors"))
import benchlib as B

from tooldeck import (
    Agent,
    AssistantOutput,
    Limits,
    Message,
    Model,
    ModelSettings,
    ToolCall,
    ToolSpec,
    tool,
)

if TYPE_CHECKING:  # the benchmark without a log must not load sqlite3
    from tooldeck.runlog import RunLog

DONE = AssistantOutput(content="done")


class LoopModel(Model):
    """W1/W5 policy: add_numbers(left=<previous result>, right=1) k times, then "done"."""

    def __init__(self, k: int, delay: float) -> None:
        self.k, self.delay = k, delay

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        if self.delay:
            await asyncio.sleep(self.delay)
        results = (len(messages) - 1) // 2  # user, then (assistant, tool) per round
        previous = int(messages[-1].content) if results else 0
        arguments = B.loop_decision(results, previous, self.k)
        if arguments is None:
            return DONE
        call = ToolCall.from_json(B.next_call_id(), "add_numbers", arguments)
        return AssistantOutput(tool_calls=(call,))


class ParallelModel(Model):
    """W2 policy: eight slow_lookup calls in one turn, then "done"."""

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        if messages[-1].role == "tool":
            return DONE
        calls = tuple(
            ToolCall.from_json(B.next_call_id(), "slow_lookup", text) for text in B.parallel_args()
        )
        return AssistantOutput(tool_calls=calls)


def make_runner(agent: Agent[Any]) -> Callable[[], Any]:
    async def run() -> str:
        return (await agent.run("go")).answer

    return run


class Adapter:
    NAME = "tooldeck"
    PKG = "tooldeck"
    FULL_IMPORT = "from tooldeck import Agent, AssistantOutput, Model, ToolCall, tool"
    NOTES = "agent.run('go'); sync tools in the shared worker-thread pool (the default)."
    INLINE = False
    RUN_LOG: RunLog | None = None
    """Record the loop workloads' runs in this run log (bench/runlog_w5.py sets it)."""

    @staticmethod
    def version() -> str:
        from importlib.metadata import version

        return version("tooldeck")

    @staticmethod
    def disable_tracing() -> None:
        pass  # tooldeck has no tracing to turn off

    @classmethod
    def setup_loop(cls, k: int, delay: float, async_tool: bool) -> Callable[[], Any]:
        fn = B.make_add_numbers_async() if async_tool else B.add_numbers
        add = tool(fn, inline=True) if cls.INLINE and not async_tool else tool(fn)
        limits = Limits(max_rounds=k + 1)
        agent = Agent(
            LoopModel(k, delay),
            [add],
            instructions="Use tools.",
            limits=limits,
            run_log=cls.RUN_LOG,
        )
        return make_runner(agent)

    @staticmethod
    def setup_parallel(n_calls: int) -> Callable[[], Any]:
        agent = Agent(ParallelModel(), [B.slow_lookup], instructions="Use tools.")
        return make_runner(agent)

    @staticmethod
    def build_tool_schema(fn: Callable[..., Any]) -> dict[str, Any]:
        return tool(fn).spec.parameters

    @staticmethod
    def tool_spec(fn: Callable[..., Any]) -> dict[str, Any]:
        spec = tool(fn).spec
        return {
            "name": spec.name,
            "description": spec.description,
            "strict": spec.strict,
            "parameters": spec.parameters,
        }


if __name__ == "__main__":
    B.main(Adapter)
