"""The MCP tests' npm packages: a machine that cannot install them fails the tests, saying
why (they are never skipped)."""

from __future__ import annotations

from pathlib import Path

import pytest

import _npm


def fresh_install() -> Path:
    return _npm.installed.__wrapped__()


def test_no_npm_on_path_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDECK_NPM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(_npm.NpmUnavailable) as raised:
        fresh_install()
    assert str(raised.value) == (
        "npm is not on PATH: the tests run npm packages (tests/npm); install Node.js 20+ with npm"
    )


def test_a_failing_npm_ci_is_reported_with_npm_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin" / "npm"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'npm error code E404' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TOOLDECK_NPM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(_npm.NpmUnavailable) as raised:
        fresh_install()
    message = str(raised.value)
    assert message.startswith(f"npm ci failed in {tmp_path / 'cache'}")
    assert message.endswith("(exit 1):\nnpm error code E404")
    assert not list((tmp_path / "cache").glob("*/.installed"))  # tried again next time
