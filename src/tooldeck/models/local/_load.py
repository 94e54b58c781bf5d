"""Loading a GGUF for LocalModel: the generating context, the embedding context, the format.

llama_cpp is imported here only inside the functions, when a LocalModel loads its weights.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldeck.errors import ModelNotConfigured
from tooldeck.models.local._prompt import PromptFormat, TemplateFormat, TranscriptFormat

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
