"""llama.cpp's own log lines stay out of a program's output (the command line's display):
they go to logging at DEBUG, and to stderr only with ``LocalModel(verbose=True)``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tooldeck.models.local._load import EngineConfig, load_model, route_llama_logs
from tooldeck.models.local._weights import default_model_path

LOGGED = "failed to parse grammar"
"""What llama.cpp logs (through its log callback) of a grammar it cannot parse."""


@pytest.fixture(scope="module")
def llm() -> Iterator[Any]:
    config = EngineConfig(default_model_path(), 256, 1, "auto", None, verbose=False)
    loaded = load_model(config)
    yield loaded
    route_llama_logs(verbose=False)
    loaded.close()


def broken_grammar(llm: Any) -> None:
    """Make llama.cpp log an error of its own (after the model loaded)."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, b"root ::= [", b"root")
    if sampler:
        llama_cpp.llama_sampler_free(sampler)


def test_llama_cpp_writes_nothing_on_stderr_and_logs_at_debug(
    llm: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    route_llama_logs(verbose=False)
    caplog.set_level(logging.DEBUG, logger="tooldeck.models.local.llama_cpp")
    broken_grammar(llm)
    # the grammar parser also writes its own error straight to stderr (fprintf, no log)
    assert LOGGED not in capfd.readouterr().err
    logged = [r.getMessage() for r in caplog.records if r.name.endswith("llama_cpp")]
    assert any(LOGGED in message for message in logged), logged


def test_verbose_shows_llama_cpp_lines_on_stderr(
    llm: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    route_llama_logs(verbose=True)
    broken_grammar(llm)
    assert LOGGED in capfd.readouterr().err
