"""What a shell command may reach: an environment made from an allow-list, and (with
bubblewrap) a sandbox that shows it the system read-only, the root writable, and nothing else.

``none``: the command runs as this process's user with only the working directory inside
the root — it can read and write whatever that user can, and use the network. Its
environment is still the allow-list's, so this process's secrets (API keys) are not in it.

``bubblewrap``: ``bwrap`` (Debian's ``bubblewrap``) starts it in new namespaces: /usr, /etc
(and the /bin, /lib... links to /usr) read-only, the root read-write at its own path, a
fresh /proc, /dev and an empty /tmp, no other file; no network (a namespace of its own,
loopback alone), no capabilities, its own process tree, which dies with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Sandbox = Literal["auto", "bubblewrap", "none"]
"""``"none"``: no sandbox; ``"bubblewrap"``: always (refused where bwrap cannot run);
``"auto"``: bubblewrap where it runs, else none."""

PASSED_ENV = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_COLLATE",
    "LC_MESSAGES",
    "LC_NUMERIC",
    "LC_TIME",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
)
"""The variables a command gets from this process by default (``HOME`` is the root)."""

_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_READ_ONLY = ("/usr", "/etc")
_PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Confinement:
    """How one shell tool starts its commands."""

    root: str
    env: dict[str, str]
    """The commands' whole environment."""
    bwrap: str | None
    """The bwrap program when commands run in its sandbox; None: no sandbox."""

    def argv(self, command: list[str], cwd: str) -> list[str]:
        """The command line to start: the command itself, or bwrap around it."""
        if self.bwrap is None:
            return command
        return [self.bwrap, *_sandbox_options(self.root, cwd), "--", *command]

    def description(self) -> str:
        """What the model is told about where its commands run."""
        if self.bwrap is None:
            return ""
        return (
            " It runs in a sandbox: only the project root (writable) and the system "
            "(read-only) are there, /tmp is empty, and there is no network."
        )


def confinement(
    root: str, sandbox: Sandbox, env: Mapping[str, str] | None, pass_env: Iterable[str]
) -> Confinement:
    """The confinement of a shell tool rooted at ``root`` (a real path), checked now."""
    if sandbox not in ("auto", "bubblewrap", "none"):
        raise ValueError(f"sandbox must be 'auto', 'bubblewrap' or 'none', got {sandbox!r}")
    if isinstance(pass_env, str):
        raise TypeError(f"pass_env must be a list of variable names, got the string {pass_env!r}")
    names = (*PASSED_ENV, *pass_env)
    made = {name: os.environ[name] for name in names if name in os.environ}
    made["HOME"] = root
    made.setdefault("PATH", os.defpath)
    made.update(env or {})
    bwrap = None if sandbox == "none" else _working_bwrap(root, required=sandbox == "bubblewrap")
    return Confinement(root, made, bwrap)


def _working_bwrap(root: str, *, required: bool) -> str | None:
    """bwrap's path if it starts a sandbox here; None (auto) or why not (required)."""
    program = shutil.which("bwrap")
    if program is None:
        if not required:
            return None
        raise ValueError(
            "shell_tool(sandbox='bubblewrap') needs the bwrap program, which is not on PATH: "
            "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or choose "
            "sandbox='none'"
        )
    problem = _probe(program, root)
    if problem is None:
        return program
    if not required:
        return None
    raise ValueError(
        f"shell_tool(sandbox='bubblewrap'): {program} cannot start a sandbox here: {problem} "
        "(it needs user namespaces: in a container, allow them or run bwrap as root; "
        "sysctl kernel.unprivileged_userns_clone=1 on some kernels), or choose sandbox='none'"
    )


def _probe(program: str, root: str) -> str | None:
    """Start ``true`` in the sandbox commands get: None if it ran, else bwrap's complaint."""
    command = [program, *_sandbox_options(root, root), "--", "true"]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{type(error).__name__}: {error}"
    if done.returncode == 0:
        return None
    said = (done.stderr or done.stdout).strip() or "no message"
    return f"it exited with {done.returncode} ({said})"


def _sandbox_options(root: str, cwd: str) -> list[str]:
    options = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    for path in _SYSTEM_READ_ONLY:
        options += ["--ro-bind-try", path, path]
    for path in _SYSTEM_LINKS:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    options += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    options += ["--bind", root, root, "--chdir", cwd]
    return options
