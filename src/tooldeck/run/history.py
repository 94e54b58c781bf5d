"""Long histories: what the model is sent of a conversation that keeps growing.

``Agent(history_strategy=...)`` takes a strategy that runs before each model request and
chooses what to send; the run keeps the whole conversation (``RunResult.messages``) either
way. (The history a run starts from is another thing: ``run(history=messages)``.)

A conversation is a series of *exchanges*: a user message and everything after it up to the
next user message (the model's turns, its tool calls and their results). The *current
exchange* starts at the latest user message, the run's prompt. A strategy only ever drops
whole earlier exchanges from the start of the conversation, so a tool call is never sent
without its result (nor a result without its call), and the current exchange is sent whole.

- ``KeepLastExchanges(n)``: the last ``n`` earlier exchanges and the current one.
- ``TokenBudget(max_tokens)``: as many of the latest earlier exchanges as fit, with the
  current exchange, in ``max_tokens`` (counted by ``Model.count_tokens``: the model's
  tokenizer where it has one, else an estimate). Instructions and tool schemas come on top;
  a current exchange larger than the budget is still sent whole.
- ``Summarize(keep)``: what ``keep`` drops is summarised by the model into one user
  message sent first. The summary is kept in the run (its checkpoint and
  ``RunResult.history_summary``) and in the strategy's memory, and only extended, never
  made again, as the conversation grows; ``Summarize.remember(summary)`` gives it back
  after a restart (what a session store does).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from tooldeck.errors import ModelError
from tooldeck.messages import Message, Usage
from tooldeck.models.base import Model, ModelSettings
from tooldeck.models.resolve import resolve_model
from tooldeck.results import HistorySummary
from tooldeck.run._engine.state import RunState
from tooldeck.run.capabilities import Capability


@dataclass(frozen=True, slots=True)
class HistoryRequest:
    """What a strategy decides on: the whole conversation, before one model request."""

    messages: Sequence[Message]
    current: int
    """Where the current exchange starts: ``messages[current:]`` is always sent."""
    model: Model
    """The agent's model (it counts tokens, and summarises by default)."""
    summary: HistorySummary | None
    """The summary this run made or resumed with, if any."""

    @property
    def exchange_starts(self) -> list[int]:
        """Where each earlier exchange starts, oldest first (the first one at 0)."""
        messages = self.messages
        starts = [0] if self.current > 0 else []
        starts += [i for i in range(1, self.current) if messages[i].role == "user"]
        return starts

    @property
    def turn_starts(self) -> list[int]:
        """Deprecated: ``exchange_starts``."""
        warnings.warn(
            "HistoryRequest.turn_starts is now exchange_starts", DeprecationWarning, stacklevel=2
        )
        return self.exchange_starts


@dataclass(frozen=True, slots=True)
class Prepared:
    """What to send, and what to keep for the next request."""

    messages: Sequence[Message]
    summary: HistorySummary | None = None
    usage: Usage | None = None
    """Tokens spent preparing (a summary request), counted in the run's usage."""


class HistoryStrategy(Capability, ABC):
    """Chooses what of the conversation each model request carries."""

    @abstractmethod
    async def keep_from(self, request: HistoryRequest) -> int:
        """The index of the first message to send: the start of an earlier exchange, or
        ``request.current`` to send the current exchange only."""

    async def prepare(self, request: HistoryRequest) -> Prepared:
        """The messages to send; by default from ``keep_from`` on."""
        cut = await self.keep_from(request)
        return Prepared(request.messages[cut:], request.summary)

    def remember(self, summary: HistorySummary) -> None:
        """Take back a summary stored earlier (only ``Summarize`` keeps any)."""


class KeepLastExchanges(HistoryStrategy):
    """Send the last ``exchanges`` earlier exchanges and the current one.

    Examples:
        >>> from tooldeck import Agent, ScriptedModel
        >>> agent = Agent(ScriptedModel([]), history_strategy=KeepLastExchanges(3))
    """

    def __init__(self, exchanges: int) -> None:
        if isinstance(exchanges, bool) or not isinstance(exchanges, int) or exchanges < 0:
            raise ValueError(
                f"{type(self).__name__} needs a number of exchanges >= 0, got {exchanges!r}"
            )
        self.exchanges = exchanges

    async def keep_from(self, request: HistoryRequest) -> int:
        """The start of the earliest of the last ``exchanges`` earlier exchanges."""
        starts = request.exchange_starts
        if self.exchanges == 0 or not starts:
            return request.current
        return starts[max(0, len(starts) - self.exchanges)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.exchanges})"


