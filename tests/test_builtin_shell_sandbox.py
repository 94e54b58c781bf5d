"""What a shell command can reach: the environment's allow-list, and bubblewrap's sandbox.

The sandbox tests need ``bwrap`` (Debian's ``bubblewrap``): the session fixture installs it
with apt-get when it is missing (as root, as CI runs), and fails, never skips, when it
cannot.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import answer, call, calls
from tooldeck import Agent, Limits, ScriptedModel
from tooldeck.tools.builtin import shell_tool

SYSTEM_PYTHON = "/usr/bin/python3"
"""A Python the sandbox can see (the test's own may live in a venv outside the root)."""


@pytest.fixture(scope="session")
def bubblewrap() -> str:
    """The bwrap program, installed with apt-get if missing (a clear failure if it can't be)."""
    found = shutil.which("bwrap")
    if found is not None:
        return found
    if os.geteuid() != 0:
        pytest.fail("these tests need bubblewrap: run `apt-get install -y bubblewrap` as root")
    install = ["apt-get", "install", "-y", "-q", "bubblewrap"]
    done = subprocess.run(install, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:  # the package lists may be missing or stale
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=600, check=False)
        done = subprocess.run(install, capture_output=True, text=True, timeout=600, check=False)
    found = shutil.which("bwrap")
    if found is None:
        pytest.fail(f"apt-get could not install bubblewrap:\n{done.stdout}\n{done.stderr}")
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """root/ (the tool's root) beside outside/secret.txt (which a command must not read)."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("OUTSIDE SECRET\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("inside\n")
    return root


def observe(shell: Any, command: str) -> str:
    """What the model reads for one shell call (approval opted out by the caller)."""
    model = ScriptedModel([calls(call("shell", command=command)), answer("ok")])
    result = Agent(model, [shell], limits=Limits(max_duration_s=60)).run_sync("go")
    return result.tool_trace[0].result.output


def environment(text: str) -> dict[str, str]:
    """``env``'s output (after the exit code line) as a dict."""
    lines = text.splitlines()
    assert lines[0] == "exit code: 0", text
    return dict(line.split("=", 1) for line in lines[1:] if line)


@pytest.mark.parametrize("sandbox", ["none", "bubblewrap"])
def test_a_command_gets_an_allow_listed_environment_never_the_parents_keys(
    project: Path, sandbox: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if sandbox == "bubblewrap":
        request.getfixturevalue("bubblewrap")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("EDITOR_THEME", "dark")
    shell = shell_tool(project, requires_approval=False, sandbox=sandbox)  # type: ignore[arg-type]
    seen = environment(observe(shell, "/usr/bin/env"))

    assert "OPENAI_API_KEY" not in seen
    assert "EDITOR_THEME" not in seen
    assert seen["HOME"] == str(project)
    assert seen["LANG"] == "C.UTF-8"
    assert seen["PATH"] == os.environ["PATH"]
    allowed = {"HOME", "PATH", "LANG", "TERM", "TZ", "USER", "LOGNAME", "LC_ALL"}
    assert set(seen) - {"PWD"} <= allowed  # bwrap sets PWD


def test_the_allow_list_can_be_extended_and_variables_set(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDITOR_THEME", "dark")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    shell = shell_tool(
        project, requires_approval=False, pass_env=["EDITOR_THEME"], env={"GREETING": "hej"}
    )
    seen = environment(observe(shell, "/usr/bin/env"))
    assert (seen["EDITOR_THEME"], seen["GREETING"]) == ("dark", "hej")
    assert "OPENAI_API_KEY" not in seen
    everything = shell_tool(project, requires_approval=False, pass_env=os.environ)
    assert environment(observe(everything, "/usr/bin/env"))["OPENAI_API_KEY"] == "sk-secret"


def test_without_a_sandbox_a_command_still_reads_outside_the_root(project: Path) -> None:
    """What "none" does not confine, shown: the docs say so, this proves it."""
    shell = shell_tool(project, requires_approval=False, sandbox="none")
    assert observe(shell, "cat ../outside/secret.txt") == "exit code: 0\nOUTSIDE SECRET\n"


def test_the_sandbox_shows_the_root_and_the_system_only(project: Path, bubblewrap: str) -> None:
    shell = shell_tool(project, requires_approval=False, sandbox="bubblewrap", shell=True)
    outside = project.parent / "outside" / "secret.txt"

    assert observe(shell, "cat ../outside/secret.txt") == (
        "exit code: 1\ncat: ../outside/secret.txt: No such file or directory\n"
    )
    assert observe(shell, f"cat {outside}") == (
        f"exit code: 1\ncat: {outside}: No such file or directory\n"
    )
    assert observe(shell, "cat notes.txt && echo made > new.txt") == "exit code: 0\ninside\n"
    assert (project / "new.txt").read_text() == "made\n"
    assert observe(shell, "touch /usr/evil").startswith("exit code: 1\ntouch: cannot touch")
    assert not Path("/usr/evil").exists()
    assert observe(shell, f"ls {Path.cwd()}").startswith("exit code: 2\nls: cannot access")
    assert observe(shell, "ls /tmp") == "exit code: 0\n" + _tmp_listing(project)


def _tmp_listing(root: Path) -> str:
    """What ``ls /tmp`` shows in the sandbox: an empty /tmp, but for the root's own path."""
    parts = root.relative_to("/").parts
    return f"{parts[1]}\n" if parts[0] == "tmp" else "(no output)"


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections; yields its port."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def test_the_sandbox_has_no_network(project: Path, bubblewrap: str, listener: int) -> None:
    connect = (
        f"{SYSTEM_PYTHON} -c \"import socket; socket.create_connection(('127.0.0.1', "
        f"{listener}), timeout=5); print('connected')\""
    )
    free = shell_tool(project, requires_approval=False, sandbox="none")
    assert observe(free, connect) == "exit code: 0\nconnected\n"
    boxed = shell_tool(project, requires_approval=False, sandbox="bubblewrap")
    text = observe(boxed, connect)
    assert text.startswith("exit code: 1\n"), text
    assert "ConnectionRefusedError" in text or "Network is unreachable" in text


def test_a_sandboxed_command_past_its_timeout_is_killed_with_all_it_started(
    project: Path, bubblewrap: str
) -> None:
    marker = f"tooldeck-sandbox-{time.monotonic_ns()}"
    shell = shell_tool(
        project, requires_approval=False, sandbox="bubblewrap", shell=True, timeout=1
    )
    command = f"sleep 600 & {SYSTEM_PYTHON} -c 'import time; time.sleep(600)' {marker}"
    text = observe(shell, command)
    assert text.startswith("error[tool_error]: the command did not finish within 1 s"), text
    deadline = time.monotonic() + 15
    while _running_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running_with(marker)


def _running_with(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
        except OSError:
            continue
    return False


def test_auto_uses_bubblewrap_where_it_runs_and_says_so(project: Path, bubblewrap: str) -> None:
    shell = shell_tool(project, requires_approval=False, sandbox="auto")
    assert "It runs in a sandbox" in shell.description
    assert observe(shell, "cat ../outside/secret.txt").startswith("exit code: 1\n")
    plain = shell_tool(project, requires_approval=False)
    assert "sandbox" not in plain.description


def test_without_bwrap_bubblewrap_is_refused_and_auto_runs_unconfined(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(project))  # no bwrap there
    with pytest.raises(ValueError, match="bwrap") as raised:
        shell_tool(project, sandbox="bubblewrap")
    assert str(raised.value) == (
        "shell_tool(sandbox='bubblewrap') needs the bwrap program, which is not on PATH: "
        "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or choose "
        "sandbox='none'"
    )
    shell = shell_tool(project, requires_approval=False, sandbox="auto")
    assert "sandbox" not in shell.description


def test_a_bwrap_that_cannot_start_a_sandbox_is_refused_with_its_reason(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where user namespaces are off, bwrap fails as this stand-in does (same message)."""
    programs = tmp_path / "bin"
    programs.mkdir()
    failing = programs / "bwrap"
    failing.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    failing.chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}:{os.environ['PATH']}")
    with pytest.raises(ValueError, match="bwrap") as raised:
        shell_tool(project, sandbox="bubblewrap")
    assert str(raised.value) == (
        f"shell_tool(sandbox='bubblewrap'): {failing} cannot start a sandbox here: it exited "
        "with 1 (bwrap: No permissions to create new namespace) (it needs user namespaces: in "
        "a container, allow them or run bwrap as root; sysctl "
        "kernel.unprivileged_userns_clone=1 on some kernels), or choose sandbox='none'"
    )
    assert "sandbox" not in shell_tool(project, sandbox="auto").description


def test_an_unknown_sandbox_mode_and_a_string_of_names_are_refused(project: Path) -> None:
    with pytest.raises(ValueError, match="sandbox must be 'auto', 'bubblewrap' or 'none'"):
        shell_tool(project, sandbox="docker")  # type: ignore[arg-type]
    with pytest.raises(TypeError) as raised:
        shell_tool(project, pass_env="GIT_DIR")
    assert str(raised.value) == (
        "pass_env must be a list of variable names, got the string 'GIT_DIR'"
    )
