"""Guardrails where they meet the rest: the run log, the spans, and ``tooldeck run`` (a
tools module that defines guardrails, its decisions shown live and in ``tooldeck logs``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from helpers import answer, call, calls
from tooldeck import Agent, RunContext, ScriptedModel, tool
from tooldeck.errors import GuardrailTripped
from tooldeck.observe import Instrumentation
from tooldeck.run.guardrails import GuardrailResult
from tooldeck.runlog import RunLog


@tool
def send_email(to: str) -> str:
    """Send an e-mail."""
    return f"sent to {to}"


def only_corp(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
    if arguments["to"].endswith("@corp.example"):
        return GuardrailResult.passed()
    return GuardrailResult.refused("outside the company")


def polite(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
    if "stupid" in prompt:
        return GuardrailResult.tripped("rude prompt")
    return GuardrailResult.passed()


def test_every_decision_is_in_the_run_log(tmp_path: Path) -> None:
    model = ScriptedModel([calls(call("send_email", to="x@evil.example")), answer("no")])
    with RunLog(tmp_path / "log.db") as log:
        agent = Agent(
            model, [send_email], input_guardrails=[polite], tool_guardrails=[only_corp], run_log=log
        )
        agent.run_sync("mail x")
        with pytest.raises(GuardrailTripped):
            Agent(ScriptedModel([answer("?")]), input_guardrails=[polite], run_log=log).run_sync(
                "stupid"
            )
        refused_run, tripped_run = sorted(log.runs(), key=lambda run: run.prompt)[::-1][:2][::-1]
        logged = log.run(refused_run.run_id)
        stopped = log.run(tripped_run.run_id)
    assert [(g.stage, g.name, g.verdict, g.call_id) for g in logged.guardrails] == [
        ("input", "polite", "passed", None),
        ("arguments", "only_corp", "refused", "c1"),
    ]
    assert logged.calls[0].error_code == "refused"
    assert stopped.stop_reason == "guardrail"
    assert [(g.verdict, g.message) for g in stopped.guardrails] == [("tripped", "rude prompt")]
    assert "input guardrail 'polite' tripped: rude prompt" in (stopped.error or "")


@pytest.fixture
def exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield provider, spans
    provider.shutdown()


async def test_every_decision_is_an_event_of_the_run_span(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, spans = exporter
    model = ScriptedModel([calls(call("send_email", to="x@evil.example")), answer("no")])
    agent = Agent(
        model,
        [send_email],
        tool_guardrails=[only_corp],
        instrument=Instrumentation(provider),
    )
    await agent.run("mail x")
    (root,) = [span for span in spans.get_finished_spans() if span.name == "invoke_agent"]
    (event,) = [event for event in root.events if event.name == "tooldeck.guardrail"]
    attributes = dict(event.attributes or {})
    assert attributes["tooldeck.guardrail.name"] == "only_corp"
    assert attributes["tooldeck.guardrail.verdict"] == "refused"
    assert attributes["gen_ai.tool.call.id"] == "c1"


GUARDED_TOOLS = textwrap.dedent(
    '''
    from tooldeck import tool
    from tooldeck.run.guardrails import GuardrailResult


    @tool
    def send_email(to: str) -> str:
        """Send an e-mail."""
        return f"sent to {to}"


    def polite(ctx, prompt):
        if "stupid" in prompt:
            return GuardrailResult.tripped("rude prompt")
        return GuardrailResult.passed()


    def only_corp(ctx, arguments):
        if arguments["to"].endswith("@corp.example"):
            return GuardrailResult.passed()
        return GuardrailResult.refused("outside the company")


    input_guardrails = [polite]
    tool_guardrails = [only_corp]
    '''
)


def tooldeck(server: FakeOpenAI, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, "TOOLDECK_HOME": str(cwd / "home")},
        timeout=120,
        check=False,
    )


def run(server: FakeOpenAI, cwd: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    model = ("--model", "openai-chat:gpt-test", "--base-url", server.url)
    return tooldeck(server, cwd, "run", prompt, "--tools", "mail", *model)


def test_the_cli_applies_a_modules_guardrails_and_shows_each_decision(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "mail.py").write_text(GUARDED_TOOLS, encoding="utf-8")
    first = completion_body(None, [chat_call("call_1", "send_email", '{"to": "x@evil.example"}')])
    server.reply(
        Reply(events=completion_chunks(first)),
        Reply(events=completion_chunks(completion_body("I could not."))),
    )
    done = run(server, tmp_path, "mail x")
    assert done.returncode == 0, done.stderr
    assert "✓ input guardrail polite passed" in done.stdout
    assert "⛔ arguments guardrail only_corp refused: outside the company" in done.stdout
    assert "error[refused]: outside the company" in done.stdout
    listed = tooldeck(server, tmp_path, "logs", "--json")
    (logged,) = json.loads(listed.stdout)
    replayed = tooldeck(server, tmp_path, "logs", "show", logged["run_id"])
    assert replayed.returncode == 0, replayed.stderr
    assert "✓ input guardrail polite passed" in replayed.stdout
    assert "⛔ arguments guardrail only_corp refused: outside the company" in replayed.stdout


def test_the_cli_stops_on_a_tripped_input_guardrail(server: FakeOpenAI, tmp_path: Path) -> None:
    (tmp_path / "mail.py").write_text(GUARDED_TOOLS, encoding="utf-8")
    server.reply(Reply(events=completion_chunks(completion_body("whatever"))))
    done = run(server, tmp_path, "you stupid tool")
    assert done.returncode == 1
    assert "⛔ input guardrail polite tripped: rude prompt" in done.stdout
    assert "input guardrail 'polite' tripped: rude prompt" in done.stderr
