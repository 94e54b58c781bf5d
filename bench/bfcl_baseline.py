"""The baseline of bfcl_eval.py: llama-cpp-python's own tool calling, without tooldeck.

The same GGUF through ``Llama(chat_format="chatml-function-calling")``,
``create_chat_completion(tools=..., tool_choice="auto")``, scored by the same rules
(``tooldeck.eval.judge``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tooldeck.eval import CaseResult, EvalCase
from tooldeck.eval.judge import expected_shown, judge_first_turn
from tooldeck.tools.function import FunctionTool


class LlamaCppBaseline:
    """The GGUF through ``Llama(chat_format="chatml-function-calling")``, no tooldeck."""

    def __init__(self, gguf: Path, n_ctx: int, n_threads: int | None, max_tokens: int) -> None:
        self.llm = _bounded_llama(max_tokens)(
            model_path=str(gguf),
            chat_format="chatml-function-calling",
            n_ctx=n_ctx,
            n_threads=n_threads or os.cpu_count(),
            seed=0,
            verbose=False,
        )

    def run(self, case: EvalCase, max_tokens: int | None) -> CaseResult:
        # The handler lists the tools inside the system message: without one the model
        # would never see them, so there always is one.
        messages = [{"role": "system", "content": case.instructions}]
        messages += [{"role": m.role, "content": m.content} for m in case.messages]
        started = time.perf_counter()
        error = text = ""
        made: list[tuple[str, Any]] = []
        try:
            response: Any = self.llm.create_chat_completion(
                messages=messages,
                tools=[_tool_param(entry.handler) for entry in case.tools],
                tool_choice="auto",
                temperature=0.0,
                max_tokens=max_tokens,
            )
            message = response["choices"][0]["message"]
            made = [_parsed(c["function"]) for c in message.get("tool_calls") or ()]
            text = message.get("content") or ""
        except Exception as failed:  # a context overflow or a handler failure: that case fails
            error = f"{type(failed).__name__}: {failed}"
        seconds = time.perf_counter() - started
        judged = judge_first_turn(case, made, error)
        return CaseResult(
            model="llama-cpp",
            suite=case.suite,
            id=case.id,
            category=case.category,
            correct=judged.correct,
            reason=judged.reason,
            expected_call=case.expects_call,
            made_call=bool(made),
            calls=len(made),
            valid_calls=judged.valid_calls,
            seconds=seconds,
            strict=judged.strict,
            expected=expected_shown(case),
            made=judged.made,
            text=text,
            error=error,
        )


def _tool_param(tool: Any) -> dict[str, Any]:
    """The OpenAI tool definition of a BFCL case's tool (its converted, non-strict schema)."""
    assert isinstance(tool, FunctionTool)
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.arguments.json_schema,
        },
    }


MAX_BASELINE_CALLS = 8
"""Calls the baseline may make in one turn (tooldeck's local model allows at most 8, too)."""


def _bounded_llama(max_tokens: int) -> Any:
    """``Llama`` with bounds on what llama-cpp-python's handler generates in one turn.

    The handler generates each call and each message with ``max_tokens=None`` (up to the
    context size) whatever the request says, and after each call lets the model choose
    another one without limit; a small model repeating itself runs for many minutes. Here
    each generation stops at ``max_tokens`` and the turn after MAX_BASELINE_CALLS calls.
    """
    from llama_cpp import Llama

    class BoundedLlama(Llama):
        calls_left = MAX_BASELINE_CALLS

        def create_chat_completion(self, *args: Any, **kwargs: Any) -> Any:
            self.calls_left = MAX_BASELINE_CALLS
            return super().create_chat_completion(*args, **kwargs)

        def create_completion(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("max_tokens") is None:
                kwargs["max_tokens"] = max_tokens
            grammar = getattr(kwargs.get("grammar"), "_grammar", "")
            if '"<|im_end|>"' in grammar:  # "another call, or the end of the turn?"
                self.calls_left -= 1
                if self.calls_left <= 0:
                    return {"choices": [{"text": "<|im_end|>"}]}
            return super().create_completion(*args, **kwargs)

    return BoundedLlama


def _parsed(function: dict[str, Any]) -> tuple[str, Any]:
    try:
        return function["name"], json.loads(function["arguments"])
    except ValueError:
        return function["name"], function["arguments"]
