"""Fixtures shared by the OpenAI adapter tests (a loopback server; JSON or SSE replies)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _openai_server import FakeOpenAI, running


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with running() as fake:
        yield fake


@pytest.fixture(params=[False, True], ids=["json", "sse"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)
