"""What the command-line tests at a terminal share: the command line of a verb on a module
``tools.py`` against the loopback OpenAI server, its environment, and the text a call cut off
by Ctrl-C is answered with."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from _openai_server import FakeOpenAI
from helpers import MAY_HAVE_RUN

CANCELLED_BY_CTRL_C = (
    "error[cancelled]: the run was cancelled (interrupted by Ctrl-C) before this call finished"
    + MAY_HAVE_RUN
)


def environment(server: FakeOpenAI, workdir: Path) -> dict[str, str]:
    """This process's environment without OpenAI's variables, pointed at ``server``, with
    the command's data in ``workdir/home``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
    env |= {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"}
    return env | {"TOOLDECK_HOME": str(workdir / "home")}


def command(verb: str, *extra: str) -> list[str]:
    """``tooldeck VERB EXTRA... --tools tools.py`` on the loopback server's model."""
    return [
        sys.executable, "-m", "tooldeck.cli", verb, *extra,
        "--tools", "tools.py", "--model", "openai-chat:gpt-test",
    ]  # fmt: skip
