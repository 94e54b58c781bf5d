"""Module paths of before 0.2, kept working: each imports, with a DeprecationWarning, as the
module its names moved to (``tooldeck.loop`` is ``tooldeck.run.agent``).

Installed by ``tooldeck/__init__.py``; a finder on ``sys.meta_path`` that answers only for
the names below, so it costs nothing to any other import.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

MOVED_MODULES: dict[str, tuple[str, ...]] = {
    "tooldeck.loop": ("tooldeck.run.agent",),
    "tooldeck.contracts": ("tooldeck.messages", "tooldeck.results"),
    "tooldeck.policy": ("tooldeck.run.policy",),
    "tooldeck.checkpoint": ("tooldeck.run._engine.checkpoint",),
    "tooldeck.events": ("tooldeck.run.events",),
    "tooldeck.middleware": ("tooldeck.run.middleware",),
    "tooldeck.history": ("tooldeck.run.history",),
    "tooldeck.output": ("tooldeck.run.output",),
    "tooldeck.demo": ("tooldeck.cli.demo",),
    "tooldeck.sessions.base": ("tooldeck.run.session",),
    # the engine, private since it moved under run/_engine/ (the old paths keep working)
    "tooldeck.run.loop": ("tooldeck.run._engine.loop",),
    "tooldeck.run.request": ("tooldeck.run._engine.request",),
    "tooldeck.run.answers": ("tooldeck.run._engine.answers",),
    "tooldeck.run.state": ("tooldeck.run._engine.state",),
    "tooldeck.run.checkpoint": ("tooldeck.run._engine.checkpoint",),
    "tooldeck.run.starting": ("tooldeck.run._engine.starting",),
    "tooldeck.run.in_session": ("tooldeck.run._engine.in_session",),
    "tooldeck.run.journal": ("tooldeck.run._engine.journal",),
    "tooldeck.run.recovery": ("tooldeck.run._engine.recovery",),
    "tooldeck.run.records": ("tooldeck.run._engine.records",),
    "tooldeck.run.once": ("tooldeck.run._engine.once",),
    "tooldeck.run.repair": ("tooldeck.run._engine.repair",),
    "tooldeck.run.spending": ("tooldeck.run._engine.spending",),
    "tooldeck.run.inherited": ("tooldeck.run._engine.inherited",),
    "tooldeck.run.prompted": ("tooldeck.run._engine.prompted",),
    "tooldeck.run.handover": ("tooldeck.run._engine.handing_over",),
    "tooldeck.run.oneshot": ("tooldeck.run.agent",),
    # BFCL's format serves only the evaluation: it moved beside BFCL's data
    "tooldeck.tools.dialects": ("tooldeck.eval.bfcl.dialect",),
}
"""Old module path -> the modules its public names live in now."""


class _MovedLoader:  # the loader protocol; importlib.abc costs 9 ms to import
    def __init__(self, targets: tuple[str, ...]) -> None:
        self.targets = targets
        self._own_spec: ModuleSpec | None = None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {' and '.join(self.targets)}; import it from there",
            DeprecationWarning,
            stacklevel=3,
        )
        modules = [importlib.import_module(target) for target in self.targets]
        if len(modules) == 1:
            # the same module object: classes stay the same classes. The import system
            # gives it this alias's spec; exec_module gives it back its own.
            self._own_spec = modules[0].__spec__
            return modules[0]
        alias = ModuleType(spec.name, f"Moved to {' and '.join(self.targets)}.")
        for module in modules:
            public = getattr(module, "__all__", None) or [
                name for name in vars(module) if not name.startswith("_")
            ]
            for name in public:
                setattr(alias, name, getattr(module, name))
        return alias

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the module is the one it moved to): give it back its own spec,
        which the import system replaced with the old path's."""
        own = self._own_spec
        if own is not None:
            module.__spec__ = own

    def load_module(self, fullname: str) -> ModuleType:
        """The loader protocol of before Python 3.4 (importlib uses the two above)."""
        module = sys.modules[fullname] = self.create_module(_spec(fullname, self))
        return module


class _MovedFinder:  # the finder protocol
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        targets = MOVED_MODULES.get(fullname)
        if targets is None:
            return None
        return _spec(fullname, _MovedLoader(targets))


def _spec(fullname: str, loader: _MovedLoader) -> ModuleSpec:
    from importlib.util import spec_from_loader  # only when an old path is imported

    spec = spec_from_loader(fullname, loader)
    assert spec is not None  # a loader was given
    return spec


def install() -> None:
    """Answer the old module paths (once per process)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
