"""A run as OpenTelemetry spans, following the GenAI semantic conventions.

One ``invoke_agent`` span per run; under it a ``chat {model}`` span per model request (the
only spans that carry token usage, so nothing is counted twice) and an ``execute_tool
{name}`` span per call, current while the tool runs so the tool's own spans nest under it;
a call of ``search_tools`` (``tooldeck.search``) has a ``tool_search`` span under its own,
naming the strategy and the tools the search revealed (its query with ``capture_content``);
a provider's own search happens inside a request, so its ``chat`` span names what it revealed.
A round a ``FallbackModel`` answered names the model that did on its ``chat`` span
(``gen_ai.response.model`` and ``gen_ai.provider.name``; ``tooldeck.response.model`` is
its tooldeck name), as the run log's turn does.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from tooldeck.errors import ErrorCode, RunStopped
from tooldeck.messages import AssistantOutput, Message, ToolCall
from tooldeck.models.base import Ask, Model, ModelSettings, StreamItem, answer_of, stream_of
from tooldeck.models.tool_search import revealed_tools
from tooldeck.models.wrapper import WrapperModel
from tooldeck.observe import _content as content
from tooldeck.results import PendingCall, RunResult, ToolTrace
from tooldeck.run.events import HandedOff
from tooldeck.safety import GuardrailDecision
from tooldeck.search import SEARCH_TOOL, Searched, search_watcher

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

_PROVIDERS = {
    "openai": "openai",
    "openai-chat": "openai",
    "azure": "azure.ai.openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "local": "llama_cpp",
}
"""tooldeck's model-string prefixes -> ``gen_ai.provider.name``."""


def model_identity(model: Model) -> tuple[str, str]:
    """(provider, requested model) from a model's name such as ``openai:gpt-4.1-mini``."""
    return _identity(model.name)


def _identity(name: str) -> tuple[str, str]:
    prefix, colon, rest = name.partition(":")
    if not colon:
        return name, name
    return _PROVIDERS.get(prefix, prefix), rest


