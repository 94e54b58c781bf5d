"""The ``tooldeck`` command line: ``main.py`` parses the command and hands it to its module
(``run.py``, ``chat.py``, ``logs.py``, ...); ``display.py`` draws a run on the terminal.

The top room: it may import everything below it, and nothing imports it.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "main":  # `tooldeck.cli:main`, the entry point before 0.2
        from tooldeck.cli.main import main

        return main
    raise AttributeError(f"module 'tooldeck.cli' has no attribute {name!r}")
