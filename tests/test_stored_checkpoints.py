"""Checkpoints read back are untrusted input: whatever a stored checkpoint holds, reading
and resuming it raise CheckpointError, saying what is wrong, or go on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from test_pause_resume import paused_run
from tooldeck import Approve, Checkpoint
from tooldeck.errors import CheckpointError


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"a": value}
    return value


def test_a_signed_checkpoint_nested_past_the_encoder_is_a_checkpoint_error() -> None:
    agent, checkpoint = paused_run(checkpoint_key=b"secret")
    data = json.loads(checkpoint.to_json())
    kept = data["messages"][-1]["tool_calls"][1]  # kept as text, so the model's check is skipped
    kept.update(arguments={"path": _nested(260)}, raw_arguments="{}")

    with pytest.raises(CheckpointError) as refused:
        agent.resume_sync(json.dumps(data), {"c2": Approve()})

    assert str(refused.value).startswith("the checkpoint is broken: it holds what no run makes")
    assert "Maximum serialization depth exceeded" in str(refused.value)


def test_a_checkpoint_with_text_that_is_not_unicode_is_refused_when_read() -> None:
    _, checkpoint = paused_run()
    data = json.loads(checkpoint.to_json())
    data["messages"][0]["content"] = "tidy \ud800"

    with pytest.raises(CheckpointError, match="surrogates not allowed"):
        Checkpoint.from_json(json.dumps(data))


@pytest.mark.parametrize("signature", ["é" * 64, "💥"])
def test_a_signature_holding_any_text_is_a_signature_that_does_not_match(signature: str) -> None:
    agent, checkpoint = paused_run(checkpoint_key=b"secret")
    data = json.loads(checkpoint.to_json())
    data["signature"] = signature

    with pytest.raises(CheckpointError, match="the checkpoint's signature does not match"):
        agent.resume_sync(json.dumps(data), {"c2": Approve()})
    data["signature"] = "\ud800" * 64
    with pytest.raises(CheckpointError, match="surrogates not allowed"):
        agent.resume_sync(json.dumps(data), {"c2": Approve()})


def test_a_digest_holding_any_text_is_a_changed_call() -> None:
    agent, checkpoint = paused_run()
    data = json.loads(checkpoint.to_json())
    data["turn"]["pending"][0]["digest"] = "ü" * 64

    with pytest.raises(CheckpointError, match=r"pending call 'c2' \(delete_file\) was changed"):
        agent.resume_sync(json.dumps(data), {"c2": Approve()})


@pytest.mark.parametrize(("inner", "kind"), [(True, "bool"), (-1, "int"), ({"a": 1}, "dict")])
def test_an_inner_trace_that_is_not_a_list_is_a_checkpoint_error(inner: Any, kind: str) -> None:
    _, checkpoint = paused_run()
    data = json.loads(checkpoint.to_json())
    data["trace"][0]["inner_trace"] = inner

    with pytest.raises(CheckpointError) as refused:
        Checkpoint.from_json(json.dumps(data))

    assert str(refused.value) == (
        "the checkpoint is broken: trace.0.inner_trace: Value error, expected a list of tool "
        f"traces or null, got {kind}"
    )


def test_a_traced_error_without_its_type_and_message_is_refused() -> None:
    _, checkpoint = paused_run()
    data = json.loads(checkpoint.to_json())
    data["trace"][0]["error"] = {"a": 1}

    with pytest.raises(CheckpointError) as refused:
        Checkpoint.from_json(json.dumps(data))

    assert str(refused.value).startswith("the checkpoint is broken: trace.0.error")
    assert 'Value error, expected {"type": <text>, "message": <text>}' in str(refused.value)


def test_traces_of_agent_tools_nested_hundreds_deep_are_a_checkpoint_error() -> None:
    _, checkpoint = paused_run()
    data = json.loads(checkpoint.to_json())
    first = data["trace"][0]
    trace = {"call": first["call"], "result": first["result"], "duration_s": 1}
    for _ in range(400):
        trace = {**trace, "inner_trace": [trace]}
    data["trace"][0]["inner_trace"] = [trace]

    with pytest.raises(CheckpointError, match="the checkpoint is broken: it nests deeper"):
        Checkpoint.from_json(json.dumps(data))