class KeepLastTurns(KeepLastExchanges):
    """Deprecated: ``KeepLastExchanges`` (a "turn" is one assistant message)."""

    def __init__(self, turns: int) -> None:
        warnings.warn("KeepLastTurns is now KeepLastExchanges", DeprecationWarning, stacklevel=2)
        super().__init__(turns)

    @property
    def turns(self) -> int:
        """The old name of ``exchanges``."""
        return self.exchanges


class TokenBudget(HistoryStrategy):
    """Send the latest earlier exchanges that fit in ``max_tokens`` with the current one.

    Tokens are counted by the agent's model (``Model.count_tokens``); counts of messages
    already seen are remembered, so a long conversation is not counted again each request.
    """

    def __init__(self, max_tokens: int, *, memory: int = 10_000) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"TokenBudget needs max_tokens >= 1, got {max_tokens!r}")
        self.max_tokens = max_tokens
        self._counts = _CountMemory(memory)

    async def keep_from(self, request: HistoryRequest) -> int:
        """The start of the earliest earlier exchange that still fits the budget."""
        messages, model = request.messages, request.model
        left = self.max_tokens - await self._counts.count(model, messages[request.current :])
        cut = request.current
        for start in reversed(request.exchange_starts):
            size = await self._counts.count(model, messages[start:cut])
            if size > left:
                break
            left -= size
            cut = start
        return cut

    def __repr__(self) -> str:
        return f"TokenBudget({self.max_tokens})"


