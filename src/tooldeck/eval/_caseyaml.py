"""A YAML case file read within bounds: PyYAML's safe loader, with a composer that counts.

A case file is untrusted input (it may come with a benchmark someone shared), so reading it
is bounded before anything walks it: nesting deeper than ``MAX_DEPTH`` levels, and aliases
standing for more than ``MAX_ALIAS_NODES`` nodes in all (a "billion laughs" file of a few
hundred bytes stands for billions), or for a node that holds themselves, are refused while
the file is composed, naming the line and the field. Each case comes with the line of every
field, by its path, for the errors found later.
"""

from __future__ import annotations

from typing import Any

import yaml

from tooldeck.eval._casefields import MAX_DEPTH, Located, dotted
from tooldeck.eval.errors import CaseFileError

MAX_ALIAS_NODES = 100_000
"""How many nodes the aliases of one file may stand for, counted where each is used."""


class _Refused(Exception):
    """A bound the file passes: where (the node's mark and path) and what."""

    def __init__(self, mark: yaml.Mark, path: list[Any], problem: str) -> None:
        super().__init__(problem)
        self.line = mark.line + 1
        self.path = [part for part in path if part is not None]
        self.problem = problem


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing deep nesting and expanding aliases while it composes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[Any] = []
        self._sizes: dict[int, int] = {}
        """The expanded size of each node composed whole, by its id."""
        self._aliased = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if not self.check_event():
            return super().compose_node(parent, index)
        mark: yaml.Mark = self.current_event.start_mark  # check_event peeked at the event
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node is not None:
                self._count_alias(node, mark, index)
            return node
        self._path.append(_place(index))
        try:
            if len(self._path) > MAX_DEPTH:
                raise _Refused(mark, self._path, f"nested more than {MAX_DEPTH} levels deep")
            node = super().compose_node(parent, index)
        finally:
            self._path.pop()
        if node is not None:
            self._sizes[id(node)] = 1 + sum(self._sizes.get(id(c), 1) for c in _of(node))
        return node

    def _count_alias(self, node: yaml.Node, mark: yaml.Mark, index: Any) -> None:
        path = [*self._path, _place(index)]
        size = self._sizes.get(id(node))
        if size is None:
            problem = "an alias inside its own anchor (a structure that holds itself)"
            raise _Refused(mark, path, problem)
        self._aliased += size
        if self._aliased > MAX_ALIAS_NODES:
            raise _Refused(
                mark,
                path,
                f"the aliases (*name) stand for more than {MAX_ALIAS_NODES:,} nodes in all "
                "(a file that expands without bound?); write the values out or share less",
            )


def _place(index: Any) -> str | int | None:
    """A node's place in its parent, as a field path names it: a mapping key's text or a
    list index (None for a mapping key itself, or a key that is not text)."""
    place = index.value if isinstance(index, yaml.ScalarNode) else index
    return place if isinstance(place, str | int) else None


def _of(node: yaml.Node) -> list[yaml.Node]:
    """The nodes a collection node holds (keys and values of a mapping)."""
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def yaml_cases(path: str, text: str) -> list[Located]:
    """The cases of a YAML case file, each with the lines of its fields.

    Raises:
        CaseFileError: Not YAML, not a list, or past a bound (its line and field named).
    """
    loader = _BoundedLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except _Refused as refused:
        field = dotted(refused.path[1:])
        raise CaseFileError(path, refused.line, field, refused.problem) from None
    except yaml.MarkedYAMLError as error:
        line = error.problem_mark.line + 1 if error.problem_mark is not None else None
        problem = " ".join(filter(None, (error.context, error.problem)))
        raise CaseFileError(path, line, "", f"not YAML: {problem}") from None
    except yaml.YAMLError as error:
        raise CaseFileError(path, None, "", f"not YAML: {error}") from None
    finally:
        loader.dispose()
    if root is None:
        return []
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise CaseFileError(
            path, root.start_mark.line + 1, "", "a YAML case file is a list of cases"
        )
    return [(item, _node_lines(node)) for item, node in zip(data, root.value, strict=True)]


def _node_lines(node: yaml.Node, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """The line of every field under a YAML node, by its path."""
    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            lines.update(_node_lines(value, (*path, name)))
            lines[(*path, name)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            lines.update(_node_lines(value, (*path, index)))
    return lines
