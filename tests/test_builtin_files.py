"""The built-in file tools: what the model reads, and the paths that must never get out."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers import answer, call, calls
from tooldeck import Agent, Limits, ScriptedModel
from tooldeck.tools.builtin import _rooted, file_tools
from tooldeck.tools.builtin._rooted import Refused


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """root/ (the tools' root) beside outside/ (which they must never read)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE SECRET\n")
    root = tmp_path / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "main.py").write_text("import pkg\n\nprint('hello')\n")
    (root / "src" / "pkg" / "util.py").write_text("def helper():\n    return 'hello'\n")
    (root / "notes.txt").write_text("first line\nsecond line\nthird line\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("hello from git\n")
    return root


def observe(tools: list[Any], name: str, **arguments: Any) -> str:
    """What the model reads for one call of ``name`` (run by an agent, as in a real run)."""
    model = ScriptedModel([calls(call(name, **arguments)), answer("ok")])
    agent = Agent(model, tools, limits=Limits(max_duration_s=30))
    return agent.run_sync("go").tool_trace[0].result.output


def test_read_file_returns_the_text_and_line_ranges(root: Path) -> None:
    tools = file_tools(root)
    assert observe(tools, "read_file", path="notes.txt") == "first line\nsecond line\nthird line\n"
    assert (
        observe(tools, "read_file", path="notes.txt", start_line=2, end_line=2) == "second line\n"
    )
    assert observe(tools, "read_file", path="./src//main.py", start_line=3) == "print('hello')\n"
    assert observe(tools, "read_file", path="notes.txt", start_line=9) == (
        "(the file has 3 lines; start_line=9 is past its end)"
    )
    assert observe(tools, "read_file", path="notes.txt", start_line=0).startswith(
        "error[invalid_arguments]"
    )


def test_a_long_file_is_cut_at_a_line_with_how_to_read_on(root: Path) -> None:
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 1001)))
    text = observe(file_tools(root, max_output=30), "read_file", path="long.txt")
    assert text == (
        "line 1\nline 2\nline 3\nline 4\n\n[cut: the output limit was reached at line 4 of 1000; "
        "read on with start_line=5]"
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "../outside/secret.txt",
            "'../outside/secret.txt' uses '..'; give a path inside the root without '..'",
        ),
        (
            "src/../../outside/secret.txt",
            "'src/../../outside/secret.txt' uses '..'; give a path inside the root without '..'",
        ),
        (
            "/etc/passwd",
            "'/etc/passwd' is absolute; give a path relative to the root, such as 'src/main.py'",
        ),
        (
            "~/.ssh/id_rsa",
            "'~/.ssh/id_rsa' starts in a home directory; give a path relative to the root, such as 'src/main.py'",
        ),
        (
            "%2e%2e/outside/secret.txt",
            "'%2e%2e/outside/secret.txt' does not exist (no directory '%2e%2e')",
        ),
        ("..%2foutside%2fsecret.txt", "'..%2foutside%2fsecret.txt' does not exist"),
        (
            "notes.txt\x00.png",
            "'notes.txt\\x00.png' is not a usable path (it contains a NUL character)",
        ),
        ("notes.txt/x", "'notes.txt/x': 'notes.txt' is not a directory"),
    ],
)
def test_paths_that_try_to_leave_the_root_are_refused(root: Path, path: str, expected: str) -> None:
    assert observe(file_tools(root), "read_file", path=path) == f"error[tool_error]: {expected}"


def test_an_absolute_path_to_the_outside_file_itself_is_refused(root: Path) -> None:
    secret = str(root.parent / "outside" / "secret.txt")
    assert observe(file_tools(root), "read_file", path=secret) == (
        f"error[tool_error]: {secret!r} is absolute; give a path relative to the root, such as "
        "'src/main.py'"
    )


def test_symlinks_are_followed_only_while_they_stay_inside(root: Path) -> None:
    outside = root.parent / "outside"
    (root / "out").symlink_to("../outside")
    (root / "abs_out").symlink_to(outside / "secret.txt")
    (root / "abs_in").symlink_to(root / "notes.txt")
    (root / "docs").symlink_to("src/pkg")
    # a chain: l1 -> l2 -> l3 -> out/secret.txt (outside), and in1 -> in2 -> notes.txt
    (root / "l3").symlink_to("out/secret.txt")
    (root / "l2").symlink_to("l3")
    (root / "l1").symlink_to("l2")
    (root / "in2").symlink_to("src/../notes.txt")
    (root / "in1").symlink_to("in2")
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    tools = file_tools(root)

    def read(path: str) -> str:
        return observe(tools, "read_file", path=path)

    assert read("out/secret.txt") == (
        "error[tool_error]: 'out/secret.txt' leads outside the root: the symlink 'out' points "
        "to '../outside'"
    )
    assert read("abs_out") == (
        f"error[tool_error]: 'abs_out' leads outside the root: the symlink 'abs_out' points to "
        f"{str(outside / 'secret.txt')!r}"
    )
    assert read("l1") == (
        "error[tool_error]: 'l1' leads outside the root: the symlink 'out' points to '../outside'"
    )
    assert read("loop1") == "error[tool_error]: 'loop1': too many symlinks (a loop?)"
    assert read("abs_in") == read("in1") == "first line\nsecond line\nthird line\n"
    assert read("docs/util.py") == "def helper():\n    return 'hello'\n"


