"""``tooldeck web`` is safe by default: every request needs the token printed at start (in the
URL once, then a cookie, or a bearer header), requests for another host or from another
origin are refused, and every response forbids framing and foreign scripts. Serving the web
app costs nothing to a program that does not import it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tooldeck import Agent, ScriptedModel
from tooldeck.web import create_app

TOKEN = "the-token-0123456789"
PORT = 8765


@pytest.fixture
async def client_for(tmp_path: Path) -> AsyncIterator[Callable[..., httpx.AsyncClient]]:
    """``client_for(host=..., base=...)``: a client of a web app on PORT, no cookie yet."""
    clients: list[httpx.AsyncClient] = []

    def make(host: str = "127.0.0.1", base: str = f"http://127.0.0.1:{PORT}") -> httpx.AsyncClient:
        agent = Agent(ScriptedModel([]))
        app = create_app(agent=agent, home=tmp_path, token=TOKEN, port=PORT, host=host)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


async def test_a_request_without_the_token_is_refused(client_for: Any) -> None:
    client = client_for()
    for path in ("/", "/runs", "/conversations", "/tools", "/chat/x", "/static/chat.js"):
        response = await client.get(path)
        assert response.status_code == 403, path
        assert "needs its token: open the URL it printed" in response.text
    wrong = await client.get("/runs?token=not-the-token")
    assert wrong.status_code == 403


async def test_the_token_in_the_url_becomes_a_cookie_and_leaves_the_url(client_for: Any) -> None:
    client = client_for()

    response = await client.get(f"/runs?token={TOKEN}&tool=add")

    assert response.status_code == 303
    assert response.headers["location"] == "/runs?tool=add"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"tooldeck_token_{PORT}={TOKEN};")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    following = await client.get("/runs?tool=add")  # the client kept the cookie
    assert following.status_code == 200
    assert "<h1>Runs</h1>" in following.text


async def test_a_program_may_send_the_token_as_a_bearer_header(client_for: Any) -> None:
    client = client_for()
    response = await client.get("/tools", headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    refused = await client.get("/tools", headers={"authorization": "Bearer guess"})
    assert refused.status_code == 403


async def test_a_request_for_another_host_is_refused_even_with_the_token(client_for: Any) -> None:
    client = client_for()  # a DNS-rebinding page reaches 127.0.0.1 under its own name
    response = await client.get(
        "/runs", headers={"host": f"attacker.example:{PORT}", "authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 403
    assert "host 'attacker.example:8765' is not this server's" in response.text
    for host in (f"localhost:{PORT}", f"127.0.0.1:{PORT}"):
        allowed = await client.get(
            "/runs", headers={"host": host, "authorization": f"Bearer {TOKEN}"}
        )
        assert allowed.status_code == 200, host


async def test_a_request_from_another_origin_is_refused_even_with_the_cookie(
    client_for: Any,
) -> None:
    client = client_for()
    await client.get(f"/?token={TOKEN}")

    foreign = await client.post(
        "/conversations/x/delete", headers={"origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    assert "requests from 'http://evil.example' are refused" in foreign.text
    cross_site = await client.get("/runs", headers={"sec-fetch-site": "cross-site"})
    assert cross_site.status_code == 403
    own = await client.post(
        "/conversations/x/delete", headers={"origin": f"http://127.0.0.1:{PORT}"}
    )
    assert own.status_code == 303


async def test_every_server_on_every_interface_answers_any_host_but_still_needs_the_token(
    client_for: Any,
) -> None:
    client = client_for(host="0.0.0.0", base=f"http://box.lan:{PORT}")
    assert (await client.get("/runs")).status_code == 403
    response = await client.get("/runs", headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200


async def test_every_response_forbids_framing_and_foreign_scripts(client_for: Any) -> None:
    client = client_for()
    for response in (await client.get("/runs"), await client.get(f"/runs?token={TOKEN}")):
        headers = response.headers
        assert headers["x-frame-options"] == "DENY"
        assert headers["content-security-policy"].startswith("default-src 'self'")
        assert headers["referrer-policy"] == "same-origin"


def test_importing_tooldeck_or_its_command_line_loads_no_web_library() -> None:
    code = (
        "import sys, tooldeck, tooldeck.cli.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('starlette', 'uvicorn', 'jinja2', 'ag_ui', 'tooldeck.web')"
        " or m.startswith(('tooldeck.web', 'tooldeck.serve.agui'))))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert output == "[]"