class _CountMemory:
    """Token counts of messages by identity (each entry keeps its message, so the id holds)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._known: OrderedDict[tuple[int, int], tuple[Message, Model, int]] = OrderedDict()

    async def count(self, model: Model, messages: Sequence[Message]) -> int:
        total = 0
        for message in messages:
            key = (id(model), id(message))
            known = self._known.get(key)
            if known is None:
                known = (message, model, await model.count_tokens((message,)))
                self._known[key] = known
                if len(self._known) > self._size:
                    self._known.popitem(last=False)
            total += known[2]
        return total


SUMMARY_INSTRUCTIONS = (
    "You summarise conversations between a user and an assistant that uses tools, so the "
    "assistant can go on without the full transcript."
)

SUMMARY_PROMPT = (
    "Summarise the conversation below in a few short paragraphs. Keep what the user wants, "
    "names, numbers, decisions, and the tool results that matter. Write the summary only."
)

SUMMARY_HEADING = "Summary of the earlier conversation:"
"""The first line of the message sent in place of the summarised turns."""


class Summarize(HistoryStrategy):
    """Send what ``keep`` keeps, after a summary of the exchanges it drops.

    Args:
        keep: The strategy that chooses the exchanges sent whole (``KeepLastExchanges(n)``
            or ``TokenBudget(...)``); the earlier ones are summarised.
        model: The model that writes summaries (a Model or model string); the agent's by
            default.
        prompt: What the summary request asks for, before the transcript.
        memory: Summaries remembered across runs of this strategy (newest kept).

    The summary request is one extra model call with no tools, counted in the run's usage.
    When ``keep`` drops more exchanges later, the summary is extended with them (the old
    summary and the newly dropped turns are sent), not made again from the start.

    Examples:
        >>> from tooldeck import Agent, ScriptedModel
        >>> strategy = Summarize(KeepLastExchanges(4))
        >>> agent = Agent(ScriptedModel([]), history_strategy=strategy)
    """

    def __init__(
        self,
        keep: HistoryStrategy,
        *,
        model: Model | str | None = None,
        prompt: str = SUMMARY_PROMPT,
        memory: int = 256,
    ) -> None:
        if not isinstance(keep, HistoryStrategy) or isinstance(keep, Summarize):
            raise TypeError(
                "Summarize(keep=...) takes KeepLastExchanges(...) or TokenBudget(...), got "
                f"{keep!r}"
            )
        self.keep = keep
        self.model = resolve_model(model) if model is not None else None
        self.prompt = prompt
        self._memory: OrderedDict[str, HistorySummary] = OrderedDict()
        self._memory_size = memory

    def remember(self, summary: HistorySummary) -> None:
        """Keep ``summary`` for later runs; it applies only to the messages it was made of."""
        self._memory[summary.digest] = summary
        self._memory.move_to_end(summary.digest)
        while len(self._memory) > self._memory_size:
            self._memory.popitem(last=False)

    async def keep_from(self, request: HistoryRequest) -> int:
        """Where the wrapped strategy cuts: what it drops is summarised."""
        return await self.keep.keep_from(request)

    async def prepare(self, request: HistoryRequest) -> Prepared:
        """The summary of what ``keep`` drops (made or extended when needed), then what it keeps."""
        cut = await self.keep.keep_from(request)
        if cut == 0:
            return Prepared(request.messages, request.summary)
        summary, usage = request.summary, None
        if summary is None or summary.covers != cut:
            summary, usage = await self._summary_of(request, cut)
        head = Message.user(f"{SUMMARY_HEADING}\n{summary.text}")
        return Prepared([head, *request.messages[cut:]], summary, usage)

    async def _summary_of(self, request: HistoryRequest, cut: int) -> tuple[HistorySummary, Usage]:
        """The summary of ``messages[:cut]``: remembered, or the model's (extending one)."""
        messages = request.messages
        digests = _prefix_digests(messages, cut)
        found = self._memory.get(digests[cut])
        if found is not None:
            return found, Usage()
        base = request.summary if request.summary and request.summary.covers < cut else None
        if base is None:  # the longest remembered start of this conversation, if any
            base = next(
                (self._memory[d] for d in reversed(digests[:cut]) if d in self._memory), None
            )
        start = base.covers if base is not None else 0
        text, usage = await self._ask(self.model or request.model, base, messages[start:cut])
        summary = HistorySummary(text=text, covers=cut, digest=digests[cut])
        self.remember(summary)
        return summary, usage

    async def _ask(
        self, model: Model, base: HistorySummary | None, dropped: Sequence[Message]
    ) -> tuple[str, Usage]:
        parts = [self.prompt]
        if base is not None:
            parts.append(f"The summary so far:\n{base.text}")
        parts.append("The conversation:\n" + transcript(dropped))
        request = [Message.user("\n\n".join(parts))]
        output = await model.complete(
            request, (), ModelSettings(tool_choice="none"), SUMMARY_INSTRUCTIONS
        )
        text = output.content.strip()
        if not text:
            raise ModelError(
                f"the model ({model.name}) wrote an empty summary of {len(dropped)} messages; "
                "give Summarize(model=...) a model that can summarise"
            )
        usage = output.usage or Usage()
        return text, Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            requests=1,
            cost_usd=usage.cost_usd if output.usage is not None else None,
        )

    def __repr__(self) -> str:
        return f"Summarize({self.keep!r})"


def give_back(strategy: HistoryStrategy | None, summary: HistorySummary | None) -> None:
    """Hand a stored summary (a session's) to ``strategy`` if it summarises, so its runs
    extend the summary (or use it as it is) instead of asking the model for it again."""
    if summary is not None and isinstance(strategy, Summarize):
        strategy.remember(summary)


def transcript(messages: Sequence[Message]) -> str:
    """The messages as plain lines, for a summary request."""
    lines = []
    for message in messages:
        if message.content:
            lines.append(f"{message.role}: {message.content}")
        for call in message.tool_calls:
            lines.append(f"assistant called {call.name}({call.arguments_json})")
    return "\n".join(lines)


def _prefix_digests(messages: Sequence[Message], upto: int) -> list[str]:
    """``digests[k]``: the SHA-256 chain over ``messages[:k]``, for k from 0 to ``upto``."""
    digest = hashlib.sha256(b"tooldeck history v1")
    digests = [digest.hexdigest()]
    for message in messages[:upto]:
        digest = hashlib.sha256(digest.digest() + message.model_dump_json().encode())
        digests.append(digest.hexdigest())
    return digests


