"""The built-in tools from the command line: ``--tools tooldeck.tools.builtin:files``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body, completion_chunks


def tooldeck(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
    )


def test_tools_lists_the_read_only_file_tools(tmp_path: Path) -> None:
    done = tooldeck("tools", "tooldeck.tools.builtin:files", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [spec["name"] for spec in json.loads(done.stdout)] == [
        "read_file",
        "list_dir",
        "search_files",
    ]


def test_run_uses_the_file_tools_rooted_in_the_working_directory(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    (tmp_path / "hello.txt").write_text("hi there\n")
    server.reply(
        Reply(
            events=completion_chunks(
                completion_body(None, [chat_call("call_1", "list_dir", '{"path": "."}')])
            )
        ),
        Reply(
            events=completion_chunks(
                completion_body(None, [chat_call("call_2", "read_file", '{"path": "../x"}')])
            )
        ),
        Reply(events=completion_chunks(completion_body("There is hello.txt."))),
    )
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test-key"}
    done = tooldeck(
        "run",
        "What is here?",
        "--tools",
        "tooldeck.tools.builtin:files",
        "--model",
        "openai-chat:gpt-test",
        cwd=tmp_path,
        env=env,
    )

    assert done.returncode == 0, done.stderr
    assert '→ list_dir(path=".")' in done.stdout
    assert "← hello.txt (9 bytes)" in done.stdout  # the display folds spaces
    # The person sees the exception; the model read its message (the tools' on_error).
    assert "✗ Refused: '../x' uses '..'; give a path inside the root" in done.stdout
    assert "the model read" not in done.stdout
    assert "answer: There is hello.txt." in done.stdout
    tool_messages = [m for m in server.bodies[1]["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        {"role": "tool", "tool_call_id": "call_1", "content": "hello.txt  (9 bytes)"}
    ]
