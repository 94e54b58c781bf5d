"""The llama.cpp side of LocalModel: prompt tokens with KV-cache reuse, the decision to call,
decoding under the turn's grammar.

This module and the ``_*`` modules it uses touch llama_cpp only inside functions;
they are imported when a LocalModel loads its weights.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tooldeck.errors import ModelError
from tooldeck.messages import AssistantOutput, Message, ToolCall, ToolSpec, Usage
from tooldeck.models.local._closing import (
    STRING_CLOSERS,
    VALUE_CLOSERS,
    Reserve,
    in_call,
    in_string,
    line_closed,
    looping,
    reserve,
)
from tooldeck.models.local._decide import (
    BranchTokens,
    CallRule,
    answered_message,
    decide_to_call,
)
from tooldeck.models.local._decode import (
    finishing_steps,
    greedy_steps,
    next_logits,
    process_prompt,
)
from tooldeck.models.local._embed import Embedder
from tooldeck.models.local._grammar import ANSWER_PREFIX, CALL_PREFIX, TurnPlan, build_grammar
from tooldeck.models.local._load import EngineConfig, load_embedder, load_model, prompt_format
from tooldeck.models.local._prompt import (
    parse_turn,
)

_RAW_MEMORY = 256
"""How many of its own outputs a session remembers verbatim (to re-render them exactly)."""


@dataclass(frozen=True, slots=True)
class TurnStats:
    """Where the time of one local turn went."""

    prompt_tokens: int
    """Tokens in the whole prompt."""
    evaluated_tokens: int
    """Prompt tokens actually processed; the rest came from the KV cache of earlier rounds."""
    prompt_s: float
    """Seconds until the first generated token: prompt processing (and the first sample)."""
    output_tokens: int
    generation_s: float
    """Seconds spent generating after the first token."""
    call_score: float | None = None
    """The model's log-odds of calling a tool over answering, read before the turn was
    written (``_decide``); None when the turn had no tools to call."""
    fit: float | None = None
    """How well the user's message fits the best-matching tool (cosine similarity of the
    model's embeddings); None unless the turn answers a user's message with tools and the
    model's ``CallRule`` reads the fit."""

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens reused from the KV cache."""
        return self.prompt_tokens - self.evaluated_tokens

    @property
    def seconds(self) -> float:
        return self.prompt_s + self.generation_s

    @property
    def tokens_per_s(self) -> float:
        """Generation speed: tokens after the first, per second."""
        if self.generation_s <= 0 or self.output_tokens < 2:
            return 0.0
        return (self.output_tokens - 1) / self.generation_s


@dataclass(frozen=True, slots=True)
class TurnRequest:
    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    instructions: str
    plan: TurnPlan
    temperature: float
    max_tokens: int
    call_rule: CallRule
    """When the turn calls a tool, if the tool choice leaves it open."""
    stop: threading.Event
    """Set to end decoding at the next token (the request was cancelled)."""
    on_piece: Callable[[bytes], None] | None = None
    """Called (in the decoding thread) with each token's bytes as it is picked (after the
    turn's lead, which the grammar writes before ``call``/``answer``)."""


@dataclass(frozen=True, slots=True)
class _Budget:
    """The tokens a turn may write, and how many of them its last call keeps for closing."""

    tokens: int
    reserve: Reserve
    """Tokens left at which an open call is finished (``_closing.reserve``)."""


@dataclass(slots=True)
class _Generated:
    text: str
    tokens: list[int]
    """The tokens behind ``text``; empty when they are not known exactly."""
    first_s: float
    """Seconds until the first token was picked."""
    generation_s: float
    count: int


