"""File tools rooted in one directory: read, list and search; write and edit when allowed.

Every path is resolved inside the root (``_rooted``): ``..``, absolute paths, symlinks that
lead out, devices, FIFOs, sockets and files over ``max_bytes`` are refused with a line the
model can act on; binary files are described, not dumped.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import secrets
import stat
from typing import Annotated, Any

from pydantic import Field

from tooldeck.tools.builtin._rooted import (
    Located,
    Refused,
    Root,
    file_kind,
    open_directory,
    open_regular,
    read_all,
)
from tooldeck.tools.function import FunctionTool, tool
from tooldeck.tools.options import Trust

_SNIFF = 8192
_MAX_ENTRIES = 500
_MAX_MATCHES = 100
_MAX_SCANNED = 5000
_LINE_CHARS = 200

Line = Annotated[int | None, Field(ge=1)]


def file_tools(
    root: str | os.PathLike[str],
    *,
    writable: bool = False,
    max_bytes: int = 1_000_000,
    max_output: int = 50_000,
    trust: Trust = "trusted",
) -> list[FunctionTool[..., Any]]:
    """Tools to read, list and search the files under ``root`` (and write and edit them).

    Args:
        root: The directory the tools may not leave.
        writable: Add ``write_file`` and ``edit_file``.
        max_bytes: Files larger than this are not read, searched or written.
        max_output: At most this many characters of a file are returned per call; the model
            is told where the cut is and how to read on.
        trust: ``"untrusted"`` when the files hold what others wrote (the read tools' results
            then taint the conversation; the write tools have ``side_effects=True``).

    Returns:
        ``read_file(path, start_line=None, end_line=None)``, ``list_dir(path=".")``,
        ``search_files(pattern, path=".")`` and, with ``writable=True``,
        ``write_file(path, content)`` and ``edit_file(path, old, new)``.

    Examples:
        >>> import tempfile
        >>> from tooldeck.tools.builtin import file_tools
        >>> [t.name for t in file_tools(tempfile.gettempdir(), writable=True)]
        ['read_file', 'list_dir', 'search_files', 'write_file', 'edit_file']
    """
    rooted = Root(root)
    if max_bytes < 1 or max_output < 1:
        raise ValueError(
            f"max_bytes and max_output must be positive, got {max_bytes}, {max_output}"
        )
    tools = [
        _read_file(rooted, max_bytes, max_output, trust),
        _list_dir(rooted),
        _search_files(rooted, max_bytes, trust),
    ]
    if writable:
        tools += [_write_file(rooted, max_bytes), _edit_file(rooted, max_bytes)]
    return tools


def explain(error: Exception) -> str:
    """The model's text for a file or shell tool's failure (``on_error``)."""
    if isinstance(error, Refused):
        return str(error)
    if isinstance(error, OSError):
        where = f"{error.filename!r}: " if error.filename else ""
        return f"{where}{error.strerror or type(error).__name__}"
    return f"the tool failed ({type(error).__name__}); try another way"


def _read_file(root: Root, max_bytes: int, max_output: int, trust: Trust) -> FunctionTool[..., str]:
    @tool(on_error=explain, trust=trust)
    def read_file(path: str, start_line: Line = None, end_line: Line = None) -> str:
        """Read a text file.

        Args:
            path: The file, relative to the root (e.g. "src/main.py").
            start_line: The first line to read (1-based); from the start when omitted.
            end_line: The last line to read (inclusive); to the end when omitted.
        """
        with root.locate(path) as located:
            data = _read(located, max_bytes)
        text = _text(data)
        if text is None:
            return _describe_binary(path, data)
        return _lines(text, start_line or 1, end_line, max_output)

    return read_file


def _read(located: Located, max_bytes: int) -> bytes:
    descriptor, size = open_regular(located, max_bytes)
    try:
        return read_all(descriptor, size)
    finally:
        os.close(descriptor)


def _text(data: bytes) -> str | None:
    """The file's text, or None for a binary file (a NUL byte, or not UTF-8)."""
    if b"\x00" in data[:_SNIFF]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _describe_binary(path: str, data: bytes) -> str:
    magic = {
        b"\x89PNG": "a PNG image",
        b"\xff\xd8\xff": "a JPEG image",
        b"GIF8": "a GIF image",
        b"%PDF": "a PDF document",
        b"PK\x03\x04": "a ZIP archive",
        b"\x7fELF": "an ELF executable",
        b"\x1f\x8b": "a gzip file",
    }
    kind = next((word for head, word in magic.items() if data.startswith(head)), "binary data")
    return (
        f"{path!r} is a binary file ({kind}, {len(data):,} bytes, not UTF-8 text): "
        "its content is not shown"
    )