def current_exchange(messages: Sequence[Message]) -> int:
    """Where the current exchange starts: the latest user message (0 when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return 0


def current_turn(messages: Sequence[Message]) -> int:
    """Deprecated: ``current_exchange``."""
    warnings.warn("current_turn is now current_exchange", DeprecationWarning, stacklevel=2)
    return current_exchange(messages)


async def prepare_history(
    strategy: HistoryStrategy, state: RunState, model: Model
) -> list[Message]:
    """The messages to send for the run's next request; keeps the run's summary up to date."""
    messages = state.messages
    request = HistoryRequest(messages, current_exchange(messages), model, state.summary)
    prepared = await strategy.prepare(request)
    state.summary = prepared.summary
    if prepared.usage is not None and prepared.usage.requests:
        state.add_usage(prepared.usage)
    return list(prepared.messages)


Seen = Literal["none", "all", "summary", "last_user"]
Sees = Seen | Callable[[Sequence[Message]], Sequence[Message]]
"""What an agent brought into a conversation sees of it — an agent handed the run
(``handoff(agent, sees=...)``), an agent tool's inner run (``agent.as_tool(sees=...)``):
``"none"`` of it, ``"all"`` of it, a ``"summary"`` (one user message listing it, made
without a model: ``summary_of``), the ``"last_user"`` message, or what a function of the
messages returns. (``run(history=...)`` is something else: the conversation a run starts
from.)"""
SEES: tuple[Seen, ...] = ("none", "all", "summary", "last_user")
_CLIP = 300
"""Characters of each message the ``"summary"`` keeps."""


def checked_sees(sees: object, where: str) -> Sees:
    """``sees`` if it is one of ``SEES`` or a function; ValueError naming ``where`` else."""
    if callable(sees) or sees in SEES:
        return sees
    raise ValueError(
        f"{where}: sees must be one of {', '.join(map(repr, SEES))} or a function of the "
        f"messages, got {sees!r}"
    )


def sees_from_history(sees: Sees, history: object, where: str, renamed: dict[str, Seen]) -> Sees:
    """``sees``, or the deprecated ``history=`` it replaced (its old values ``renamed``)."""
    if history is None:
        return sees
    warnings.warn(
        f"{where}(history=...) is now {where}(sees=...): run(history=...) is the conversation "
        "a run starts from",
        DeprecationWarning,
        stacklevel=3,
    )
    old = renamed.get(history, history) if isinstance(history, str) else history
    return checked_sees(old, where)


def seen_messages(sees: Sees, before: Sequence[Message], where: str) -> list[Message] | None:
    """What an agent that ``sees`` so is shown of the messages ``before`` it came in; None
    for all of them."""
    if sees == "all":
        return None
    if sees == "none":
        return []
    if sees == "summary":
        return [Message.user(summary_of(before))]
    if sees == "last_user":
        return [message for message in before if message.role == "user"][-1:]
    chosen = sees(tuple(before))
    if not isinstance(chosen, list | tuple) or not all(isinstance(m, Message) for m in chosen):
        raise TypeError(
            f"{where}: the sees function must return a list of Message, got {type(chosen).__name__}"
        )
    return list(chosen)


def summary_of(messages: Sequence[Message]) -> str:
    """The ``"summary"`` history: one line per message (each clipped to 300 characters),
    made without asking a model, so the same conversation always gives the same text."""
    lines = ["The conversation so far, handed over by another agent:"]
    for message in messages:
        if message.role == "tool":
            lines.append(f"- tool result: {_clip(message.content)}")
            continue
        if message.content:
            lines.append(f"- {message.role}: {_clip(message.content)}")
        for call in message.tool_calls:
            arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
            lines.append(f"- assistant called {call.name}({_clip(arguments)})")
    return "\n".join(lines)


def _clip(text: str) -> str:
    return text if len(text) <= _CLIP else text[: _CLIP - 1] + "…"
