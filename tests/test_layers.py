"""The layer rule of docs/architecture.md, checked on the code's own imports.

Every import counts: at module level, inside a function, under ``TYPE_CHECKING``. An import
never runs up a layer, no two modules import each other (directly or round a circle), the
tools and the models never import each other, only the models import a provider's SDK, and
no module imports the package root (the front door imports them, not the other way).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "tooldeck"

LAYERS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, ("tooldeck._version", "tooldeck.errors", "tooldeck._untrusted", "tooldeck._budget")),
    (1, ("tooldeck._fast_records",)),
    (
        1,
        (
            "tooldeck.messages",
            "tooldeck.safety",
            "tooldeck._traced",
            "tooldeck._decisions",
            "tooldeck.results",
        ),
    ),
    (2, ("tooldeck.tools", "tooldeck.models")),
    (3, ("tooldeck.run",)),
    (3, ("tooldeck.search", "tooldeck.remote")),
    (3, ("tooldeck.code",)),
    (4, ("tooldeck.sessions", "tooldeck.runlog", "tooldeck.observe", "tooldeck.durable")),
    (4, ("tooldeck.serve", "tooldeck.eval", "tooldeck.testing")),
    (5, ("tooldeck.cli", "tooldeck.web")),
)
FRONT_DOOR = ("tooldeck", "tooldeck._compat")
"""Above every layer: the package root re-exports the public names (lazily), and the
compatibility finder imports old module paths by name when asked."""
PROVIDER_SDKS = ("openai", "anthropic", "google.genai", "llama_cpp")
WIRE_TYPES = {"tooldeck.testing": "openai.types"}
"""Where a provider's wire types may be imported outside the models: the provider simulator
serves the shapes the SDK reads (its types only, never its client)."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    if module in FRONT_DOOR:
        return 6
    for layer, prefixes in LAYERS:
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return layer
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to the architecture)")


def imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every module ``module`` imports, with the line: absolute and relative, at any depth."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield (candidate if candidate in MODULES else base), node.lineno


def edges() -> Iterator[tuple[str, str, int]]:
    for module, path in MODULES.items():
        for target, line in imported(module, path):
            if target in MODULES and target != module:
                yield module, target, line


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_no_import_runs_up_a_layer() -> None:
    upward = [
        f"{source} (layer {layer_of(source)}) imports {target} (layer {layer_of(target)}) "
        f"at line {line}"
        for source, target, line in edges()
        if layer_of(target) > layer_of(source)
    ]
    assert upward == []


def test_nothing_imports_the_package_root() -> None:
    assert [f"{s}:{line}" for s, t, line in edges() if t == "tooldeck"] == []


def test_tools_and_models_never_import_each_other() -> None:
    crossing = [
        f"{source} imports {target}"
        for source, target, _ in edges()
        if {room(source), room(target)} == {"tools", "models"}
    ]
    assert crossing == []


def room(module: str) -> str:
    """``tools`` for ``tooldeck.tools.registry``; empty for a root module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else ""


def test_only_the_models_import_a_provider_sdk() -> None:
    found = [
        f"{module} imports {name}"
        for module, path in MODULES.items()
        if not module.startswith("tooldeck.models.")
        for name, _ in imported(module, path)
        if any(name == sdk or name.startswith(sdk + ".") for sdk in PROVIDER_SDKS)
        and not _wire_types_allowed(module, name)
    ]
    assert found == []


def _wire_types_allowed(module: str, name: str) -> bool:
    return any(
        (module == room or module.startswith(room + "."))
        and (name == types or name.startswith(types + "."))
        for room, types in WIRE_TYPES.items()
    )


def test_the_simulator_imports_only_the_sdks_wire_types() -> None:
    """The exception above is narrow: the simulator never imports the openai client."""
    found = [
        (module, name)
        for module, path in MODULES.items()
        if module.startswith("tooldeck.testing")
        for name, _ in imported(module, path)
        if name.split(".")[0] in ("openai", "anthropic", "google", "llama_cpp")
    ]
    assert found  # it serves the SDK's own types
    assert all(name.startswith("openai.types") for _, name in found), found


def test_there_is_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for source, target, _ in edges():
        graph[source].add(target)
    cycles = [sorted(group) for group in strongly_connected(graph) if len(group) > 1]
    assert cycles == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (the graph is a few hundred modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


@pytest.mark.parametrize(
    "package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py")
)
def test_each_package_says_what_lives_there(package: str) -> None:
    docstring = ast.get_docstring(ast.parse(MODULES[package].read_text(encoding="utf-8")))
    assert docstring, f"{package} has no module docstring"


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert sorted(map(sorted, strongly_connected(graph))) == [["a", "b", "c"], ["d"]]


ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def test_every_file_the_architecture_page_names_exists() -> None:
    import re

    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]*(?:\.py)?)`", text))
    assert len(named) > 20  # the page names the rooms and their files
    root = PACKAGE.parents[1]
    skipped = {".venv", ".git", "node_modules"}
    places = {p.relative_to(root).as_posix() for p in root.rglob("*") if not skipped & set(p.parts)}
    missing = [
        name
        for name in sorted(named)
        if not any(
            place == name.rstrip("/") or place.endswith("/" + name.rstrip("/")) for place in places
        )
    ]
    assert missing == []


def test_the_architecture_page_names_every_room() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    rooms = {
        m.split(".")[1] for m in MODULES if m.count(".") >= 2 and MODULES[m].name == "__init__.py"
    }
    assert {room for room in rooms if f"{room}/" not in text} == set()


RUN = PACKAGE / "run"


def test_run_has_a_small_public_top_over_a_private_engine() -> None:
    """Users read run/'s top level; the engine's many parts live out of their way."""
    public = sorted(p.stem for p in RUN.glob("*.py") if p.name != "__init__.py")
    assert len(public) <= 20, public
    assert (RUN / "_engine" / "__init__.py").exists()
    assert not [name for name in public if name.startswith("_")], public


def test_the_engine_is_imported_only_by_tooldeck_itself() -> None:
    """``run._engine`` is private: no example, doc snippet or test helper teaches it."""
    import re

    root = PACKAGE.parents[1]
    teaching = [*root.glob("docs/**/*.md"), *root.glob("examples/**/*.py"), root / "README.md"]
    found = [
        f"{path.relative_to(root)}: {line.strip()}"
        for path in teaching
        if path.exists()
        for line in path.read_text(encoding="utf-8").splitlines()
        if re.search(r"^\s*(from|import) tooldeck\.run\._engine", line)
    ]
    assert found == []


def test_the_architecture_page_names_every_folder() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    folders = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_dir() and "__pycache__" not in path.parts
    )
    assert len(folders) > 20
    assert [folder for folder in folders if f"`{folder}/`" not in text] == []