def _lines(text: str, start: int, end: int | None, max_output: int) -> str:
    lines = text.splitlines(keepends=True)
    if not lines:
        return "(the file is empty)"
    if start > len(lines):
        return f"(the file has {len(lines)} lines; start_line={start} is past its end)"
    last = min(end or len(lines), len(lines))
    shown, size, index = [], 0, start - 1
    while index < last and size + len(lines[index]) <= max_output:
        shown.append(lines[index])
        size += len(lines[index])
        index += 1
    body = "".join(shown)
    if index < last:
        body += (
            f"\n[cut: the output limit was reached at line {index} of {len(lines)}; "
            f"read on with start_line={index + 1}]"
        )
    return body


def _list_dir(root: Root) -> FunctionTool[..., str]:
    @tool(on_error=explain)
    def list_dir(path: str = ".") -> str:
        """List a directory: sub-directories end with "/", symlinks show their target.

        Args:
            path: The directory, relative to the root.
        """
        with root.locate(path) as located:
            directory = open_directory(located)
        try:
            lines = [_entry(directory, name) for name in sorted(os.listdir(directory))]
        finally:
            os.close(directory)
        if not lines:
            return f"{root.shown(path)!r} is empty"
        if len(lines) > _MAX_ENTRIES:
            more = len(lines) - _MAX_ENTRIES
            lines = [*lines[:_MAX_ENTRIES], f"[... {more} more entries not shown]"]
        return "\n".join(lines)

    return list_dir


def _entry(directory: int, name: str) -> str:
    info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        return f"{name}/"
    if stat.S_ISLNK(info.st_mode):
        return f"{name} -> {os.readlink(name, dir_fd=directory)}"
    if stat.S_ISREG(info.st_mode):
        return f"{name}  ({info.st_size:,} bytes)"
    return f"{name}  ({file_kind(info.st_mode)})"


def _search_files(root: Root, max_bytes: int, trust: Trust) -> FunctionTool[..., str]:
    @tool(on_error=explain, trust=trust)
    def search_files(pattern: str, path: str = ".") -> str:
        """Find files whose name matches a glob pattern, and lines that contain the pattern
        as plain text. Hidden directories (.git, .venv) are skipped.

        Args:
            pattern: A name pattern such as "*.py", or text to find in the files.
            path: The directory to search, relative to the root.
        """
        if not pattern:
            raise Refused("the pattern is empty; give a name pattern or text to find")
        with root.locate(path) as located:
            top = open_directory(located)
        try:
            names, lines, scanned = _search(top, pattern, root.shown(path), max_bytes)
        finally:
            os.close(top)
        return _search_report(pattern, names, lines, scanned)

    return search_files


def _search(
    top: int, pattern: str, prefix: str, max_bytes: int
) -> tuple[list[str], list[str], int]:
    names: list[str] = []
    lines: list[str] = []
    scanned = 0
    for folder, dirs, files, directory in os.fwalk(".", dir_fd=top, follow_symlinks=False):
        dirs[:] = sorted(name for name in dirs if not name.startswith("."))
        base = os.path.normpath(os.path.join(prefix, folder))
        names += [_join(base, name) + "/" for name in dirs if fnmatch.fnmatchcase(name, pattern)]
        for name in sorted(files):
            where = _join(base, name)
            if fnmatch.fnmatchcase(name, pattern):
                names.append(where)
            if scanned < _MAX_SCANNED and len(lines) <= _MAX_MATCHES:
                scanned += 1
                lines += _matching_lines(directory, name, where, pattern, max_bytes)
    return names, lines, scanned


