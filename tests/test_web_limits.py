"""Bounded input at the web front doors: a request body over the limit is answered 413 without
being read (declared, or chunked with no declared size), on the AG-UI app and on every route
of ``tooldeck web``; a WebSocket upgrade is a 400 that says why, token or not; a prompt too
long for a page is cut there, saying how much."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from _agui import new_input, post
from _asgi_server import listening, serving
from helpers import answer
from test_cli_web import started, url_of
from tooldeck import Agent, ScriptedModel
from tooldeck.runlog import RunLog
from tooldeck.serve.agui import app
from tooldeck.sessions import SQLiteSession
from tooldeck.web import create_app

TOKEN = "t0ken"
MIB = 1024 * 1024


def exchange(port: int, head: str, body_pieces: list[bytes] | None = None) -> tuple[int, bytes]:
    """Send a request head (and body pieces) on a fresh connection; the status and body of
    the response (read to its Content-Length: the server may keep the connection open)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(head.encode())
        for piece in body_pieces or []:
            connection.sendall(piece)
        received = b""
        while b"\r\n\r\n" not in received:
            received += _more(connection)
        head_part, _, body = received.partition(b"\r\n\r\n")
        lines = head_part.decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines[1:])
        while len(body) < int(headers["content-length"]):
            body += _more(connection)
        return int(lines[0].split(" ", 2)[1]), body


def _more(connection: socket.socket) -> bytes:
    chunk = connection.recv(65536)
    assert chunk, "the server closed the connection before its answer was whole"
    return chunk


def refusal(body: bytes) -> str:
    error: str = json.loads(body)["error"]
    return error


def unasked() -> Agent[Any, Any]:
    """An agent whose model has nothing to say: a request that reached it would fail."""
    return Agent(ScriptedModel([]))


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    listener = listening()
    port = listener.getsockname()[1]
    with serving(app(unasked(), data_dir=tmp_path), listener):
        head = (
            f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {48 * MIB}\r\n\r\n"
        )
        status, body = exchange(port, head)  # not a byte of the body sent

    assert status == 413
    assert refusal(body) == (
        "the request body is too large: it declares 48 MiB (50,331,648 bytes), and this server "
        "takes at most 1 MiB (1,048,576 bytes); send less, or start the server with a higher "
        "limit (max_body_bytes=, tooldeck web --max-body BYTES)"
    )
    assert not (tmp_path / "sessions.db").exists()  # nothing was stored


def test_a_chunked_body_is_refused_once_it_passes_the_limit_unfinished(tmp_path: Path) -> None:
    listener = listening()
    port = listener.getsockname()[1]
    piece = b"x" * 65536
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    with serving(app(unasked(), data_dir=tmp_path), listener):
        head = (
            f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        # 17 chunks of 64 KiB: past the limit; the body's last chunk is never sent
        status, body = exchange(port, head, [chunk] * 17)

    assert status == 413
    assert refusal(body).startswith(
        "the request body is too large: it sent more, and this server takes at most 1 MiB"
    )


async def test_the_limit_is_the_apps_to_set(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel([answer("Short enough.")]))
    transport = httpx.ASGITransport(app=app(agent, data_dir=tmp_path, max_body_bytes=2000))
    async with httpx.AsyncClient(transport=transport, base_url="http://agui.test") as client:
        refused = await client.post("/", json=new_input("t1", "x" * 3000))
        events = await post(client, new_input("t1", "Hello"))

    assert refused.status_code == 413
    assert "takes at most 1.95 KiB (2,000 bytes)" in refused.json()["error"]
    assert events[-1].result == "Short enough."
    with pytest.raises(ValueError, match="max_body_bytes must be at least 1, got 0"):
        app(agent, data_dir=tmp_path, max_body_bytes=0)


async def test_every_route_of_tooldeck_web_is_bounded(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel([answer("Kept.")]))
    await agent.run("Remember me.", session=SQLiteSession(tmp_path / "sessions.db", "kept"))
    web = create_app(agent=agent, home=tmp_path, token=TOKEN, port=8767, max_body_bytes=4096)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=web),
        base_url="http://127.0.0.1:8767",
        headers={"authorization": f"Bearer {TOKEN}"},
    ) as client:
        prompt = await client.post("/agui/", json=new_input("t1", "x" * 5000))
        delete = await client.post("/conversations/kept/delete", content=b"x" * 5000)
        history = await SQLiteSession(tmp_path / "sessions.db", "kept").load()

    assert (prompt.status_code, delete.status_code) == (413, 413)
    assert "takes at most 4 KiB (4,096 bytes)" in delete.json()["error"]
    assert [m.content for m in history.messages] == ["Remember me.", "Kept."]  # not deleted


@pytest.mark.parametrize(
    ("path", "credential"),
    [
        ("/agui/", "Authorization: Bearer t0ken\r\n"),
        ("/chat/x", "Cookie: tooldeck_token_{port}=t0ken\r\n"),
        (f"/?token={TOKEN}", ""),
        ("/static/app.css", "Authorization: Bearer t0ken\r\n"),
        ("/agui/", ""),
    ],
)
def test_a_websocket_upgrade_is_a_400_that_says_why(
    tmp_path: Path, path: str, credential: str
) -> None:
    listener = listening()
    port = listener.getsockname()[1]
    web = create_app(agent=unasked(), home=tmp_path, token=TOKEN, port=port)
    with serving(web, listener):
        head = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Sec-WebSocket-Version: 13\r\n{credential.format(port=port)}\r\n"
        )
        status, body = exchange(port, head)

    assert status == 400
    assert body.decode() == (
        "This tooldeck web server takes no WebSocket connections: its chat streams over HTTP "
        "(server-sent events from POST /agui/)."
    )


def test_tooldeck_web_takes_max_body(tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text(
        "from tooldeck import tool\n\n\n@tool\ndef echo(text: str) -> str:\n"
        '    """Say it back."""\n    return text\n'
    )
    arguments = ["--tools", str(tmp_path / "my_tools.py"), "--port", "0", "--max-body", "2000"]
    with started(arguments, tmp_path / "home") as (_, printed):
        _, port, token = url_of(printed)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            refused = client.post(
                "/agui/",
                json=new_input("t1", "x" * 3000),
                headers={"authorization": f"Bearer {token}"},
            )

    assert refused.status_code == 413
    assert "takes at most 1.95 KiB (2,000 bytes)" in refused.json()["error"]


async def test_a_prompt_too_long_for_a_page_is_cut_there_saying_how_much(tmp_path: Path) -> None:
    prompt = "word " * 600_000  # 3 MB: past any page, within what a library caller may send
    agent = Agent(ScriptedModel([answer("A long one.")]))
    agent.run_log = log = RunLog(tmp_path / "logs.db")
    result = await agent.run(prompt, session=SQLiteSession(tmp_path / "sessions.db", "long"))
    web = create_app(agent=agent, home=tmp_path, token=TOKEN, port=8768, run_log=log)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=web),
        base_url="http://127.0.0.1:8768",
        headers={"authorization": f"Bearer {TOKEN}"},
    ) as client:
        run_page = await client.get(f"/runs/{result.run_id}")
        chat_page = await client.get("/chat/long")
    log.close()

    for page in (run_page, chat_page):
        assert page.status_code == 200
        assert len(page.text) < 400_000, len(page.text)
    assert "[… 2,980,000 more characters not shown, of 3,000,000" in run_page.text
    assert "A long one." in run_page.text
    assert "2,980,000 more characters not shown" in chat_page.text