class LlamaSession:
    """One loaded model, its prompt format, and what its KV cache holds."""

    def __init__(self, config: EngineConfig) -> None:
        started = time.perf_counter()
        self.llm = load_model(config)
        self.load_s = time.perf_counter() - started
        self.n_ctx = config.n_ctx
        self.format = prompt_format(self.llm, config)
        self._special = self.format.special_tokens
        lead = self.format.syntax.lead
        self._branches = BranchTokens.of(
            self._continuation("\n", lead + CALL_PREFIX.strip()),
            self._continuation("\n", lead + ANSWER_PREFIX.strip()),
        )
        self._embedder = Embedder(lambda: load_embedder(config))
        self._closers = (self._single_tokens(VALUE_CLOSERS), self._single_tokens(STRING_CLOSERS))
        self._cache_text = ""
        self._cache_tokens: list[int] = []
        self._raw: OrderedDict[str, str] = OrderedDict()
        self._grammars: dict[str, tuple[str, Reserve]] = {}
        self._frame_tokens: int | None = None

    def close(self) -> None:
        self._embedder.close()
        self.llm.close()

    def turn(self, request: TurnRequest) -> tuple[AssistantOutput, TurnStats]:
        """Render, decode under the turn's grammar, and parse one assistant turn."""
        text = self.format.render(
            request.messages, request.tools, request.instructions, self._raw_text
        )
        tokens = self._tokens_for(text)
        room = self.n_ctx - len(tokens)
        if room < 8:
            raise ModelError(
                f"the conversation is {len(tokens)} tokens and the context holds {self.n_ctx}; "
                "start a new conversation or create the LocalModel with a larger n_ctx"
            )
        started = time.perf_counter()
        evaluated = process_prompt(self.llm, tokens)
        score = self._call_score(request.plan)
        asked = self._asked(request)
        fit = self._embedder.fit(*asked) if asked is not None else None
        plan = _decided(request, score, fit, asked[1] if asked is not None else None)
        grammar, reserved = self._grammar(plan)
        processed_s = time.perf_counter() - started
        budget = _Budget(min(request.max_tokens, room), reserved)
        out = self._generate(tokens, grammar, request, budget)
        first = 1 + sum(len(m.tool_calls) for m in request.messages if m.role == "assistant")
        said = out.text.removesuffix(self.format.syntax.end_of_calls or "\0")
        content, calls = parse_turn(said.removeprefix(self.format.syntax.lead), first)
        self._remember(content, calls, said)
        self._cache_text = text + out.text if out.tokens else text
        self._cache_tokens = tokens + out.tokens
        usage = Usage(input_tokens=len(tokens), output_tokens=out.count, requests=1, cost_usd=0.0)
        prompt_s = processed_s + out.first_s
        stats = TurnStats(len(tokens), evaluated, prompt_s, out.count, out.generation_s, score, fit)
        return AssistantOutput(content=content, tool_calls=calls, usage=usage), stats

    def _call_score(self, plan: TurnPlan) -> float | None:
        """The model's log-odds of calling over answering, from the processed prompt."""
        if self._branches is None or not plan.tools:
            return None
        return self._branches.score(next_logits(self.llm))

    def _asked(self, request: TurnRequest) -> tuple[str, tuple[ToolSpec, ...]] | None:
        """The user's message the turn answers and the tools to fit it against, when the
        rule reads the fit (``answered_message``)."""
        if request.call_rule.min_fit is None or not request.plan.tools:
            return None
        return answered_message(request.messages, request.plan.tools)

    def _closers_after(self, pieces: bytearray) -> Callable[[], tuple[int, ...]]:
        """The closing tokens to prefer after the turn's bytes so far (which grow)."""
        return lambda: self._closers[in_string(pieces.decode(errors="replace"))]

    def _single_tokens(self, texts: Sequence[str]) -> tuple[int, ...]:
        """The tokens of those ``texts`` that are one token each, in order."""
        tokenized = (self._tokenize(text, add_bos=False) for text in texts)
        return tuple(tokens[0] for tokens in tokenized if len(tokens) == 1)

    def _continuation(self, context: str, text: str) -> list[int]:
        """The tokens of ``text`` where it follows ``context`` in a prompt."""
        before = self._tokenize(context, add_bos=False)
        after = self._tokenize(context + text, add_bos=False)
        return after[len(before) :] if after[: len(before)] == before else []

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of ``messages`` in the prompt, less the frame an empty conversation has."""
        if self._frame_tokens is None:
            self._frame_tokens = len(self._prompt_tokens(()))
        return max(0, len(self._prompt_tokens(messages)) - self._frame_tokens)

    def _prompt_tokens(self, messages: Sequence[Message]) -> list[int]:
        return self._tokenize(self.format.render(messages, (), "", self._raw_text), add_bos=False)

    def _tokens_for(self, text: str) -> list[int]:
        """Prompt tokens; when ``text`` extends the last turn, its tokens extend that turn's."""
        if self._cache_tokens and text.startswith(self._cache_text):
            rest = text[len(self._cache_text) :]
            return self._cache_tokens + self._tokenize(rest, add_bos=False)
        bos = self.llm.detokenize([self.llm.token_bos()], special=True).decode(errors="replace")
        return self._tokenize(text, add_bos=not (self._special and text.startswith(bos)))

    def _tokenize(self, text: str, add_bos: bool) -> list[int]:
        if not text:
            return []
        return list(self.llm.tokenize(text.encode(), add_bos=add_bos, special=self._special))

    def _grammar(self, plan: TurnPlan) -> tuple[str, Reserve]:
        """The turn's grammar and the tokens it keeps for closing a call (both cached)."""
        key = json.dumps(
            [plan.allow_answer, plan.max_calls, [spec.model_dump() for spec in plan.tools]]
        )
        if key not in self._grammars:
            built = build_grammar(plan, self.format.syntax, is_valid=self._parses)
            self._grammars[key] = (built.text, reserve(plan.tools))
        return self._grammars[key]

    def _parses(self, grammar: str) -> bool:
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        log = logging.getLogger("llama-cpp-python")
        level = log.level
        log.setLevel(logging.CRITICAL)  # a refused grammar is expected here, not an error
        try:
            sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        finally:
            log.setLevel(level)
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    def _generate(
        self, tokens: list[int], grammar: str, request: TurnRequest, budget: _Budget
    ) -> _Generated:
        """Decode the turn token by token (the prompt is processed): the one generation loop.

        When only the budget's reserve is left inside a call, or the call repeats itself,
        the call is finished (``_closing``); a budget that cannot hold a call at all is a
        ModelError.
        """
        import llama_cpp

        llm = self.llm
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        started = time.perf_counter()
        first_at: float | None = None
        produced: list[int] = []
        ends: list[int] = []
        pieces = bytearray()
        lead = self.format.syntax.lead
        lead_bytes = lead.encode()  # the grammar writes it; streamed pieces start after it
        end = self.format.syntax.end_of_calls
        steps = _closing(self._steps(tokens, grammar, request.temperature))
        finishing = False
        while (token := next(steps, None)) is not None:
            first_at = first_at or time.perf_counter()
            if llama_cpp.llama_vocab_is_eog(vocab, token) or request.stop.is_set():
                break
            piece = llm.detokenize([token], special=self._special)
            produced.append(token)
            pieces += piece
            ends.append(len(pieces))
            if request.on_piece is not None and len(pieces) > len(lead_bytes):
                request.on_piece(bytes(pieces[max(len(lead_bytes), len(pieces) - len(piece)) :]))
            if len(produced) >= budget.tokens or (b"\n" in piece and _repeated_call(pieces, lead)):
                break
            left = budget.tokens - len(produced)
            if finishing or left <= budget.reserve.most or looping(produced):
                said = pieces.decode(errors="replace")[len(lead) :]
                if not in_call(said):
                    continue
                if line_closed(said, end):
                    break  # the call closed; no room is left for another one
                needed = budget.reserve.needed(said)
                if not finishing and (looping(produced) or (needed is not None and left <= needed)):
                    steps.close()

                    closers = self._closers_after(pieces)
                    steps = _closing(finishing_steps(llm, grammar, produced, closers))
                    finishing = True
        ended = time.perf_counter()
        first_at = first_at or ended
        text = pieces.decode(errors="replace")
        said = text[len(lead) :]
        if not request.stop.is_set() and in_call(said) and not line_closed(said.rstrip("\n"), end):
            raise ModelError(
                f"the turn's {budget.tokens} tokens cannot hold a whole call of these tools "
                f"(the shortest takes up to {budget.reserve.most}; it had written {said!r}); "
                "raise max_tokens (or n_ctx)"
            )
        kept = lead + _without_repeat(text[len(lead) :]) if text.startswith(lead) else text
        if kept != text:  # keep the tokens only if the cut falls between two of them
            size = len(kept.encode())
            produced = produced[: ends.index(size) + 1] if size in ends else []
        return _Generated(kept, produced, first_at - started, ended - first_at, len(ends))

    def _steps(
        self, tokens: list[int], grammar: str, temperature: float
    ) -> Generator[int, Any, None]:
        """The tokens the model picks under ``grammar``, one at a time, without end."""
        if temperature == 0:
            return greedy_steps(self.llm, grammar)
        from llama_cpp.llama_grammar import LlamaGrammar

        steps: Generator[int, Any, None] = self.llm.generate(
            tokens,
            temp=temperature,
            repeat_penalty=1.0,
            grammar=LlamaGrammar.from_string(grammar, verbose=False),
        )
        return steps

    def _raw_text(self, message: Message) -> str | None:
        return self._raw.get(_output_key(message.content, message.tool_calls))

    def _remember(self, content: str, calls: tuple[ToolCall, ...], text: str) -> None:
        key = _output_key(content, calls)
        self._raw[key] = text
        self._raw.move_to_end(key)
        while len(self._raw) > _RAW_MEMORY:
            self._raw.popitem(last=False)


