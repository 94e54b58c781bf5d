"""The simulator across processes: an agent in a child process (a Python program, the
``tooldeck`` CLI) points at ``sim.base_url``; a child SIGKILLed mid-request leaves the
simulator serving the next step; ``python -m tooldeck.testing serve`` serves a script file
for other programs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tooldeck.testing import ProviderSimulator, call, fail, reply

Provider = Callable[..., ProviderSimulator]

AGENT = textwrap.dedent(
    '''
    import os, sys
    from pathlib import Path
    from tooldeck import Agent, tool
    from tooldeck.models.openai import OpenAIChatModel

    effects = Path(sys.argv[1])


    @tool(side_effects=True)
    def refund_order(order_id: str) -> str:
        """Refund an order."""
        with effects.open("a") as file:
            file.write(order_id + "\\n")
        return f"order {order_id} refunded"


    model = OpenAIChatModel("gpt-4.1-mini", base_url=os.environ["OPENAI_BASE_URL"],
                            stream=sys.argv[3] == "stream", max_retries=0)
    print(Agent(model, tools=[refund_order]).run_sync(sys.argv[2]).answer, flush=True)
    '''
)

TOOLS = textwrap.dedent(
    '''
    from pathlib import Path
    from tooldeck import tool


    @tool(side_effects=True)
    def refund_order(order_id: str) -> str:
        """Refund an order."""
        with Path("effects.txt").open("a") as file:
            file.write(order_id + "\\n")
        return f"order {order_id} refunded"
    '''
)


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent.py"
    path.write_text(AGENT, encoding="utf-8")
    return path


def child_env(sim_env: dict[str, str]) -> dict[str, str]:
    kept = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return {**kept, **sim_env}


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Child processes a test starts; any left running when it ends is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=60)


def start_agent(
    children: list[subprocess.Popen[str]],
    agent_file: Path,
    sim: ProviderSimulator,
    prompt: str,
    stream: bool = False,
) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [
            sys.executable,
            str(agent_file),
            str(agent_file.with_name("effects.txt")),
            prompt,
            "stream" if stream else "whole",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(sim.env),
    )
    children.append(child)
    return child


def killed(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL


def answered(child: subprocess.Popen[str]) -> str:
    out, err = child.communicate(timeout=180)
    assert child.returncode == 0, err[-3000:]
    return out.strip()


@pytest.mark.parametrize(
    "held", [fail.hang(), fail.slow_first_byte(60.0)], ids=["hang", "slow_first_byte"]
)
def test_a_child_killed_mid_request_leaves_the_simulator_serving(
    provider: Provider,
    agent_file: Path,
    children: list[subprocess.Popen[str]],
    held: object,
) -> None:
    sim = provider(
        [call("refund_order", {"order_id": "A1"}), held, reply("Served after the kill.")]
    )
    first = start_agent(children, agent_file, sim, "Refund A1")
    sim.wait_for_requests(2)  # the second request is held: the refund ran
    killed(first)
    second = start_agent(children, agent_file, sim, "Did my refund go through?")
    assert answered(second) == "Served after the kill."
    assert agent_file.with_name("effects.txt").read_text() == "A1\n"
    assert len(sim.requests) == 3
    assert sim.requests[2]["messages"][-1] == {
        "role": "user",
        "content": "Did my refund go through?",
    }


def test_a_child_killed_mid_stream_leaves_the_simulator_serving(
    provider: Provider, agent_file: Path, children: list[subprocess.Popen[str]]
) -> None:
    sim = provider([fail.slow_first_byte(0.0, answer=reply("word " * 20000)), reply("Next.")])
    first = start_agent(children, agent_file, sim, "Talk a lot", stream=True)
    sim.wait_for_requests(1)
    killed(first)
    second = start_agent(children, agent_file, sim, "Short, please", stream=True)
    assert answered(second) == "Next."


def test_the_cli_runs_against_it_with_base_url(provider: Provider, tmp_path: Path) -> None:
    (tmp_path / "shop_tools.py").write_text(TOOLS, encoding="utf-8")
    sim = provider([call("refund_order", {"order_id": "A1"}), reply("Refunded A1.")])
    env = child_env({"OPENAI_API_KEY": "sk-dummy"})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tooldeck.cli",
            "run",
            "Refund A1",
            "--tools",
            "shop_tools.py",
            "--model",
            "openai-chat:gpt-4.1-mini",
            "--base-url",
            sim.base_url,
            "--json",
            "--no-log",
        ],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["answer"] == "Refunded A1."
    assert [c["id"] for c in printed["calls"]] == sim.call_ids
    assert (tmp_path / "effects.txt").read_text() == "A1\n"
    (call_id,) = sim.call_ids
    assert sim.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": "order A1 refunded",
    }
    assert sim.exchanges[0].request.headers["authorization"] == "Bearer sk-dummy"


def serve(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tooldeck.testing", "serve", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_prints_its_url_first_and_serves_the_script(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    (tmp_path / "script.yaml").write_text(
        "- call: refund_order\n  arguments: {order_id: A1}\n- reply: Refunded.\n",
        encoding="utf-8",
    )
    (tmp_path / "shop_tools.py").write_text(TOOLS, encoding="utf-8")
    server = serve("script.yaml", cwd=tmp_path)
    children.append(server)
    assert server.stdout is not None
    base_url = server.stdout.readline().strip()
    assert base_url.startswith("http://127.0.0.1:")
    assert base_url.endswith("/v1")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tooldeck.cli",
            "run",
            "Refund A1",
            "--tools",
            "shop_tools.py",
            "--model",
            "openai-chat:gpt-4.1-mini",
            "--base-url",
            base_url,
            "--no-log",
            "--json",
        ],
        cwd=tmp_path,
        env=child_env({"OPENAI_API_KEY": "sk-dummy"}),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "Refunded."
    server.send_signal(signal.SIGTERM)
    _, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    log = err.splitlines()
    assert log[0].startswith("request 1 (POST /v1/chat/completions, newest message: user")
    assert "-> call refund_order [call_" in log[0]
    assert log[1].endswith("-> reply 'Refunded.'")
    assert log[-1] == "served 2 request(s); 0 step(s) left"


def test_serve_writes_its_url_to_a_file_and_names_unscripted_requests(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    import httpx

    (tmp_path / "script.json").write_text('[{"reply": "only one"}]', encoding="utf-8")
    url_file = tmp_path / "url.txt"
    server = serve("script.json", "--url-file", str(url_file), cwd=tmp_path)
    children.append(server)
    deadline = time.monotonic() + 120
    while not url_file.exists():  # written whole, by a rename
        assert server.poll() is None, server.communicate()[1]
        assert time.monotonic() < deadline, "serve wrote no URL file"
        time.sleep(0.01)
    base_url = url_file.read_text().strip()
    body = {"messages": [{"role": "user", "content": "hi"}]}
    first = httpx.post(f"{base_url}/chat/completions", json=body, timeout=60)
    assert first.json()["choices"][0]["message"]["content"] == "only one"
    second = httpx.post(f"{base_url}/chat/completions", json=body, timeout=60)
    assert second.status_code == 500
    server.send_signal(signal.SIGINT)
    out, err = server.communicate(timeout=60)
    assert out == ""
    assert server.returncode == 0
    assert "unscripted: no step left for request 2" in err


def test_serve_refuses_a_bad_script_naming_the_step_and_field(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(
        '[{"reply": "ok"}, {"fail": "cut_stream", "after_chunks": "two"}]', encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-m", "tooldeck.testing", "serve", "script.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == (
        "error: script.json: step 2: field 'after_chunks': Input should be a valid integer, "
        "got 'two'"
    )


def test_serve_on_a_port_in_use_says_so(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text('[{"reply": "ok"}]', encoding="utf-8")
    with ProviderSimulator([]) as taken:
        port = taken.base_url.rsplit(":", 1)[1].split("/")[0]
        done = subprocess.run(
            [sys.executable, "-m", "tooldeck.testing", "serve", "script.json", "--port", port],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        with pytest.raises(
            OSError, match=f"the provider simulator cannot listen on 127.0.0.1:{port}"
        ):
            ProviderSimulator([], port=int(port)).start()
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"error: the provider simulator cannot listen on 127.0.0.1:{port}: Address already in use"
    )
