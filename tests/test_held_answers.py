"""An answer the output guardrails judge is shown only once they passed it: ``tooldeck run``
(redirected, and at a terminal with rich's live region, where even a text drawn for a moment
would reach the screen) and the AG-UI endpoint send none of the model's text while it is
written; a text they stop, or send back to the model, is never shown. A streamed model on
the loopback server writes each text in two pieces."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import (
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    ToolCallResultEvent,
)

from _agui import new_input, of_type, post
from _cli_terminal import command, environment
from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks
from _pty import Terminal
from tooldeck import Agent, tool
from tooldeck.models.openai import OpenAIChatModel
from tooldeck.run.guardrails import Guardrail, GuardrailResult
from tooldeck.serve.agui import app

GUARDED = textwrap.dedent(
    '''
    from tooldeck import tool
    from tooldeck.run.guardrails import Guardrail, GuardrailResult


    @tool
    def order_status(order: str) -> str:
        """Where an order is."""
        return f"order {order} shipped"


    def no_keys(ctx, answer):
        if "sk-" in answer:
            return GuardrailResult.tripped("do not show API keys")
        return GuardrailResult.passed()


    output_guardrails = [Guardrail(no_keys, retry=RETRY)]
    '''
)
LEAK = "Your key is sk-123."
LEAKED = ("Your key", "sk-123")  # the two pieces the server streams it in


def replies(server: FakeOpenAI, *answers: str) -> None:
    """A turn that says a word and calls order_status, then the answers, all streamed."""
    call = chat_call("call_8c1", "order_status", '{"order": "A1"}')
    turns = [completion_body("Let me look.", [call])] + [completion_body(a) for a in answers]
    server.reply(*(Reply(events=completion_chunks(turn)) for turn in turns))


def module(workdir: Path, *, retry: bool) -> None:
    (workdir / "tools.py").write_text(GUARDED.replace("RETRY", str(retry)), encoding="utf-8")


def tooldeck_run(server: FakeOpenAI, workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("run", "Where is my order A1?"),
        capture_output=True,
        text=True,
        cwd=workdir,
        env=environment(server, workdir),
        timeout=120,
        check=False,
    )


def test_a_tripped_answer_never_reaches_a_redirected_stdout(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    module(tmp_path, retry=False)
    replies(server, LEAK)

    done = tooldeck_run(server, tmp_path)

    assert done.returncode == 1, done.stderr
    for piece in LEAKED:
        assert piece not in done.stdout + done.stderr
    assert "… openai-chat:gpt-test is writing (its text shows once the output guardrails " in (
        done.stdout
    )
    assert done.stderr == (
        "tooldeck: error: the run stopped without an answer: output guardrail 'no_keys' "
        "tripped: do not show API keys\n"
    )


def test_at_a_terminal_the_answer_shows_once_it_passed_and_a_retried_one_never(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    module(tmp_path, retry=True)
    replies(server, LEAK, "Order A1 shipped yesterday.")
    terminal = Terminal(
        command("run", "Where is my order A1?"), tmp_path, environment(server, tmp_path)
    )

    status, shown = terminal.finish()

    assert status == 0, shown
    for piece in LEAKED:
        assert piece not in shown  # not even drawn for a moment in the live region
    assert "⛔ output guardrail no_keys retry: do not show API keys" in shown
    assert "✓ output guardrail no_keys passed" in shown
    assert shown.count("Order A1 shipped yesterday.") == 1  # the answer line, not the stream
    assert "answer: Order A1 shipped yesterday." in shown


def guarded_agent(server: FakeOpenAI, *, retry: bool) -> Agent[Any, Any]:
    @tool
    def order_status(order: str) -> str:
        """Where an order is."""
        return f"order {order} shipped"

    def no_keys(ctx: Any, answer: str) -> GuardrailResult:
        if "sk-" in answer:
            return GuardrailResult.tripped("do not show API keys")
        return GuardrailResult.passed()

    model = OpenAIChatModel(
        "gpt-test", base_url=server.url, api_key="sk-test", stream=True, max_retries=0
    )
    return Agent(model, [order_status], output_guardrails=[Guardrail(no_keys, retry=retry)])


async def run_over_agui(agent: Agent[Any, Any], tmp_path: Path) -> list[Any]:
    transport = httpx.ASGITransport(app=app(agent, data_dir=tmp_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        return await post(client, new_input("t1", "Where is my order A1?"))


def texts(events: list[Any]) -> list[str]:
    return [e.delta for e in of_type(events, TextMessageContentEvent)]


async def test_ag_ui_sends_an_answer_whole_once_it_passed(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    replies(server, "Order A1 shipped yesterday.")

    events = await run_over_agui(guarded_agent(server, retry=False), tmp_path)

    assert texts(events) == ["Let me look.", "Order A1 shipped yesterday."]  # whole, not halves
    kinds = [type(e).__name__ for e in events]
    answered = kinds.index("ToolCallResultEvent")
    assert kinds[answered + 1 :] == [
        "TextMessageStartEvent",
        "TextMessageContentEvent",
        "TextMessageEndEvent",
        "MessagesSnapshotEvent",
        "StateSnapshotEvent",
        "RunFinishedEvent",
    ]
    assert isinstance(events[-1], RunFinishedEvent)
    assert events[-1].result == "Order A1 shipped yesterday."


async def test_ag_ui_never_sends_a_stopped_answer(server: FakeOpenAI, tmp_path: Path) -> None:
    replies(server, LEAK)

    events = await run_over_agui(guarded_agent(server, retry=False), tmp_path)

    assert texts(events) == ["Let me look."]
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].code == "guardrail"
    for piece in LEAKED:
        assert piece not in "".join(e.model_dump_json() for e in events)


async def test_ag_ui_never_sends_an_answer_sent_back_to_the_model(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    replies(server, LEAK, "I cannot show keys; order A1 shipped.")

    events = await run_over_agui(guarded_agent(server, retry=True), tmp_path)

    assert texts(events) == ["Let me look.", "I cannot show keys; order A1 shipped."]
    for piece in LEAKED:
        assert piece not in "".join(e.model_dump_json() for e in events)
    (snapshot,) = of_type(events, MessagesSnapshotEvent)
    assert [m.content for m in snapshot.messages][3:] == [
        "[withheld: output guardrail 'no_keys' did not pass this answer: do not show API keys]",
        "error[refused]: do not show API keys",
        "I cannot show keys; order A1 shipped.",
    ]
    assert of_type(events, ToolCallResultEvent)[0].content == "order A1 shipped"