class RunSpans:
    """The spans of one run: an ``invoke_agent`` span and its children (a RunObserver)."""

    def __init__(
        self,
        tracer: Tracer,
        root: Span,
        model: Model,
        messages: Sequence[Message],
        instructions: str,
        capture_content: bool,
    ) -> None:
        self._tracer = tracer
        self._span = root
        self._capture = capture_content
        self._instructions = instructions
        self._provider, self._model_name = model_identity(model)
        self._context: Context = trace.set_span_in_context(root)
        self._ended = False
        if capture_content:
            root.set_attribute("gen_ai.input.messages", content.input_messages(messages))
            if instructions:
                root.set_attribute(
                    "gen_ai.system_instructions", content.system_instructions(instructions)
                )

    @staticmethod
    def root_span(tracer: Tracer, model: Model, run_id: str) -> Span:
        """The run's ``invoke_agent`` span, started now under the current span."""
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            **_model_attributes(*model_identity(model)),
            "tooldeck.run_id": run_id,
        }
        return tracer.start_span("invoke_agent", kind=SpanKind.INTERNAL, attributes=attributes)

    def model(self, model: Model) -> Model:
        return TracedModel(model, self)

    async def tool_call(
        self, call: ToolCall, execute: Callable[[], Awaitable[ToolTrace | PendingCall]]
    ) -> ToolTrace | PendingCall:
        span = self._tool_span(call)
        search = self._search_span(call, span) if call.name == SEARCH_TOOL else None
        with trace.use_span(span, record_exception=False, set_status_on_exception=False):
            try:
                done = await execute()
            except BaseException as error:  # cancelled while it ran
                _end_failed(span, error)
                raise
            finally:
                if search is not None:
                    search_watcher.reset(search)
        if isinstance(done, PendingCall):  # an agent tool whose inner run paused
            span.add_event("tooldeck.call_pending", {"tooldeck.pending.kind": done.kind})
            span.end()
        else:
            self._end_tool(span, done)
        return done

    def answered(self, trace_: ToolTrace) -> None:
        self._end_tool(self._tool_span(trace_.call), trace_)

    def guardrail(self, decision: GuardrailDecision) -> None:
        attributes: dict[str, Any] = {
            "tooldeck.guardrail.name": decision.name,
            "tooldeck.guardrail.stage": decision.stage,
            "tooldeck.guardrail.verdict": decision.verdict,
            "tooldeck.guardrail.message": decision.message,
            "tooldeck.round": decision.round,
        }
        if decision.call_id:
            attributes["gen_ai.tool.call.id"] = decision.call_id
        self._span.add_event("tooldeck.guardrail", attributes)

    def handed_off(self, handed: HandedOff) -> None:
        """A ``handoff {target}`` span under the run's, at the moment of the handoff; the
        run's span names the agent that has the run (``tooldeck.agent``)."""
        attributes: dict[str, str | int] = {
            "tooldeck.handoff.source": handed.source,
            "tooldeck.handoff.target": handed.target,
            "gen_ai.tool.call.id": handed.call.id,
            "tooldeck.round": handed.round,
        }
        name = f"handoff {handed.target}"
        self._tracer.start_span(name, self._context, SpanKind.INTERNAL, attributes).end()
        self._span.set_attribute("tooldeck.agent", handed.target)

    def finished(self, result: RunResult[Any]) -> None:
        if self._ended:
            return
        self._span.set_attribute("tooldeck.stop_reason", str(result.stop_reason))
        if result.usage.cost_usd is not None:
            self._span.set_attribute("tooldeck.usage.cost_usd", result.usage.cost_usd)
        if result.tainted_by is not None:  # the conversation holds untrusted content
            self._span.set_attribute("tooldeck.untrusted.call_id", result.tainted_by.call_id)
            self._span.set_attribute("tooldeck.untrusted.tool", result.tainted_by.tool_name)
        for pending in result.pending:  # a pause is an event of the run, not an error
            self._span.add_event(
                "tooldeck.call_pending",
                {
                    "gen_ai.tool.name": pending.call.name,
                    "gen_ai.tool.call.id": pending.call.id,
                    "tooldeck.pending.kind": pending.kind,
                    "tooldeck.pending.reason": pending.reason,
                },
            )
        if self._capture and self._span.is_recording():
            self._span.set_attribute(
                "gen_ai.output.messages", content.answer_messages(result.answer)
            )
        self._end(self._span)

    def failed(self, error: BaseException) -> None:
        if self._ended:
            return
        if isinstance(error, Exception):  # not GeneratorExit or CancelledError: closed early
            reason = (
                error.result.stop_reason if isinstance(error, RunStopped) and error.result else None
            )
            _record_error(self._span, error, reason or type(error).__name__)
            if reason:
                self._span.set_attribute("tooldeck.stop_reason", str(reason))
        self._end(self._span)

    def _end(self, span: Span) -> None:
        self._ended = True
        span.end()

    def chat_span(self, messages: Sequence[Message], settings: ModelSettings) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            **_model_attributes(self._provider, self._model_name),
        }
        if settings.temperature is not None:
            attributes["gen_ai.request.temperature"] = settings.temperature
        if settings.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = settings.max_tokens
        span = self._tracer.start_span(
            f"chat {self._model_name}", self._context, SpanKind.CLIENT, attributes
        )
        if self._capture and span.is_recording():
            span.set_attribute("gen_ai.input.messages", content.input_messages(messages))
            if self._instructions:
                span.set_attribute(
                    "gen_ai.system_instructions", content.system_instructions(self._instructions)
                )
        return span

    def end_chat(self, span: Span, output: AssistantOutput) -> None:
        span.set_attribute("gen_ai.response.finish_reasons", (content.finish_reason(output),))
        if output.model is not None:  # a FallbackModel's round: the model that answered
            provider, answered_by = _identity(output.model)
            span.set_attributes(
                {
                    "gen_ai.response.model": answered_by,
                    "gen_ai.provider.name": provider,
                    "gen_ai.system": provider,
                    "tooldeck.response.model": output.model,
                }
            )
        if output.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", output.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", output.usage.output_tokens)
            if output.usage.cost_usd is not None:
                span.set_attribute("tooldeck.usage.cost_usd", output.usage.cost_usd)
        if output.provider_items:  # a provider's own tool search is inside its request
            revealed = revealed_tools(output)
            if revealed:
                span.set_attribute("tooldeck.tool_search.revealed", revealed)
        if self._capture and span.is_recording():
            span.set_attribute("gen_ai.output.messages", content.output_messages(output))
        span.end()

    def _tool_span(self, call: ToolCall) -> Span:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        span = self._tracer.start_span(
            f"execute_tool {call.name}", self._context, SpanKind.INTERNAL, attributes
        )
        if self._capture and span.is_recording():
            arguments = content.arguments(call)
            text = arguments if isinstance(arguments, str) else json.dumps(arguments, default=repr)
            span.set_attribute("gen_ai.tool.call.arguments", text)
        return span

    def _search_span(self, call: ToolCall, tool_span: Span) -> Token[Any]:
        """A ``tool_search`` span under the call's, ended when the search has ranked: its
        strategy, the tools it revealed (``tooldeck.tool_search.revealed``) and, with
        ``capture_content``, its query; the token to reset the search's watcher with."""
        started = time.time_ns()

        def searched(strategy: str, found: Searched) -> None:
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "tool_search",
                "gen_ai.tool.call.id": call.id,
                "tooldeck.tool_search.strategy": strategy,
                "tooldeck.tool_search.revealed": list(found.revealed),
                "tooldeck.tool_search.revealed_count": len(found.revealed),
            }
            if self._capture:
                attributes["tooldeck.tool_search.query"] = found.query
            context = trace.set_span_in_context(tool_span)
            span = self._tracer.start_span(
                "tool_search", context, SpanKind.INTERNAL, attributes, start_time=started
            )
            span.end()

        return search_watcher.set(searched)

    def _end_tool(self, span: Span, done: ToolTrace) -> None:
        result = done.result
        if result.error_code is not None:
            if result.error_code == ErrorCode.TOOL_ERROR and done.error is not None:
                span.record_exception(done.error)
            span.set_attribute("error.type", result.error_code)
            span.set_status(Status(StatusCode.ERROR, result.error_code))
        if self._capture and span.is_recording():
            span.set_attribute("gen_ai.tool.call.result", result.output)
        span.end()


