"""Paths a model gives, resolved inside one root directory and nowhere else.

A path is walked one component at a time from an open descriptor of the root
(``openat``-style: ``os.open(name, dir_fd=...)`` with ``O_NOFOLLOW``), never as a string
the kernel resolves. ``..``, absolute paths and NUL characters are refused outright; a
symlink is followed only while its target stays inside the root (a relative target is
walked on from the symlink's directory, an absolute one must lie under the root and is
walked from the root), however long the chain: reads, writes, edits and listings resolve a
path by this one walk, so a write lands in the file a read of the same path opens. Because
each step holds the descriptor of the directory it came from, a symlink swapped in between a
check and a use cannot lead out: the swapped name is read again with ``O_NOFOLLOW`` and
refused, or its new target is resolved by the same rules.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_LINKS = 40


class Refused(Exception):
    """A path or a command the built-in tools will not touch, or an operation that failed;
    the message is what the model reads."""


@dataclass(frozen=True, slots=True)
class Located:
    """Where a path ends: an open descriptor of its directory, and its last name in it."""

    parent: int
    """Descriptor of the directory holding ``name`` (the caller closes it)."""
    name: str
    """A name that was not a symlink when it was resolved, or ``"."`` (the directory itself)."""
    shown: str
    """The path as the model gave it, for messages."""


class Root:
    """A directory the file and shell tools may not leave."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        real = os.path.realpath(path)
        if not os.path.isdir(real):
            raise ValueError(f"root {os.fspath(path)!r} is not a directory; give an existing one")
        self.path = real
        """The root's real path (symlinks resolved when the tools were made)."""
        given = os.path.abspath(path)
        self._spellings = (real,) if given == real else (real, given)
        """How an absolute symlink target inside the root may begin."""

    @contextmanager
    def locate(self, path: str, *, make_parents: bool = False) -> Iterator[Located]:
        """Resolve ``path`` inside the root; the parent's descriptor is closed on exit."""
        parts = deque(_parts(path))
        stack = [os.open(self.path, _DIRECTORY)]
        name, links, last_link = ".", 0, ""
        try:
            while parts:
                name = parts.popleft()
                if name == "..":  # only from a symlink's target
                    if len(stack) == 1:
                        raise Refused(f"{path!r} leads outside the root: {last_link}")
                    os.close(stack.pop())
                    name = "."
                    continue
                target = _link_target(stack[-1], name)
                if target is not None:
                    links += 1
                    last_link = f"the symlink {name!r} points to {target!r}"
                    if links > _MAX_LINKS:
                        raise Refused(f"{path!r}: too many symlinks (a loop?)")
                    inside, from_root = self._target_parts(path, name, target)
                    if from_root:  # an absolute target inside the root starts at the root
                        while len(stack) > 1:
                            os.close(stack.pop())
                    parts.extendleft(reversed(inside))
                    name = "."
                elif parts:
                    stack.append(_descend(stack[-1], name, path, make_parents))
                    name = "."
            parent = stack.pop()
            try:
                yield Located(parent, name, path)
            finally:
                os.close(parent)
        finally:
            for descriptor in stack:
                os.close(descriptor)

    def shown(self, path: str) -> str:
        """``path`` as the model should write it (relative to the root, ``/`` separators)."""
        return path.strip("/") or "."

    def _target_parts(self, path: str, name: str, target: str) -> tuple[list[str], bool]:
        """A symlink's target as components, and whether they start at the root (an absolute
        target) rather than at the symlink's own directory."""
        if not target.startswith("/"):
            return _components(target), False
        for root in self._spellings:
            if target == root or target.startswith(root.rstrip("/") + "/"):
                return _components(target[len(root) :]), True
        raise Refused(f"{path!r} leads outside the root: the symlink {name!r} points to {target!r}")


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _parts(path: str) -> list[str]:
    """The components of a path the model gave, or why it is refused."""
    if not isinstance(path, str) or "\x00" in path:
        raise Refused(f"{path!r} is not a usable path (it contains a NUL character)")
    if path.startswith(("/", "~")):
        where = "is absolute" if path.startswith("/") else "starts in a home directory"
        raise Refused(f"{path!r} {where}; give a path relative to the root, such as 'src/main.py'")
    parts = _components(path)
    if ".." in parts:
        raise Refused(f"{path!r} uses '..'; give a path inside the root without '..'")
    return parts


