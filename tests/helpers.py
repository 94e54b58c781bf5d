"""Small builders shared by the loop tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tooldeck import AssistantOutput, Message, ToolCall
from tooldeck.models.base import Model


def call(tool_name: str, call_id: str = "c1", /, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=tool_name, arguments=arguments)


def calls(*items: ToolCall) -> AssistantOutput:
    return AssistantOutput(tool_calls=items)


def answer(text: str) -> AssistantOutput:
    return AssistantOutput(content=text)


def raw_call(name: str, text: str, call_id: str = "c1") -> ToolCall:
    return ToolCall.from_json(call_id, name, text)


def tool_messages(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [message.content for message in messages if message.role == "tool"]


def as_json(value: Any) -> str:
    return json.dumps(value)


def reading_model(turns: list[AssistantOutput]) -> Any:
    """A ScriptedModel that answers what the conversation calls for, as a model would: the
    turn after as many of its own turns as the request shows since the last user message,
    each call with a fresh id (as hosted providers give). A run going on from its journal
    asks it fewer times than a run from the start; it answers the same."""
    import uuid

    from tooldeck import ScriptedModel

    def pick(request: Any) -> AssistantOutput:
        messages = request.messages
        last_user = max(i for i, message in enumerate(messages) if message.role == "user")
        done = sum(1 for message in messages[last_user:] if message.role == "assistant")
        turn = turns[done]
        fresh = tuple(
            c.model_copy(update={"id": f"call_{uuid.uuid4().hex[:12]}"}) for c in turn.tool_calls
        )
        return turn.model_copy(update={"tool_calls": fresh})

    return ScriptedModel([pick] * (4 * len(turns)))


MAY_HAVE_RUN = (
    ": it had started, so it may have done its work. Check whether it happened before calling "
    "it again"
)
"""What follows "before this call finished" for a call a cancel cut short (run/handle.py)."""


def simulated_model(name: str = "shop-model") -> Model:
    """A child process's model: the provider simulator its parent started
    (``OPENAI_BASE_URL``), never retried."""
    from tooldeck.models.openai import OpenAIChatModel

    base_url, api_key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    return OpenAIChatModel(name, base_url=base_url, api_key=api_key, max_retries=0)


@contextlib.asynccontextmanager
async def launched_shop(workdir: Path, app: str, agent: Any) -> AsyncIterator[Any]:
    """In a child process: DBOS launched on the SQLite system database WORKDIR/system.sqlite
    (one executor and version in every process, so launching again recovers the runs a
    killed process left) with ``agent`` as the durable agent ``shop``; destroyed after."""
    from dbos import DBOS

    from tooldeck.durable import DurableAgent

    config: Any = {
        "name": app,
        "system_database_url": f"sqlite:///{workdir / 'system.sqlite'}",
        "executor_id": "worker-1",
        "application_version": "tests",
        "log_level": "WARNING",
    }
    DBOS(config=config)
    durable = DurableAgent(agent, name="shop")
    DBOS.launch()  # recovers this executor's unfinished runs: a killed process's
    try:
        yield durable
    finally:
        DBOS.destroy()


async def recovered_result(run_id: str) -> Any:
    """The result of the durable run ``run_id`` that DBOS recovered as it launched."""
    from dbos import DBOS

    handle = await DBOS.retrieve_workflow_async(run_id)
    return await handle.get_result(polling_interval_sec=0.1)


def child_started(script: Path, scenario: str, workdir: Path, sim: Any) -> subprocess.Popen[str]:
    """A test's child process: ``script SCENARIO WORKDIR``, its model the provider simulator
    ``sim`` (``OPENAI_BASE_URL``)."""
    env = {**os.environ, **sim.env}
    command = [sys.executable, str(script), scenario, str(workdir)]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def child_finished(script: Path, scenario: str, workdir: Path, sim: Any) -> dict[str, Any]:
    """What ``child_started``'s process printed last (JSON), having run to its end."""
    child = child_started(script, scenario, workdir, sim)
    out, err = child.communicate(timeout=180)
    assert child.returncode == 0, err[-3000:]
    outcome: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return outcome


def kill_when_written(child: subprocess.Popen[Any], path: Path, what: str) -> None:
    """SIGKILL ``child`` once it has written ``path`` (it hangs in ``what``), or fail saying
    how it ended early."""
    deadline = time.monotonic() + 120
    try:
        while not path.exists():
            if child.poll() is not None:
                raise AssertionError(f"the child ended early: {child.communicate()[1][-3000:]!r}")
            assert time.monotonic() < deadline, f"the child never reached {what}"
            time.sleep(0.01)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=60)


def stop(process: subprocess.Popen[str]) -> None:
    """Stop a server process the test started: SIGTERM, then SIGKILL after 15 seconds."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def said(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation a request to the provider simulator sent: (role, text), an
    assistant's tool calls as their tools' names."""
    conversation = []
    for message in request["messages"]:
        names = [c["function"]["name"] for c in message.get("tool_calls") or ()]
        conversation.append((message["role"], message.get("content") or ",".join(names)))
    return conversation
