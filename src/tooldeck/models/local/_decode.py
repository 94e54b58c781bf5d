"""Greedy decoding under a grammar, checking the grammar against one token when it can.

llama-cpp-python's sampler applies a grammar to every token of the vocabulary before each
pick: with Gemma's 262k tokens that costs more than the model itself. At temperature 0 the
pick is the best-scoring token the grammar allows, so it is enough to ask the grammar about
the model's favourite first, and to filter the whole vocabulary only when the grammar
refuses it (what llama.cpp's own server does). The tokens chosen are exactly the same.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np

from tooldeck.errors import ModelError

_CANDIDATE = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)


def process_prompt(llm: Any, tokens: Sequence[int]) -> int:
    """Evaluate ``tokens``, reusing the prefix the KV cache already holds; returns how many
    were processed. Afterwards ``next_logits(llm)`` scores the token that follows."""
    reused = _common_prefix(llm.input_ids[: llm.n_tokens], tokens)
    if reused == len(tokens):
        reused -= 1  # the last prompt token must run again to give fresh logits
    llm.n_tokens = reused
    llm.eval(list(tokens[reused:]))  # drops the cache after the prefix, then decodes the rest
    return len(tokens) - reused


def next_logits(llm: Any) -> np.ndarray[Any, Any]:
    """The model's logits for the next token (a view into llama.cpp's buffer)."""
    import llama_cpp

    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llm.model))
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))


def greedy_steps(llm: Any, grammar: str) -> Generator[int, Any, None]:
    """Yield greedy tokens under ``grammar`` forever, from where ``process_prompt`` left off.

    The caller stops iterating at end of generation or budget; each yielded token is
    evaluated before the next is chosen.
    """
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        raise ModelError("llama.cpp refused the turn's grammar")
    try:
        while True:
            token = _pick(sampler, next_logits(llm))
            llama_cpp.llama_sampler_accept(sampler, token)
            yield token
            llm.eval([token])
    finally:
        llama_cpp.llama_sampler_free(sampler)


def finishing_steps(
    llm: Any, grammar: str, written: Sequence[int], closers: Callable[[], Sequence[int]]
) -> Generator[int, Any, None]:
    """Yield tokens that finish what ``written`` (the turn's tokens so far) opened, forever.

    The grammar is brought to where ``written`` left it; at each step the first of
    ``closers()`` (asked anew: inside a string they differ) the grammar allows is taken,
    else the model's best allowed token (greedy at any temperature: this is the end of a
    call the token limit is about to cut, ``_closing``).
    The last token of ``written`` has not been evaluated yet (a step generator evaluates
    each token only when asked for the next).
    """
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        raise ModelError("llama.cpp refused the turn's grammar")
    try:
        for token in written:
            llama_cpp.llama_sampler_accept(sampler, token)
        llm.eval([written[-1]])
        while True:
            logits = next_logits(llm)
            allowed = (t for t in closers() if _allowed(sampler, t, float(logits[t])))
            token = next(allowed, -1)
            token = _pick(sampler, logits) if token < 0 else token
            llama_cpp.llama_sampler_accept(sampler, token)
            yield token
            llm.eval([token])
    finally:
        llama_cpp.llama_sampler_free(sampler)


def _pick(sampler: Any, logits: np.ndarray[Any, Any]) -> int:
    top = int(logits.argmax())
    if _allowed(sampler, top, float(logits[top])):
        return top
    return _best_allowed(sampler, logits)


def _allowed(sampler: Any, token: int, logit: float) -> bool:
    import llama_cpp

    data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, logit, 0.0))
    array = llama_cpp.llama_token_data_array(
        data=ctypes.cast(data, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
    )
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
    return not math.isinf(data[0].logit)


def _best_allowed(sampler: Any, logits: np.ndarray[Any, Any]) -> int:
    import llama_cpp

    candidates = np.empty(logits.shape[0], dtype=_CANDIDATE)
    candidates["id"] = np.arange(logits.shape[0], dtype=np.intc)
    candidates["logit"] = logits
    candidates["p"] = 0.0
    array = llama_cpp.llama_token_data_array(
        data=candidates.ctypes.data_as(llama_cpp.llama_token_data_p),
        size=logits.shape[0],
        selected=-1,
        sorted=False,
    )
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
    scores = candidates["logit"][: array.size]
    best = int(scores.argmax())
    if math.isinf(float(scores[best])):
        raise ModelError("the grammar allows no token here (a dead end in the turn's grammar)")
    return int(candidates["id"][best])


def _common_prefix(cached: Any, tokens: Sequence[int]) -> int:
    size = min(len(cached), len(tokens))
    if size == 0:
        return 0
    differ = np.nonzero(np.asarray(cached[:size]) != np.asarray(tokens[:size]))[0]
    return int(differ[0]) if differ.size else size
