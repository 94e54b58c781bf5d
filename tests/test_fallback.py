"""FallbackModel and RetryPolicy: the next model, or the same again, takes a failed request
only when nothing of it reached the caller; the answer says which model wrote it."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

import pytest

from _openai_server import FakeOpenAI, Reply, completion_body, error_reply
from helpers import answer
from tooldeck import Agent, AssistantOutput, ScriptedModel, TextDelta
from tooldeck.errors import ModelBadRequest, ModelError, ModelRateLimited, ModelUnavailable
from tooldeck.messages import Message, ToolSpec
from tooldeck.models import FallbackModel, Model, ModelSettings, RetryingModel, RetryPolicy
from tooldeck.models.base import StreamItem, TextChunk
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.runlog import RunLog


class Failing(Model):
    """Fails each request with ``errors`` in turn, then answers ``text``; its stream yields
    ``chunks`` first (then fails or answers)."""

    def __init__(
        self, name: str, errors: Sequence[ModelError] = (), text: str = "", chunks: int = 0
    ) -> None:
        self.name = name
        self.errors = list(errors)
        self.text = text
        self.chunks = chunks
        self.asked = 0

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        self.asked += 1
        if self.errors:
            raise self.errors.pop(0)
        return AssistantOutput(content=self.text)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AsyncGenerator[StreamItem, None]:
        for n in range(self.chunks):
            yield TextChunk(f"part {n} ")
        yield await self.complete(messages, tools, settings, instructions)


def down() -> ModelUnavailable:
    return ModelUnavailable("the provider answered HTTP 503", 503)


def test_the_next_model_answers_when_the_first_is_down_and_the_log_says_which(
    tmp_path: Path,
) -> None:
    primary = Failing("primary", [down()])
    backup = Failing("backup", text="Hello from backup")
    with RunLog(tmp_path / "logs.db") as log:
        result = Agent(FallbackModel(primary, backup), run_log=log).run_sync("Hi")
        (turn,) = log.run(result.run_id).turns

    assert result.answer == "Hello from backup"
    assert (primary.asked, backup.asked) == (1, 1)
    assert turn.model == "backup"


def test_a_failure_not_listed_is_not_passed_on() -> None:
    primary = Failing("primary", [ModelBadRequest("HTTP 400: bad schema", 400)])
    backup = Failing("backup", text="unused")
    with pytest.raises(ModelBadRequest, match="bad schema") as raised:
        Agent(FallbackModel(primary, backup)).run_sync("Hi")
    assert backup.asked == 0
    assert raised.value.result is not None
    assert raised.value.result.stop_reason == "model_error"


def test_when_every_model_fails_the_last_error_says_what_each_did() -> None:
    first = Failing("first", [down()])
    second = Failing("second", [ModelRateLimited("HTTP 429: slow down", 429)])
    with pytest.raises(ModelRateLimited) as raised:
        Agent(FallbackModel(first, second)).run_sync("Hi")
    assert raised.value.__notes__[-1] == (
        "every model failed: first: ModelUnavailable: the provider answered HTTP 503; "
        "second: ModelRateLimited: HTTP 429: slow down"
    )


async def test_a_stream_moves_on_only_before_its_first_chunk() -> None:
    before = Failing("before", [down()])
    backup = Failing("backup", text="done", chunks=2)
    events = [e async for e in Agent(FallbackModel(before, backup)).stream("Hi", deltas=True)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["part 0 ", "part 1 "]

    after = Failing("after", [down()], chunks=1)
    unused = Failing("unused", text="never")
    seen: list[str] = []

    async def read() -> None:
        async for event in Agent(FallbackModel(after, unused)).stream("Hi", deltas=True):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    with pytest.raises(ModelUnavailable):
        await read()
    assert (seen, unused.asked) == (["part 0 "], 0)


def test_retry_policy_tries_again_after_a_pause() -> None:
    waits: list[int] = []

    def backoff(failed: int) -> float:
        waits.append(failed)
        return 0.0

    flaky = Failing("flaky", [down(), ModelRateLimited("HTTP 429", 429)], text="at last")
    model = RetryingModel(flaky, RetryPolicy(max_attempts=3, backoff=backoff))
    assert Agent(model).run_sync("Hi").answer == "at last"
    assert (flaky.asked, waits) == (3, [1, 2])

    hopeless = Failing("hopeless", [down(), down()], text="never")
    with pytest.raises(ModelUnavailable) as raised:
        Agent(RetryingModel(hopeless, RetryPolicy(max_attempts=2, backoff=0))).run_sync("Hi")
    assert raised.value.__notes__[-1] == "failed 2 times (RetryPolicy.max_attempts)"


async def test_a_retried_stream_is_not_restarted_after_a_chunk() -> None:
    broken = Failing("broken", [down(), down()], chunks=1)
    model = RetryingModel(broken, RetryPolicy(max_attempts=5, backoff=0))
    events = Agent(model).stream("Hi", deltas=True)
    with pytest.raises(ModelUnavailable):
        _ = [event async for event in events]
    assert broken.asked == 1


def test_a_hosted_model_recovers_from_a_503_with_a_retry_policy(server: FakeOpenAI) -> None:
    server.reply(error_reply(503, "overloaded", "server_error"), Reply(body=completion_body("ok")))
    hosted = OpenAIChatModel("gpt-4.1-mini", base_url=server.url, api_key="sk-test", max_retries=0)
    model = RetryingModel(hosted, RetryPolicy(max_attempts=2, backoff=0))
    assert Agent(model).run_sync("Hi").answer == "ok"
    assert len(server.requests) == 2


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="needs at least two models"):
        FallbackModel(ScriptedModel([answer("x")]))
    with pytest.raises(TypeError, match=r"takes a tuple of ModelError classes"):
        FallbackModel(ScriptedModel([]), ScriptedModel([]), on=(ValueError,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"RetryPolicy.max_attempts must be >= 1, got 0"):
        RetryPolicy(max_attempts=0)