def test_devices_fifos_and_sockets_are_not_opened(root: Path) -> None:
    os.mkfifo(root / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "sock"))
    try:
        tools = file_tools(root)
        # a FIFO with no writer would block an open for reading forever: it must not be opened
        assert observe(tools, "read_file", path="pipe") == (
            "error[tool_error]: 'pipe' is not a regular file (FIFO); it is not opened"
        )
        assert observe(tools, "read_file", path="sock") == (
            "error[tool_error]: 'sock' is not a regular file (socket); it is not opened"
        )
    finally:
        server.close()
    devices = file_tools("/dev")
    assert observe(devices, "read_file", path="zero") == (
        "error[tool_error]: 'zero' is not a regular file (character device); it is not opened"
    )


def test_over_size_and_binary_files_are_described_not_dumped(root: Path) -> None:
    (root / "big.log").write_bytes(b"x" * 2000)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    tools = file_tools(root, max_bytes=1000)

    assert observe(tools, "read_file", path="big.log") == (
        "error[tool_error]: 'big.log' is 2,000 bytes, over this tool's limit of 1,000 bytes: it "
        "is not read"
    )
    assert observe(tools, "read_file", path="logo.png") == (
        "'logo.png' is a binary file (a PNG image, 264 bytes, not UTF-8 text): its content is "
        "not shown"
    )
    assert observe(tools, "read_file", path="latin1.txt") == (
        "'latin1.txt' is a binary file (binary data, 4 bytes, not UTF-8 text): its content is "
        "not shown"
    )
    assert observe(tools, "read_file", path="src") == (
        "error[tool_error]: 'src' is a directory; use list_dir to see what it holds"
    )


def test_list_dir_shows_kinds_sizes_and_symlink_targets(root: Path) -> None:
    (root / "out").symlink_to("../outside")
    os.mkfifo(root / "pipe")
    tools = file_tools(root)
    assert observe(tools, "list_dir") == (
        ".git/\nnotes.txt  (34 bytes)\nout -> ../outside\npipe  (FIFO)\nsrc/"
    )
    assert observe(tools, "list_dir", path="src") == "main.py  (27 bytes)\npkg/"
    assert observe(tools, "list_dir", path="out") == (
        "error[tool_error]: 'out' leads outside the root: the symlink 'out' points to '../outside'"
    )
    assert observe(tools, "list_dir", path="notes.txt") == (
        "error[tool_error]: 'notes.txt' is a file, not a directory"
    )


def test_search_files_matches_names_and_contents_but_never_follows_links_out(root: Path) -> None:
    (root / "out").symlink_to("../outside")
    (root / "secret_link.txt").symlink_to("../outside/secret.txt")
    tools = file_tools(root)

    assert observe(tools, "search_files", pattern="*.py") == (
        "files named like '*.py':\nsrc/main.py\nsrc/pkg/util.py"
    )
    assert observe(tools, "search_files", pattern="hello", path="src") == (
        "lines containing 'hello':\nsrc/main.py:3: print('hello')\nsrc/pkg/util.py:2: return 'hello'"
    )
    assert observe(tools, "search_files", pattern="pkg") == (
        "files named like 'pkg':\nsrc/pkg/\n\nlines containing 'pkg':\nsrc/main.py:1: import pkg"
    )
    assert observe(tools, "search_files", pattern="SECRET") == (
        "no file name matches 'SECRET' and no file contains it"
    )


def test_write_and_edit_are_there_only_when_writable(root: Path) -> None:
    assert observe(file_tools(root), "write_file", path="x.txt", content="hi").startswith(
        "error[unknown_tool]: there is no tool named 'write_file'"
    )
    assert not (root / "x.txt").exists()


def test_write_file_makes_directories_and_replaces_files_atomically(root: Path) -> None:
    tools = file_tools(root, writable=True)
    os.chmod(root / "notes.txt", 0o600)
    assert observe(tools, "write_file", path="new/deep/a.txt", content="é") == (
        "wrote 2 bytes to 'new/deep/a.txt' (new file)"
    )
    assert observe(tools, "write_file", path="notes.txt", content="replaced\n") == (
        "wrote 9 bytes to 'notes.txt' (replaced)"
    )
    assert (root / "new" / "deep" / "a.txt").read_text() == "é"
    assert (root / "notes.txt").read_text() == "replaced\n"
    assert (root / "notes.txt").stat().st_mode & 0o777 == 0o600  # the mode is kept
    assert sorted(p.name for p in root.iterdir() if "tooldeck-tmp" in p.name) == []


