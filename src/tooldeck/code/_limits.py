"""What a program may use: its limits, and the host folders it may reach."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True, slots=True)
class CodeLimits:
    """What one ``run_code`` program may use; past any of them it stops (``code_limit``)."""

    duration_s: float = 30.0
    """Seconds the program may compute (time waiting for its tool calls does not count)."""
    memory_bytes: int = 256 * 1024 * 1024
    """Its heap."""
    max_calls: int = 100
    """Tool calls one program may make (each also counts against the run's limits)."""
    max_output_chars: int = 20_000
    """What the model reads of its printed text and value; printing more than four times
    this stops the program."""
    max_depth: int = 200
    """Nested function calls (recursion)."""

    def __post_init__(self) -> None:
        for name in ("duration_s", "memory_bytes", "max_calls", "max_output_chars", "max_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"CodeLimits.{name} must be a positive number, got {value!r}")


@dataclass(frozen=True, slots=True)
class Mount:
    """A host folder a program may read (``"read-only"``) or also write (``"read-write"``),
    seen inside the sandbox at ``virtual_path``. Nothing else of the host is reachable."""

    host_path: str | Path
    virtual_path: str
    mode: Literal["read-only", "read-write"] = "read-only"

    def __post_init__(self) -> None:
        if self.mode not in ("read-only", "read-write"):
            raise ValueError(f"Mount.mode must be 'read-only' or 'read-write', got {self.mode!r}")
        if not Path(self.host_path).is_dir():
            raise ValueError(f"Mount.host_path {str(self.host_path)!r} is not a folder")
        if not self.virtual_path.startswith("/"):
            raise ValueError(f"Mount.virtual_path must be absolute, got {self.virtual_path!r}")