def _link_target(directory: int, name: str) -> str | None:
    """The symlink's target, or None when ``name`` is not a symlink (or does not exist)."""
    try:
        return os.readlink(name, dir_fd=directory)
    except OSError as error:
        if error.errno in (errno.EINVAL, errno.ENOENT, errno.ENOTDIR):
            return None
        raise


def _is_link(directory: int, name: str) -> bool:
    try:
        os.readlink(name, dir_fd=directory)
    except OSError:
        return False
    return True


def _descend(directory: int, name: str, path: str, make: bool) -> int:
    try:
        return os.open(name, _DIRECTORY, dir_fd=directory)
    except FileNotFoundError:
        if not make:
            raise Refused(f"{path!r} does not exist (no directory {name!r})") from None
    except OSError as error:  # a symlink here now (O_NOFOLLOW) was swapped in after the check
        if error.errno == errno.ELOOP or _is_link(directory, name):
            raise Refused(f"{path!r} changed while it was being opened; try again") from None
        if error.errno == errno.ENOTDIR:
            raise Refused(f"{path!r}: {name!r} is not a directory") from None
        raise
    os.mkdir(name, 0o777, dir_fd=directory)
    return os.open(name, _DIRECTORY, dir_fd=directory)


def open_directory(located: Located) -> int:
    """Open the located directory (the caller closes the descriptor)."""
    try:
        return os.open(located.name, _DIRECTORY, dir_fd=located.parent)
    except FileNotFoundError:
        raise Refused(f"{located.shown!r} does not exist") from None
    except OSError as error:  # a symlink here now (O_NOFOLLOW) was swapped in after the check
        if error.errno == errno.ELOOP or _is_link(located.parent, located.name):
            raise Refused(f"{located.shown!r} changed while it was being opened") from None
        if error.errno == errno.ENOTDIR:
            raise Refused(f"{located.shown!r} is a file, not a directory") from None
        raise


def open_regular(located: Located, max_bytes: int) -> tuple[int, int]:
    """Open the located file for reading: (descriptor, size). Refuses what is not a regular
    file (a directory, a device, a FIFO, a socket) or is over ``max_bytes``."""
    shown = located.shown
    try:
        before = os.stat(located.name, dir_fd=located.parent, follow_symlinks=False)
    except FileNotFoundError:
        raise Refused(f"{shown!r} does not exist") from None
    _refuse_special(shown, before.st_mode)
    try:  # O_NONBLOCK: a FIFO swapped in meanwhile cannot make the open wait for a writer
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        descriptor = os.open(located.name, flags, dir_fd=located.parent)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise Refused(f"{shown!r} changed while it was being opened; try again") from None
        raise
    info = os.fstat(descriptor)
    try:
        _refuse_special(shown, info.st_mode)
        if info.st_size > max_bytes:
            raise Refused(
                f"{shown!r} is {info.st_size:,} bytes, over this tool's limit of "
                f"{max_bytes:,} bytes: it is not read"
            )
    except Refused:
        os.close(descriptor)
        raise
    return descriptor, info.st_size


def _refuse_special(shown: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise Refused(f"{shown!r} is a directory; use list_dir to see what it holds")
    raise Refused(f"{shown!r} is not a regular file ({file_kind(mode)}); it is not opened")


def file_kind(mode: int) -> str:
    """A word for a file type: ``directory``, ``FIFO``, ``character device``..."""
    kinds = [
        (stat.S_ISDIR, "directory"),
        (stat.S_ISREG, "file"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ]
    return next((word for test, word in kinds if test(mode)), "special file")


def read_all(descriptor: int, size: int) -> bytes:
    """Read an open file to its end (at most ``size`` bytes more than reported, if it grew)."""
    chunks = []
    left = size + 1
    while left > 0:
        chunk = os.read(descriptor, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