def _decided(
    request: TurnRequest,
    score: float | None,
    fit: float | None,
    fitted: tuple[ToolSpec, ...] | None = None,
) -> TurnPlan:
    """The request's plan, narrowed to calls or to an answer when the plan left both open;
    a call decided by the fit calls one of the ``fitted`` tools (after a search: one it
    found, not the search again, which the small model repeats)."""
    plan = request.plan
    if score is None or not (plan.allow_answer and plan.tools):
        return plan
    if decide_to_call(request.call_rule, score, fit, request.temperature):
        calls = plan.only_calls()
        return replace(calls, tools=fitted) if fit is not None and fitted else calls
    return plan.only_answer()


def _closing(steps: Generator[int, Any, None]) -> Generator[int, None, None]:
    """Iterate ``steps`` and close the generator however the loop ends (frees its sampler)."""
    try:
        yield from steps
    finally:
        steps.close()


def _repeated_call(pieces: bytearray, lead: str) -> bool:
    """Whether the line just finished repeats a call made earlier in this turn."""
    if not pieces.startswith((lead + CALL_PREFIX).encode()):
        return False
    lines = pieces.decode(errors="replace").removeprefix(lead).split("\n")
    return len(lines) >= 3 and lines[-2].startswith(CALL_PREFIX) and lines[-2] in lines[:-2]


def _without_repeat(text: str) -> str:
    """``text`` up to the first call that repeats an earlier one (small models loop)."""
    if not text.startswith(CALL_PREFIX):
        return text
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.startswith(CALL_PREFIX) and line in lines[:index]:
            return "\n".join(lines[:index])
    return text


def _output_key(content: str, calls: Sequence[ToolCall]) -> str:
    return json.dumps([content, [[c.id, c.name, c.arguments_json] for c in calls]])