def _join(base: str, name: str) -> str:
    return os.path.join(base, name) if base != "." else name


def _matching_lines(directory: int, name: str, where: str, pattern: str, limit: int) -> list[str]:
    located = Located(directory, name, where)
    try:
        data = _read(located, limit)
    except (Refused, OSError):  # not a regular file, too big, unreadable: not searched
        return []
    text = _text(data)
    if text is None or pattern not in text:
        return []
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern in line:
            shown = line.strip()
            shown = shown if len(shown) <= _LINE_CHARS else shown[: _LINE_CHARS - 3] + "..."
            found.append(f"{where}:{number}: {shown}")
    return found


def _search_report(pattern: str, names: list[str], lines: list[str], scanned: int) -> str:
    parts = []
    if names:
        shown = names[:_MAX_MATCHES]
        more = f"\n[... {len(names) - len(shown)} more]" if len(names) > len(shown) else ""
        parts.append(f"files named like {pattern!r}:\n" + "\n".join(shown) + more)
    if lines:
        shown = lines[:_MAX_MATCHES]
        more = "\n[... more matches not shown: narrow the pattern or the path]"
        cut = more if len(lines) > len(shown) or scanned >= _MAX_SCANNED else ""
        parts.append(f"lines containing {pattern!r}:\n" + "\n".join(shown) + cut)
    if not parts:
        return f"no file name matches {pattern!r} and no file contains it"
    return "\n\n".join(parts)


def _write_file(root: Root, max_bytes: int) -> FunctionTool[..., str]:
    @tool(on_error=explain, side_effects=True)
    def write_file(path: str, content: str) -> str:
        """Write a text file, replacing it if it exists (missing directories are made).

        Args:
            path: The file, relative to the root.
            content: The whole new content.
        """
        data = content.encode("utf-8")
        if len(data) > max_bytes:
            raise Refused(f"the content is {len(data):,} bytes, over the limit of {max_bytes:,}")
        with root.locate(path, make_parents=True) as located:
            existed = _replace(located, data)
        what = "replaced" if existed else "new file"
        return f"wrote {len(data):,} bytes to {root.shown(path)!r} ({what})"

    return write_file


def _edit_file(root: Root, max_bytes: int) -> FunctionTool[..., str]:
    @tool(on_error=explain, side_effects=True)
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace one exact piece of text in a file with another.

        Args:
            path: The file, relative to the root.
            old: The text to replace, exactly as it is in the file (whitespace too); it must
                occur exactly once.
            new: The text to put in its place.
        """
        if not old:
            raise Refused("old is empty; give the exact text to replace")
        with root.locate(path) as located:
            text = _text(_read(located, max_bytes))
            if text is None:
                raise Refused(f"{path!r} is a binary file; it cannot be edited as text")
            count = text.count(old)
            if count != 1:
                raise Refused(_not_unique(path, count))
            line = text[: text.index(old)].count("\n") + 1
            _replace(located, text.replace(old, new, 1).encode("utf-8"))
        return f"edited {root.shown(path)!r}: replaced 1 occurrence (at line {line})"

    return edit_file


def _not_unique(path: str, count: int) -> str:
    if count == 0:
        return (
            f"the text to replace was not found in {path!r}; read the file and copy the exact "
            "text, whitespace included"
        )
    return (
        f"the text to replace occurs {count} times in {path!r}; include more of the "
        "surrounding text so that it occurs once"
    )


def _replace(located: Located, data: bytes) -> bool:
    """Write ``data`` to a new file beside the located name, then rename it over the name
    (a symlink swapped in meanwhile is replaced, never written through). True if it existed."""
    name, parent = located.name, located.parent
    if name == ".":
        raise Refused(f"{located.shown!r} is a directory; give a file name")
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise Refused(f"{located.shown!r} is a {file_kind(info.st_mode)}; it is not written")
    mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666
    temporary = f".{name}.{secrets.token_hex(4)}.tooldeck-tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(temporary, flags, mode, dir_fd=parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        _remove_quietly(temporary, parent)
        raise
    return info is not None


def _remove_quietly(name: str, parent: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=parent)
