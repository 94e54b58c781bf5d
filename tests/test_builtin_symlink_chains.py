"""Chains of symlinks under the file tools' root: one walk for reads, writes, edits and
listings, so a write lands where a read of the same path looks, or both are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import answer, call, calls
from tooldeck import Agent, Limits, ScriptedModel
from tooldeck.tools.builtin import file_tools


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """root/ (with docs/ and data/) beside outside/ (which the tools must never touch)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE SECRET\n")
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "a.txt").write_text("alpha\n")
    return root


def observe(tools: list[Any], name: str, **arguments: Any) -> str:
    """What the model reads for one call of ``name``."""
    model = ScriptedModel([calls(call(name, **arguments)), answer("ok")])
    agent = Agent(model, tools, limits=Limits(max_duration_s=30))
    return agent.run_sync("go").tool_trace[0].result.output


def every_file(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


@pytest.mark.parametrize("last_hop", ["relative", "absolute"])
def test_a_chain_that_ends_outside_is_refused_alike_for_every_tool(
    root: Path, last_hop: str
) -> None:
    outside = root.parent / "outside"
    target = "../outside" if last_hop == "relative" else str(outside)
    (root / "link_out").symlink_to(target)
    (root / "docs" / "chain").symlink_to(root / "link_out")  # absolute, inside the root
    before_root, before_outside = every_file(root), every_file(outside)
    tools = file_tools(root, writable=True)

    refusal = (
        "error[tool_error]: {path!r} leads outside the root: the symlink 'link_out' points "
        f"to {target!r}"
    )
    new = "docs/chain/new.txt"
    assert observe(tools, "write_file", path=new, content="hello") == refusal.format(path=new)
    assert observe(tools, "read_file", path=new) == refusal.format(path=new)
    secret = "docs/chain/secret.txt"
    assert observe(tools, "read_file", path=secret) == refusal.format(path=secret)
    edited = observe(tools, "edit_file", path=secret, old="SECRET", new="gone")
    assert edited == refusal.format(path=secret)
    assert observe(tools, "list_dir", path="docs/chain") == refusal.format(path="docs/chain")
    assert every_file(root) == before_root  # no docs/link_out/new.txt, nothing made
    assert every_file(outside) == before_outside
    assert (outside / "secret.txt").read_text() == "OUTSIDE SECRET\n"


@pytest.mark.parametrize("first_hop", ["relative", "absolute"])
def test_a_chain_that_stays_inside_reads_and_writes_the_same_file(
    root: Path, first_hop: str
) -> None:
    (root / "link_in").symlink_to("data")
    first = "../link_in" if first_hop == "relative" else str(root / "link_in")
    (root / "docs" / "chain").symlink_to(first)
    tools = file_tools(root, writable=True)

    assert observe(tools, "read_file", path="docs/chain/a.txt") == "alpha\n"
    wrote = observe(tools, "write_file", path="docs/chain/new.txt", content="hello")
    assert wrote == "wrote 5 bytes to 'docs/chain/new.txt' (new file)"
    assert (root / "data" / "new.txt").read_text() == "hello"
    assert observe(tools, "read_file", path="docs/chain/new.txt") == "hello"
    edited = observe(tools, "edit_file", path="docs/chain/a.txt", old="alpha", new="beta")
    assert edited == "edited 'docs/chain/a.txt': replaced 1 occurrence (at line 1)"
    assert (root / "data" / "a.txt").read_text() == "beta\n"
    listing = observe(tools, "list_dir", path="docs/chain")
    assert listing == "a.txt  (5 bytes)\nnew.txt  (5 bytes)"
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["chain"]  # nothing made there


def test_a_dangling_link_inside_is_written_through_and_read_back(root: Path) -> None:
    (root / "docs" / "dangling").symlink_to("missing.txt")
    (root / "docs" / "far").symlink_to(root / "made" / "deep.txt")  # absolute, dirs missing
    tools = file_tools(root, writable=True)

    assert observe(tools, "read_file", path="docs/dangling") == (
        "error[tool_error]: 'docs/dangling' does not exist"
    )
    assert observe(tools, "list_dir", path="docs") == (
        f"dangling -> missing.txt\nfar -> {root / 'made' / 'deep.txt'}"
    )
    wrote = observe(tools, "write_file", path="docs/dangling", content="made")
    assert wrote == "wrote 4 bytes to 'docs/dangling' (new file)"
    assert (root / "docs" / "missing.txt").read_text() == "made"
    assert (root / "docs" / "dangling").is_symlink()
    assert observe(tools, "read_file", path="docs/dangling") == "made"

    assert observe(tools, "write_file", path="docs/far", content="far") == (
        "wrote 3 bytes to 'docs/far' (new file)"
    )
    assert (root / "made" / "deep.txt").read_text() == "far"


@pytest.mark.parametrize("spelling", ["relative", "absolute"])
def test_a_dangling_link_that_points_outside_is_refused_and_makes_nothing(
    root: Path, spelling: str
) -> None:
    outside = root.parent / "outside"
    target = "../../outside/none.txt" if spelling == "relative" else str(outside / "none.txt")
    (root / "docs" / "away").symlink_to(target)
    tools = file_tools(root, writable=True)

    for name, arguments in [
        ("write_file", {"content": "x"}),
        ("read_file", {}),
        ("edit_file", {"old": "a", "new": "b"}),
    ]:
        text = observe(tools, name, path="docs/away", **arguments)
        assert text.startswith("error[tool_error]: 'docs/away' leads outside the root: "), text
    assert not (outside / "none.txt").exists()
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["away"]


def test_absolute_targets_may_spell_the_root_as_it_was_given(root: Path) -> None:
    """A root given through a symlink: a link naming the root by that path stays inside."""
    alias = root.parent / "alias"
    alias.symlink_to(root)
    (root / "docs" / "chain").symlink_to(alias / "data")
    tools = file_tools(alias, writable=True)

    assert observe(tools, "read_file", path="docs/chain/a.txt") == "alpha\n"
    observe(tools, "write_file", path="docs/chain/b.txt", content="bee")
    assert (root / "data" / "b.txt").read_text() == "bee"
