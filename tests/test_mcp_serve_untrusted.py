"""``tooldeck mcp serve`` answers every request, however malformed, over a real stdio pipe:
raw JSON-RPC lines in, one answer per request out (the SDK's own server leaves these
unanswered, and a client would wait forever)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _mcp import ROOT, SLOW
from _mutations import mutated, mutated_text


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


class RawClient:
    """A client that writes raw lines to the server's stdin and reads its answers."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def send(self, line: str) -> dict[str, Any]:
        """Write one line; the server's next message (it must come)."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        try:
            answer: dict[str, Any] = json.loads(self._lines.get(timeout=SLOW))
        except queue.Empty:
            pytest.fail(f"no answer in {SLOW} s to {line[:120]!r}")
        return answer


@pytest.fixture(scope="module")
def client() -> Iterator[RawClient]:
    command = [sys.executable, "-m", "tooldeck.cli", "mcp", "serve", "examples.mcp_server:registry"]
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        cwd=ROOT,
    )
    try:
        raw = RawClient(process)
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
        hello["clientInfo"]["version"] = "1"
        started = raw.send(_request(0, "initialize", hello))
        assert started["result"]["serverInfo"]["name"] == "examples.mcp_server"
        assert process.stdin is not None
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        process.stdin.write("\n")
        yield raw
    finally:
        process.kill()
        process.wait(timeout=SLOW)


def _request(request_id: Any, method: str, params: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def _add(arguments: Any) -> dict[str, Any]:
    return {"name": "add", "arguments": arguments}


SURROGATE = '{"jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": ' + (
    '{"name": "add", "arguments": {"a": "\\ud800", "b": 1}}}'
)


@pytest.mark.parametrize(
    ("line", "answer_id", "code", "message"),
    [
        (_request(11, "tools/call", "add"), 11, -32602, "params must be a JSON object, got a string"),
        (_request(12, "tools/call", [1, 2]), 12, -32602, "params must be a JSON object, got an array"),
        (_request(13, "tools/call", 7), 13, -32602, "params must be a JSON object, got a number"),
        (
            _request("deep", "tools/call", _add({"a": _nested(200), "b": 1})),
            "deep",
            -32602,
            "params are nested more than 64 levels deep; send a flatter object",
        ),
        (
            SURROGATE,
            15,
            -32602,
            "params contain text that is not valid Unicode (a lone surrogate such as '\\ud800'); "
            "send valid UTF-8 text",
        ),
        (
            _request(1.5, "tools/list", {}),
            None,
            -32600,
            "a request's id must be a string or an integer, got a number",
        ),
        ('{"jsonrpc": "2.0", "id": 16, "method": ', None, -32700, "the message is not JSON: "),
        ("[1, 2]", None, -32600, "a message is a JSON object, got an array (batches are not"),
    ],
)  # fmt: skip
def test_a_malformed_request_is_answered_with_a_json_rpc_error(
    client: RawClient, line: str, answer_id: Any, code: int, message: str
) -> None:
    answer = client.send(line)

    assert answer["id"] == answer_id
    assert answer["error"]["code"] == code
    assert answer["error"]["message"].startswith(message)


def test_after_malformed_requests_the_server_still_answers_sound_ones(client: RawClient) -> None:
    client.send(_request(21, "tools/call", "add"))

    answer = client.send(_request(22, "tools/call", _add({"a": 2, "b": 40})))

    assert answer == {
        "jsonrpc": "2.0",
        "id": 22,
        "result": {"content": [{"type": "text", "text": "42"}], "isError": False},
    }


def test_requests_the_sdk_refuses_itself_are_answered_too(client: RawClient) -> None:
    wrong_params = client.send(_request(31, "tools/call", {"name": 5}))
    unknown = client.send(_request(32, "tools/nope", {}))

    assert (wrong_params["id"], wrong_params["error"]["code"]) == (31, -32602)
    assert (unknown["id"], unknown["error"]["code"]) == (32, -32601)


async def test_tooldecks_client_shows_a_tooldeck_servers_failure_with_one_prefix() -> None:
    from helpers import answer, call, calls
    from tooldeck import Agent, ScriptedModel
    from tooldeck.tools.mcp import MCPToolset

    toolset = MCPToolset.stdio(
        sys.executable,
        ["-m", "tooldeck.cli", "mcp", "serve", "test_mcp_server:registry"],
        env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"},
        cwd=ROOT,
        connect_timeout=SLOW,
    )
    model = ScriptedModel([calls(call("broken", "c1"), call("slow", "c2")), answer("done")])
    async with toolset:
        result = await Agent(model, [toolset]).run("go")

    assert [trace.result.output for trace in result.tool_trace] == [
        "error[tool_error]: the tool 'broken' failed while running; try other arguments or "
        "another way",
        "error[tool_timeout]: 'slow' did not finish within 0.2 s and was stopped; try smaller "
        "inputs or another approach",
    ]
    assert [trace.result.error_code for trace in result.tool_trace] == [
        "tool_error",
        "tool_timeout",
    ]


async def test_an_answer_the_client_cannot_read_fails_its_call_instead_of_hanging() -> None:
    import asyncio

    from tooldeck.tools.mcp import MCPCallFailed, MCPToolset

    server = ROOT / "tests" / "mcp_fixtures" / "hostile_server.py"
    toolset = MCPToolset.stdio(sys.executable, [str(server)], connect_timeout=SLOW)
    async with toolset:
        for name in ("surrogate", "deep"):
            with pytest.raises(MCPCallFailed) as failed:
                await asyncio.wait_for(toolset.call(name, {}), SLOW)
            assert "with a message that is not valid JSON-RPC" in str(failed.value)
        said = await asyncio.wait_for(toolset.call("chatty", {}), SLOW)  # reconnected

    assert said == "said"  # a line of other output is no answer: it ends nothing


_REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": _add({"a": 1, "b": 2})}


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_every_line_with_an_id_and_a_method_is_passed_on_or_answered(data: st.DataObject) -> None:
    from tooldeck.serve._screen import screen

    if data.draw(st.booleans()):
        line = json.dumps(data.draw(mutated(_REQUEST)), ensure_ascii=data.draw(st.booleans()))
    else:
        line = data.draw(mutated_text(json.dumps(_REQUEST)))

    screened = screen(line)

    try:
        sent = json.loads(line)
    except (ValueError, RecursionError):
        sent = None
    if isinstance(sent, dict) and "id" in sent and "method" in sent:
        assert (screened.message is None) != (screened.answer is None)
    for out in (screened.message, screened.answer):
        if out is not None:  # what goes on can be written back: no lone surrogate left in it
            out.model_dump_json(by_alias=True, exclude_unset=True)


def test_ctrl_c_stops_the_server_while_the_client_keeps_stdin_open() -> None:
    import signal

    command = [sys.executable, "-m", "tooldeck.cli", "mcp", "serve", "examples.mcp_server:registry"]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write((_request(1, "tools/list", {}) + "\n").encode())
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1  # serving, stdin still open
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=SLOW) == 130
    finally:
        process.kill()
        process.wait(timeout=SLOW)
