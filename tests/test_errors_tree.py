"""errors.py draws its exception tree in its docstring (as httpx does): the drawing is held
to the classes, so a new error, a moved one or a second base shows up here."""

from __future__ import annotations

import inspect
import re

import tooldeck.errors as errors


def drawn() -> dict[str, tuple[str, tuple[str, ...]]]:
    """The docstring's tree: each class, its parent in the drawing and its bracketed bases."""
    doc = errors.__doc__ or ""
    block = doc.split("holds it to the code)::", 1)[1]
    parents: list[tuple[int, str]] = []
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for line in block.splitlines():
        match = re.fullmatch(r"( *)(\w+)(?: \(([\w, ]+)\))?", line)
        if match is None:
            continue
        depth, name = len(match.group(1)) // 4, match.group(2)
        extra = tuple(match.group(3).split(", ")) if match.group(3) else ()
        parents = [(d, n) for d, n in parents if d < depth]
        found[name] = (parents[-1][1] if parents else "", extra)
        parents.append((depth, name))
    return found


def test_every_error_class_is_drawn_under_its_parent_with_its_other_bases() -> None:
    classes = {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if cls.__module__ == errors.__name__ and issubclass(cls, BaseException)
    }
    tree = drawn()

    assert set(tree) == set(classes)
    for name, cls in classes.items():
        parent, extra = tree[name]
        ours = [base.__name__ for base in cls.__bases__ if base.__module__ == errors.__name__]
        builtin = [base.__name__ for base in cls.__bases__ if base.__module__ == "builtins"]
        assert parent == (ours[0] if ours else ""), name
        assert list(extra) == [base for base in builtin if base != "Exception"], name
