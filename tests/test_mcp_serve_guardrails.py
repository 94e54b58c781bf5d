"""Tool guardrails hold for calls served over MCP (``mcp_server``, ``tooldeck mcp serve``):
a guardrail that refuses or stops refuses the call, and the client reads the refusal as an
error result; a guardrail that replaces the arguments or the result does so over MCP too.
Checked with the SDK's own client in-process, and over stdio against the command."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from _mcp import SLOW
from tooldeck import RunContext, ToolRegistry, ToolResult, tool
from tooldeck.run.guardrails import GuardrailResult, ToolGuardrail
from tooldeck.serve.mcp import mcp_server
from tooldeck.tools.mcp import MCPCallFailed, MCPToolset

pytestmark = pytest.mark.filterwarnings("error")

sent: list[str] = []


def inside_only(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
    if arguments["to"].endswith("@corp.example"):
        return GuardrailResult.passed()
    return GuardrailResult.refused(f"{arguments['to']} is outside the company")


def no_bulk(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
    if arguments["body"].count("@") > 2:
        return GuardrailResult.tripped("this looks like a bulk mailing")
    return GuardrailResult.passed()


def quieter(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
    return GuardrailResult.replaced({**arguments, "body": arguments["body"].lower()})


def redact(ctx: RunContext[Any], result: ToolResult) -> GuardrailResult:
    return GuardrailResult.replaced(result.output.replace("sk-12345", "[redacted]"))


@tool(guardrails=[inside_only, ToolGuardrail(no_bulk), quieter])
def send_email(to: str, body: str) -> str:
    """Send an e-mail."""
    sent.append(f"{to}: {body}")
    return f"sent to {to}"


@tool(guardrails=[ToolGuardrail(result=redact)])
def read_secret(name: str) -> str:
    """Read a secret."""
    return f"{name}=sk-12345"


registry = ToolRegistry([send_email, read_secret])


async def call_text(client: Client, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    result = await client.call_tool(name, arguments)
    (block,) = result.content
    assert block.type == "text"
    return result.is_error, block.text


@pytest.fixture(autouse=True)
def nothing_sent() -> None:
    sent.clear()


async def test_a_refusing_guardrail_refuses_the_call_and_the_client_reads_why() -> None:
    async with Client(mcp_server(registry, name="tests")) as client:
        answered = await call_text(client, "send_email", {"to": "x@evil.example", "body": "Hi"})
    assert answered == (True, "error[refused]: x@evil.example is outside the company")
    assert sent == []


async def test_a_guardrail_that_says_stop_refuses_the_call_it_judged() -> None:
    body = "a@corp.example b@corp.example c@corp.example"
    async with Client(mcp_server(registry, name="tests")) as client:
        answered = await call_text(client, "send_email", {"to": "d@corp.example", "body": body})
        again = await call_text(client, "send_email", {"to": "d@corp.example", "body": "Hi"})
    failed, text = answered
    assert failed
    assert re.fullmatch(
        r"error\[refused\]: arguments guardrail 'no_bulk' on call '\d+' tripped: this looks "
        r"like a bulk mailing",
        text,
    ), text
    assert again == (False, "sent to d@corp.example")  # the server goes on
    assert sent == ["d@corp.example: hi"]  # and the replacing guardrail had its say


async def test_a_result_guardrail_redacts_over_mcp() -> None:
    async with Client(mcp_server(registry, name="tests")) as client:
        assert await call_text(client, "read_secret", {"name": "api"}) == (False, "api=[redacted]")


SERVED = textwrap.dedent(
    '''
    from tooldeck import ToolResult, tool
    from tooldeck.run.guardrails import GuardrailResult, ToolGuardrail


    def inside_only(ctx, arguments):
        if arguments["to"].endswith("@corp.example"):
            return GuardrailResult.passed()
        return GuardrailResult.refused(f"{arguments['to']} is outside the company")


    def redact(ctx, result: ToolResult):
        return GuardrailResult.replaced(result.output.replace("sk-12345", "[redacted]"))


    @tool(guardrails=[inside_only])
    def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        return f"sent to {to}"


    @tool
    def read_secret(name: str) -> str:
        """Read a secret."""
        return f"{name}=sk-12345"


    tool_guardrails = [ToolGuardrail(result=redact)]  # on every tool's calls
    '''
)


async def test_guardrails_given_to_the_server_judge_every_served_call() -> None:
    def no_admin(ctx: RunContext[Any], arguments: dict[str, Any]) -> GuardrailResult:
        if "admin" in arguments.get("name", ""):
            return GuardrailResult.refused("the admin secret is not served")
        return GuardrailResult.passed()

    server = mcp_server(registry, name="tests", tool_guardrails=[no_admin])
    async with Client(server) as client:
        refused = await call_text(client, "read_secret", {"name": "admin"})
        given = await call_text(client, "read_secret", {"name": "api"})
    assert refused == (True, "error[refused]: the admin secret is not served")
    assert given == (False, "api=[redacted]")  # after the tool's own guardrail


async def test_tooldeck_mcp_serve_keeps_the_guardrails_over_stdio(tmp_path: Path) -> None:
    (tmp_path / "mail_tools.py").write_text(SERVED, encoding="utf-8")
    command = ["-m", "tooldeck.cli", "mcp", "serve", str(tmp_path / "mail_tools.py")]
    async with MCPToolset.stdio(sys.executable, command, connect_timeout=SLOW) as toolset:
        with pytest.raises(MCPCallFailed) as refused:
            await toolset.call("send_email", {"to": "x@evil.example", "body": "Hi"})
        redacted = await toolset.call("read_secret", {"name": "api"})
    assert "error[refused]: x@evil.example is outside the company" in str(refused.value)
    assert redacted == "api=[redacted]"
