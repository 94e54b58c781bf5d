"""The test harness itself: a pty test that fails leaves no process behind it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from _pty import Terminal, kill_leftovers

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def test_finish_kills_a_command_that_does_not_end(tmp_path: Path) -> None:
    terminal = Terminal(SLEEPER, tmp_path, os.environ)
    with pytest.raises(AssertionError, match="did not end within 1 s"):
        terminal.finish(timeout=1)
    assert terminal.process.poll() is not None


def test_expect_kills_a_command_that_never_shows_the_text(tmp_path: Path) -> None:
    terminal = Terminal(SLEEPER, tmp_path, os.environ)
    with pytest.raises(AssertionError, match="'ready' never appeared"):
        terminal.expect("ready", timeout=1)
    assert terminal.process.poll() is not None


def test_a_command_a_test_left_running_is_killed_after_it(tmp_path: Path) -> None:
    terminal = Terminal(SLEEPER, tmp_path, os.environ)
    assert kill_leftovers() == [str(SLEEPER)]
    assert terminal.process.poll() is not None
    assert kill_leftovers() == []