class TracedModel(WrapperModel):
    """A model whose every request is a ``chat`` span, current while the request runs."""

    def __init__(self, model: Model, spans: RunSpans) -> None:
        super().__init__(model)
        self._spans = spans

    async def answer(self, ask: Ask) -> AssistantOutput:
        span = self._spans.chat_span(ask.messages, ask.settings)
        with trace.use_span(span, record_exception=False, set_status_on_exception=False):
            try:
                output = await answer_of(self.wrapped, ask)
            except BaseException as error:
                _end_failed(span, error)
                raise
        self._spans.end_chat(span, output)
        return output

    async def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        span = self._spans.chat_span(ask.messages, ask.settings)
        items = stream_of(self.wrapped, ask)
        ended = False
        try:
            while True:
                with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                    item = await anext(items, None)
                if item is None:
                    break
                if isinstance(item, AssistantOutput):
                    self._spans.end_chat(span, item)
                    ended = True
                yield item
        except BaseException as error:
            if not ended:
                _end_failed(span, error)
                ended = True
            raise
        finally:
            if not ended:  # the model's stream ended without its turn
                span.end()
            await items.aclose()


def _model_attributes(provider: str, model_name: str) -> dict[str, str]:
    return {
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": model_name,
    }


def _end_failed(span: Span, error: BaseException) -> None:
    if isinstance(error, Exception):
        _record_error(span, error, type(error).__name__)
    span.end()


def _record_error(span: Span, error: Exception, error_type: str) -> None:
    span.record_exception(error)
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