def test_write_file_refuses_to_write_outside_or_onto_special_files(root: Path) -> None:
    (root / "out").symlink_to("../outside")
    (root / "secret_link.txt").symlink_to("../outside/secret.txt")
    os.mkfifo(root / "pipe")
    tools = file_tools(root, writable=True, max_bytes=100)

    def write(path: str, content: str = "pwned") -> str:
        return observe(tools, "write_file", path=path, content=content)

    assert write("out/secret.txt") == (
        "error[tool_error]: 'out/secret.txt' leads outside the root: the symlink 'out' points "
        "to '../outside'"
    )
    assert write("secret_link.txt") == (
        "error[tool_error]: 'secret_link.txt' leads outside the root: the symlink "
        "'secret_link.txt' points to '../outside/secret.txt'"
    )
    assert write("pipe") == "error[tool_error]: 'pipe' is a FIFO; it is not written"
    assert write("src") == "error[tool_error]: 'src' is a directory; it is not written"
    assert write("big.txt", "x" * 101) == (
        "error[tool_error]: the content is 101 bytes, over the limit of 100"
    )
    assert (root.parent / "outside" / "secret.txt").read_text() == "OUTSIDE SECRET\n"


def test_edit_file_replaces_one_exact_unique_text(root: Path) -> None:
    (root / "link.py").symlink_to("src/main.py")
    tools = file_tools(root, writable=True)

    def edit(path: str, old: str, new: str) -> str:
        return observe(tools, "edit_file", path=path, old=old, new=new)

    assert edit("link.py", "print('hello')", "print('bye')") == (
        "edited 'link.py': replaced 1 occurrence (at line 3)"
    )
    assert (root / "src" / "main.py").read_text() == "import pkg\n\nprint('bye')\n"
    assert (root / "link.py").is_symlink()  # the link still points at the file it edited
    assert edit("notes.txt", "line", "row") == (
        "error[tool_error]: the text to replace occurs 3 times in 'notes.txt'; include more of "
        "the surrounding text so that it occurs once"
    )
    assert edit("notes.txt", "fourth", "x") == (
        "error[tool_error]: the text to replace was not found in 'notes.txt'; read the file and "
        "copy the exact text, whitespace included"
    )
    assert edit("notes.txt", "", "x") == (
        "error[tool_error]: old is empty; give the exact text to replace"
    )


def test_a_symlink_swapped_in_while_reading_never_leads_out(root: Path) -> None:
    """A racing thread flips ``d`` between a directory inside and one outside the root."""
    (root / "inside").mkdir()
    (root / "inside" / "secret.txt").write_text("inside\n")
    (root / "d").symlink_to("inside")
    read_file = file_tools(root)[0]
    stop = threading.Event()

    def flip() -> None:
        targets = ["inside", "../outside"]
        n = 0
        while not stop.is_set():
            tmp = root / f".flip{n}"
            tmp.symlink_to(targets[n % 2])
            os.replace(tmp, root / "d")
            n += 1

    flipper = threading.Thread(target=flip)
    flipper.start()
    seen: set[str] = set()
    try:
        for _ in range(300):
            try:
                seen.add(read_file("d/secret.txt"))
            except Refused as refused:
                seen.add(type(refused).__name__)
    finally:
        stop.set()
        flipper.join()
    assert "OUTSIDE SECRET\n" not in seen
    assert seen <= {"inside\n", "Refused"}


def test_a_component_that_becomes_a_symlink_after_its_check_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic check-then-use race: ``src`` is checked (not a link), then swapped for a
    link to the outside before it is opened; the open (O_NOFOLLOW) refuses it."""
    checked = _rooted._link_target

    def swap_after_check(directory: int, name: str) -> str | None:
        target = checked(directory, name)
        if name == "src":
            os.rename(root / "src", root / "src_moved")
            (root / "src").symlink_to("../outside")
        return target

    monkeypatch.setattr(_rooted, "_link_target", swap_after_check)
    assert observe(file_tools(root), "read_file", path="src/secret.txt") == (
        "error[tool_error]: 'src/secret.txt' changed while it was being opened; try again"
    )


def test_a_file_that_becomes_a_symlink_after_its_check_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = _rooted._refuse_special

    def swap_after_check(shown: str, mode: int) -> None:
        checked(shown, mode)
        os.replace(root / "notes.txt", root / "notes.bak")
        (root / "notes.txt").symlink_to("../outside/secret.txt")

    monkeypatch.setattr(_rooted, "_refuse_special", swap_after_check)
    assert observe(file_tools(root), "read_file", path="notes.txt") == (
        "error[tool_error]: 'notes.txt' changed while it was being opened; try again"
    )


def test_a_root_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"root '.*nope' is not a directory; give an existing one"):
        file_tools(tmp_path / "nope")
