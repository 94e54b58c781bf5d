"""Loading a GGUF for LocalModel: the generating context, the embedding context, the format.

llama_cpp is imported here only inside the functions, when a LocalModel loads its weights.

llama.cpp's own log lines (``llama_kv_cache_iswa: ...``, ``... pooling_type ...``, errors of
a decode) go to the Python logger ``tooldeck.models.local.llama_cpp`` at DEBUG, not to
stderr, where they would land in the middle of a program's output (the command line's
display): llama-cpp-python's own callback prints its errors whatever ``verbose`` says. With
``LocalModel(verbose=True)`` they are printed on stderr, as llama.cpp writes them.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldeck.errors import ModelNotConfigured
from tooldeck.models.local._prompt import PromptFormat, TemplateFormat, TranscriptFormat

_LLAMA_LOG = logging.getLogger("tooldeck.models.local.llama_cpp")
_EMBEDDING_CONTEXT = 512
"""Tokens of a text the embedding context reads (a longer message is read from its start)."""


@dataclass(frozen=True, slots=True)
class EngineConfig:
    model_path: Path
    n_ctx: int
    n_threads: int
    chat_format: str
    chat_template: str | None
    verbose: bool


def load_model(config: EngineConfig) -> Any:
    from llama_cpp import Llama

    route_llama_logs(config.verbose)
    try:
        with _quiet_stderr(not config.verbose):
            return Llama(
                model_path=str(config.model_path),
                n_ctx=config.n_ctx,
                n_threads=config.n_threads,
                n_threads_batch=config.n_threads,
                verbose=config.verbose,
            )
    except (ValueError, RuntimeError) as error:
        raise ModelNotConfigured(
            f"cannot load {str(config.model_path)!r} as a GGUF model: {error}"
        ) from error


def load_embedder(config: EngineConfig) -> Any:
    """The same GGUF in a second llama.cpp context that returns mean-pooled embeddings."""
    from llama_cpp import LLAMA_POOLING_TYPE_MEAN, Llama

    route_llama_logs(config.verbose)
    with _quiet_stderr(not config.verbose):
        return Llama(
            model_path=str(config.model_path),
            embedding=True,
            pooling_type=LLAMA_POOLING_TYPE_MEAN,
            n_ctx=_EMBEDDING_CONTEXT,
            n_batch=_EMBEDDING_CONTEXT,
            n_threads=config.n_threads,
            n_threads_batch=config.n_threads,
            verbose=config.verbose,
        )


class _LlamaLogs:
    """The one callback llama.cpp logs through (a process has one), kept alive here."""

    callback: Any = None
    verbose = False


def route_llama_logs(verbose: bool) -> None:
    """Send llama.cpp's log lines to logging (DEBUG), or with ``verbose`` to stderr. The
    latest model loaded decides, as for llama-cpp-python's own ``verbose``."""
    import llama_cpp

    _LlamaLogs.verbose = verbose
    if _LlamaLogs.callback is None:  # after llama_cpp's import, which installs its own
        _LlamaLogs.callback = llama_cpp.llama_log_callback(_llama_log)
        llama_cpp.llama_log_set(_LlamaLogs.callback, ctypes.c_void_p(0))


def _llama_log(level: int, text: bytes, user_data: Any) -> None:
    message = text.decode("utf-8", "replace")
    if _LlamaLogs.verbose:
        sys.stderr.write(message)
        sys.stderr.flush()
    elif message.strip():
        _LLAMA_LOG.debug("%s", message.rstrip("\n"))


@contextmanager
def _quiet_stderr(quiet: bool) -> Iterator[None]:
    """Silence what llama.cpp writes straight to the stderr file descriptor while loading."""
    if not quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def prompt_format(llm: Any, config: EngineConfig) -> PromptFormat:
    template = config.chat_template or llm.metadata.get("tokenizer.chat_template")
    if config.chat_format == "tooldeck" or (config.chat_format == "auto" and not template):
        return TranscriptFormat()
    if not template:
        raise ModelNotConfigured(
            f"chat_format='template' but {config.model_path.name!r} has no chat template; "
            "use chat_format='tooldeck' or 'auto', or pass chat_template="
        )
    bos = llm.detokenize([llm.token_bos()], special=True).decode(errors="replace")
    eos = llm.detokenize([llm.token_eos()], special=True).decode(errors="replace")
    return TemplateFormat(template, bos, eos)
