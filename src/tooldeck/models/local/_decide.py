"""The decision to call a tool or answer, taken before a local model writes its turn.

A turn starts with the word ``call`` or ``answer`` (``_prompt``). When the tool choice
leaves both open, the engine decides first and then writes the turn under a grammar of
calls only, or of an answer only. Two measures inform it:

- **fit**: how well the user's last message fits the best-matching tool, as the cosine
  similarity of the model's own embeddings of the two texts (``_embed``);
- **score**: the model's log-odds of calling over answering, read once the prompt is
  processed: ``logit(first token of "call") - logit(first token of "answer")``.

``CallRule`` says how they decide. A turn that answers a user's message calls when the
message fits a tool (fit above ``min_fit``); a turn after tool results, or any turn when
``min_fit`` is None, calls when the model prefers to (score above ``min_score``). A tool
search (``search_tools`` calls and their results) does not answer the message: the turn
after one still does, and reads the fit of the message to the tools other than the search
(those it revealed); the model's score there favours answering, and the 270M model then
answered the user's question with text copied from the prompt's example. For the
default weights (Gemma 3 270M) the score says little about the first turn — across BFCL's
categories it is *higher* where no tool fits — so their rule reads the fit there. Its
threshold was chosen by cross-validation over BFCL folds that span six categories, for the
call decision (a call where one is expected, none where none is: a wrong answer is worse
than a call); bench/README.md, "The call rule, chosen by cross-validation". Above
temperature 0 a score decision is drawn: it calls with probability
``sigmoid((score - min_score) / temperature)``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tooldeck.messages import Message, ToolSpec
from tooldeck.models.base import SEARCH_TOOL


@dataclass(frozen=True, slots=True)
class CallRule:
    """When a local model's turn calls a tool, if the tool choice leaves it free to."""

    min_fit: float | None = None
    """A turn answering a user's message calls when the message fits a tool better than
    this (cosine similarity of the model's embeddings, -1 to 1); None: the score decides."""
    min_score: float = 0.0
    """Other turns call when the model's log-odds of calling over answering is above this
    (0: whichever the model finds likelier)."""


DEFAULT_WEIGHTS_RULE = CallRule(min_fit=0.4412, min_score=0.0)
"""The rule for the default weights (Gemma 3 270M, tooldeck's transcript format): the fit
threshold fitted on all five folds of ``bench/bfcl_results/forced_cv.jsonl``
(``bench/call_rule.py``); the rule shipped before, ``min_fit=0.75``, answered where a call
was expected in most of ``multiple`` and ``live_simple``."""


@dataclass(frozen=True, slots=True)
class BranchTokens:
    """The first token of each of a turn's two shapes, as the model's tokenizer writes them."""

    call: int
    answer: int

    @classmethod
    def of(cls, call: Sequence[int], answer: Sequence[int]) -> BranchTokens | None:
        """From the tokens of the two openings; None if they start alike (nothing to compare)."""
        if not call or not answer or call[0] == answer[0]:
            return None
        return cls(call[0], answer[0])

    def score(self, logits: Any) -> float:
        """The log-odds of calling over answering, from the logits of the next token."""
        return float(logits[self.call]) - float(logits[self.answer])


def decide_to_call(
    rule: CallRule,
    score: float,
    fit: float | None,
    temperature: float,
    draw: Callable[[], float] = random.random,
) -> bool:
    """Whether a turn calls a tool; ``fit`` is None unless the turn answers a user's message
    and the rule reads the fit (see the module docstring)."""
    if rule.min_fit is not None and fit is not None:
        return fit > rule.min_fit
    if temperature <= 0:
        return score > rule.min_score
    margin = (score - rule.min_score) / temperature
    probability = 1 / (1 + math.exp(-margin)) if margin > -700 else 0.0
    return draw() < probability


def answered_message(
    messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> tuple[str, tuple[ToolSpec, ...]] | None:
    """The user's message a turn answers and the tools to fit it against, or None for a
    turn after tool results (of any tool but the search: a search finds tools, it does
    not do the task)."""
    searched = False
    for message in reversed(messages):
        if message.role == "user":
            fitting = [spec for spec in tools if spec.name != SEARCH_TOOL] if searched else tools
            return (message.content, tuple(fitting)) if fitting else None
        if message.role == "assistant":
            if not message.tool_calls or any(c.name != SEARCH_TOOL for c in message.tool_calls):
                return None
            searched = True
        elif message.role != "tool":
            return None
    return None
