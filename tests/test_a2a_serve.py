"""``tooldeck a2a serve`` driven by a2a-sdk's own client: a real server process on
127.0.0.1, its model the provider simulator (fresh call ids), tasks and conversations in a
SQLite file. What each test asserts is what the client reads, and what happened in the world
(the refunds the shop's tool wrote down) and in the model's requests.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from a2a.helpers import get_artifact_text
from a2a.types import GetTaskRequest, ListTasksRequest, TaskState
from a2a.utils.errors import A2AError

from _a2a import (
    AUTH,
    MODEL,
    REFUND_A1,
    SHOP,
    a2a_client,
    decisions,
    message_data,
    paused_refund,
    pending_calls,
    prompt,
    send,
    served,
    status_text,
)
from tooldeck.testing import ProviderSimulator, call, reply

WAITING = TaskState.TASK_STATE_INPUT_REQUIRED


def _said(sim: ProviderSimulator, index: int = -1) -> str:
    """Everything the model was sent in request ``index``, as one text."""
    return str(sim.requests[index]["messages"])


async def test_a_task_streams_its_calls_and_text_and_the_context_goes_on(
    tmp_path: Path, provider
) -> None:
    sim = provider([call("lookup", {"order": "A1"}), reply("Order A1 is paid."), reply("Yes, A1.")])
    with served(tmp_path, sim) as (url, _):
        async with a2a_client(url) as client:
            events, task = await send(client, prompt("Where is order A1?"))
            data = [
                d
                for e in events
                if e.HasField("status_update")
                for d in message_data(e.status_update.status.message)
            ]
            assert [d["kind"] for d in data] == ["tooldeck.tool_call", "tooldeck.tool_result"]
            assert data[0]["name"] == "lookup"
            assert data[0]["arguments"] == {"order": "A1"}
            assert data[1]["ok"] is True
            assert data[1]["output"] == "order A1: paid, 250 dollars"
            chunks = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
            assert "Order A1 is paid." in [get_artifact_text(a) for a in chunks]
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert status_text(task) == "Order A1 is paid."
            answer = next(a for a in task.artifacts if a.artifact_id == "answer")
            assert get_artifact_text(answer) == "Order A1 is paid."

            _, later = await send(client, prompt("Was it A1?", context_id=task.context_id))
            listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
    assert later.status.state == TaskState.TASK_STATE_COMPLETED
    assert "Where is order A1?" in _said(sim)
    assert "Was it A1?" in _said(sim)
    assert {t.id for t in listed.tasks} == {task.id, later.id}


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
async def test_a_pause_is_decided_by_a_reply_to_a_second_server_process(
    tmp_path: Path, provider, database: str, request: pytest.FixtureRequest
) -> None:
    store = request.getfixturevalue("postgres_dsn") if database == "postgres" else None
    sim = provider([REFUND_A1, reply("Refunded.")])
    with served(tmp_path, sim, store=store) as (first_url, first):
        async with a2a_client(first_url) as client:
            paused, waiting = await paused_refund(client)
    assert first.returncode is not None  # the first server is gone before the reply
    assert paused.status.state == WAITING
    assert waiting["name"] == "refund"
    assert waiting["kind"] == "approval"
    assert waiting["arguments"] == {"order": "A1", "amount": 250}
    assert waiting["why"] == "its tool requires a person's approval"
    assert waiting["id"] == sim.call_ids[0]
    assert "refund (call" in status_text(paused)

    with served(tmp_path, sim, store=store) as (second_url, second):
        async with a2a_client(second_url) as client:
            reloaded = await client.get_task(GetTaskRequest(id=paused.id))
            assert reloaded.status.state == WAITING
            _, done = await send(
                client, decisions(paused, {"id": waiting["id"], "decision": "approve"})
            )
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(done) == "Refunded."
    effects = (tmp_path / "effects.txt").read_text().splitlines()
    assert effects == [f"refund A1 250 pid={second.pid}"]
    assert "refunded 250 dollars of order A1" in _said(sim)


async def test_a_reply_naming_a_call_not_pending_is_refused_and_nothing_runs(
    tmp_path: Path, provider
) -> None:
    sim = provider([REFUND_A1, reply("I did not refund it.")])
    with served(tmp_path, sim) as (url, _):
        async with a2a_client(url) as client:
            paused, waiting = await paused_refund(client)
            with pytest.raises(A2AError) as refused:
                await send(client, decisions(paused, {"id": "call_guess", "decision": "approve"}))
            assert str(refused.value) == (
                f"call 'call_guess' is not pending in task {paused.id!r} (decided already, or "
                f"of another run): it waits for refund (call {waiting['id']!r}, approval)"
            )
            with pytest.raises(A2AError) as wrong_digest:
                await send(
                    client,
                    decisions(
                        paused, {"id": waiting["id"], "decision": "approve", "digest": "0" * 64}
                    ),
                )
            assert "the digest given for call" in str(wrong_digest.value)
            with pytest.raises(A2AError) as malformed:
                await send(client, decisions(paused, {"id": waiting["id"], "decision": "maybe"}))
            assert str(malformed.value).startswith(
                'the reply is not {"kind": "tooldeck.decisions", "decisions": [{"id": ..., '
                '"decision": "approve"|"reject"|"result", ...}]}: decisions.0.decision: Input '
                "should be 'approve', 'reject' or 'result'"
            )
            with pytest.raises(A2AError) as prompt_while_paused:
                await send(client, prompt("Hello?", context_id=paused.context_id))
            assert str(prompt_while_paused.value).startswith(
                f"a run of this conversation waits for refund (call {waiting['id']!r}, approval): "
                f"reply to task {paused.id!r}"
            )
            still = await client.get_task(GetTaskRequest(id=paused.id))
            assert still.status.state == WAITING
            assert len(sim.requests) == 1  # the model was asked nothing more

            _, rejected = await send(
                client,
                decisions(
                    paused, {"id": waiting["id"], "decision": "reject", "reason": "too much"}
                ),
            )
    assert rejected.status.state == TaskState.TASK_STATE_COMPLETED
    assert not (tmp_path / "effects.txt").exists()
    assert "error[rejected]: too much" in _said(sim)


async def test_an_edited_call_runs_with_the_edit_and_an_external_result_reaches_the_model(
    tmp_path: Path, provider
) -> None:
    sim = provider(
        [
            call("refund", {"order": "A1", "amount": 250}),
            call("ask_warehouse", {"order": "A1"}),
            reply("Refunded 100; it is in Lyon."),
        ]
    )
    with served(tmp_path, sim) as (url, _):
        async with a2a_client(url) as client:
            _, paused = await send(client, prompt("Refund A1 and find it."))
            [refund] = pending_calls(paused)
            edit = {
                "id": refund["id"],
                "decision": "approve",
                "arguments": {"order": "A1", "amount": 100},
            }
            _, external = await send(client, decisions(paused, edit))
            assert external.status.state == WAITING
            [asked] = pending_calls(external)
            assert asked["kind"] == "external"
            assert asked["name"] == "ask_warehouse"
            with pytest.raises(A2AError) as approve_external:
                await send(client, decisions(external, {"id": asked["id"], "decision": "approve"}))
            assert "is an external tool's: reply with its result" in str(approve_external.value)
            result = {"id": asked["id"], "decision": "result", "output": "in Lyon"}
            _, done = await send(client, decisions(external, result))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert (tmp_path / "effects.txt").read_text().split(" pid=")[0] == "refund A1 100"
    assert "in Lyon" in _said(sim)


async def test_no_token_no_task(tmp_path: Path, provider) -> None:
    sim = provider([reply("never")])
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}  # fmt: skip
    with served(tmp_path, sim) as (url, _):
        card = httpx.get(f"{url}/.well-known/agent-card.json")
        none = httpx.post(f"{url}/", json=body)
        wrong = httpx.post(f"{url}/", json=body, headers={"Authorization": "Bearer wrong"})
        rest = httpx.get(f"{url}/rest/tasks")
        too_big = httpx.post(f"{url}/", content=b"x" * 2_000_000, headers=AUTH)
    assert card.status_code == 200
    assert card.json()["securitySchemes"] == {
        "bearer": {
            "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "Authorization: Bearer <token>",
            }
        }
    }
    for refused in (none, wrong, rest):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
        assert "Authorization: Bearer <token>" in refused.json()["error"]
    assert too_big.status_code == 413
    assert "the request body is too large" in too_big.json()["error"]
    assert sim.requests == []


async def test_an_api_key_server_takes_the_key_in_its_header_only(tmp_path: Path, provider) -> None:
    sim = provider([reply("Hello.")])
    with served(tmp_path, sim, "--auth", "api-key") as (url, _):
        card = httpx.get(f"{url}/.well-known/agent-card.json").json()
        bearer = httpx.get(f"{url}/rest/tasks", headers=AUTH)
        async with a2a_client(url, {"X-API-Key": AUTH["Authorization"].split()[1]}) as client:
            _, task = await send(client, prompt("Hi"))
    assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "X-API-Key"
    assert bearer.status_code == 401
    assert "X-API-Key header" in bearer.json()["error"]
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


def test_the_card_is_made_from_the_agent(tmp_path: Path, provider) -> None:
    sim = provider([])
    with served(tmp_path, sim) as (url, _):
        card = httpx.get(f"{url}/.well-known/agent-card.json").json()
    assert card["name"] == "agent"
    assert [s["id"] for s in card["skills"]] == ["lookup", "refund", "ask_warehouse", "slow_count"]
    assert card["skills"][0]["description"] == "Look an order up."
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"] == [
        {"url": f"{url}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": f"{url}/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ]
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]


def test_the_command_refuses_to_serve_without_its_secret_or_tools(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text("from tooldeck import tool\n", encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if k != "TOOLDECK_A2A_TOKEN"}
    command = [sys.executable, "-m", "tooldeck.cli", "a2a", "serve"]
    run = functools.partial(
        subprocess.run, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    no_secret = run([*command, "-t", "shop.py"], env=base)
    short = run([*command, "-t", "shop.py"], env={**base, "TOOLDECK_A2A_TOKEN": "short"})
    no_tools = run(command, env=base)
    (tmp_path / "one.py").write_text(SHOP, encoding="utf-8")
    secret = {**base, "TOOLDECK_A2A_TOKEN": "x" * 24, "OPENAI_API_KEY": "unused"}
    model = ["--model", MODEL, "--base-url", "http://127.0.0.1:9/v1"]
    beats = ["--heartbeat", "5", "--lease", "4"]
    long_beat = run([*command, "-t", "one.py", *model, *beats], env=secret)
    keep = ["--session-db", "tasks.db", "--keep-events", "0"]
    kept_not = run([*command, "-t", "one.py", *model, *keep], env=secret)
    assert no_secret.returncode == 2
    assert "--auth bearer needs the secret in $TOOLDECK_A2A_TOKEN" in no_secret.stderr
    assert short.returncode == 2
    assert "BearerToken needs a secret of at least 16 characters (got 5)" in short.stderr
    assert no_tools.returncode == 2
    assert "give the agent's tools: -t/--tools" in no_tools.stderr
    assert long_beat.returncode == 2
    assert (
        "heartbeat_s=5 and lease_s=4: a heartbeat is over 0 s and shorter than the lease"
        in long_beat.stderr
    )
    assert kept_not.returncode == 2
    assert "keep_events_s=0: a finished task's events are kept over 0 s" in kept_not.stderr


async def test_a_server_with_another_checkpoint_key_runs_nothing_and_the_task_still_waits(
    tmp_path: Path, provider
) -> None:
    sim = provider([REFUND_A1, reply("Refunded.")])
    with served(tmp_path, sim) as (url, right), served(tmp_path, sim, key="other") as (other, _):
        async with a2a_client(url) as client:
            paused, waiting = await paused_refund(client)
        approve = decisions(paused, {"id": waiting["id"], "decision": "approve"})
        async with a2a_client(other) as client:
            _, refused = await send(client, approve)
        assert not (tmp_path / "effects.txt").exists()
        assert refused.status.state == WAITING
        assert status_text(refused) == (
            "The reply could not resume the run: the checkpoint's signature does not match: it "
            "was changed after it was made, or made with another checkpoint_key"
        )
        assert pending_calls(refused) == [waiting]
        async with a2a_client(url) as client:
            _, done = await send(client, approve)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    effects = (tmp_path / "effects.txt").read_text().splitlines()
    assert effects == [f"refund A1 250 pid={right.pid}"]
