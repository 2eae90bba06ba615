"""A coordinator that remembers hidden states by (GGUF sha256, the numerics that produced them,
transcript format, token ids): an upgraded llama.cpp or other CPU kernels re-encode.

The head is linear in the hidden state, and the candidates of a generation see many identical
transcripts (every candidate's first decision on a task, for a start), so each distinct
transcript is encoded once; the rest reuse the inner coordinator's KV prefix. Optionally
persisted in SQLite so a second run encodes nothing.

It has no `stream_turn`: train and eval run episodes concurrently, where prefilling one
episode's streaming reply would only evict another's KV prefix; throughput, not the latency
of one turn, is what counts there.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from trinity_cli.core.coordinator import Encoding
from trinity_cli.core.transcript import Transcript
from trinity_cli.store.table import KeyValueStore, Table


class MemoCoordinator:
    SCHEMA = ("states", "vec", "BLOB")

    def __init__(
        self, inner, backbone_sha256: str, path: Path | None = None, table: Table | None = None
    ) -> None:
        """Persisted on `path`, or in another process's store (`table`: see train/ray_runner.py)."""
        self.inner = inner
        self.hidden_size = inner.hidden_size
        produced_by = json.dumps(inner.numerics, sort_keys=True)  # see llamacpp.numerics
        self._prefix = (
            f"{backbone_sha256}\0{produced_by}\0{inner.transcript_format}\0{inner.token_position}\0"
        )
        self.numerics = inner.numerics
        self.memory: dict[str, np.ndarray] = {}
        self.hits = 0
        self.misses = 0
        self._db: Table | None = table if path is None else KeyValueStore(path, *self.SCHEMA)
        self._lock = threading.Lock()  # concurrent episodes share the memo and the KV cache

    @property
    def saved_fraction(self) -> float:
        """Fraction of decisions that needed no coordinator pass."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def encode(self, transcript: Transcript) -> Encoding:
        started = time.perf_counter()
        with self._lock:
            ids, cut = self.inner.fit(transcript)
            key = hashlib.sha256((self._prefix + ",".join(map(str, ids))).encode()).hexdigest()
            hidden = self.memory.get(key)
            if hidden is None and self._db is not None:
                stored = self._db.get(key)
                if stored is not None:
                    hidden = np.frombuffer(stored, dtype=np.float32).copy()
                    self.memory[key] = hidden
            if hidden is not None:
                self.hits += 1
                return Encoding(hidden, time.perf_counter() - started, 0, cut)
            self.misses += 1
            encoding = replace(self.inner.encode_tokens(ids), input_truncated=cut)
            self.memory[key] = encoding.hidden
        if self._db is not None:
            self._db.put(key, encoding.hidden.tobytes())
        return encoding
