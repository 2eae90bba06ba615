"""Record-replay: a provider that wraps a provider and answers repeated calls from disk.

The key is (agent, provider, model, role, the exact messages, sampling parameters, sample
index); the stored reply keeps its usage and cost, so fitness uses the recorded cost and a
second run on the same tasks makes zero provider calls, costs $0 and reaches the same head.
Storage is one SQLite file (atomic writes, safe across processes).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from trinity_cli.core.provider import Provider, Reply, Request, RetryHook, TextCallback
from trinity_cli.core.records import Truncation
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.store.table import KeyValueStore, Table


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class ResponseStore:
    SCHEMA = ("replies", "reply", "TEXT")

    def __init__(self, path: Path | None, table: Table | None = None) -> None:
        """On `path`, or on another process's store (`table`: a cluster worker's, see
        cluster.py)."""
        self.path = path
        self._table: Table = table or KeyValueStore(path, *self.SCHEMA)  # type: ignore[arg-type]
        self._stats_lock = threading.Lock()
        self.stats = CacheStats()

    def get(self, key: str) -> Reply | None:
        """The stored reply, counting a hit or a miss."""
        stored = self._table.get(key)
        with self._stats_lock:
            if stored is None:
                self.stats.misses += 1
            else:
                self.stats.hits += 1
        return None if stored is None else _reply(json.loads(stored))

    def put(self, key: str, reply: Reply) -> None:
        self._table.put(key, json.dumps(asdict(reply)))

    def size(self) -> tuple[int, int]:
        """(entries, bytes on disk)."""
        return (
            self._table.count(),
            self.path.stat().st_size if self.path and self.path.exists() else 0,
        )


def _reply(stored: dict) -> Reply:
    """A stored reply (one stored before a field existed gets its default)."""
    cut = stored.pop("input_truncated", None)
    return Reply(**stored, input_truncated=None if cut is None else Truncation(**cut))


class CachingProvider:
    def __init__(self, inner: Provider, spec: AgentSpec, store: ResponseStore) -> None:
        self.inner = inner
        self.spec = spec
        self.store = store

    def key(self, request: Request) -> str:
        parts = [
            self.spec.name, self.spec.provider, self.spec.model, request.role.value, request.system,
            request.user, request.lead, request.answer_prefix, request.task_id, request.candidate,
            self.spec.temperature, self.spec.max_tokens, list(self.spec.stop), self.spec.mode,
            request.sample,
        ]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        key = self.key(request)
        cached = self.store.get(key)
        if cached is not None:
            if on_text:
                on_text(cached.text)
            return cached
        reply = self.inner.complete(request, on_text, on_retry)
        self.store.put(key, reply)
        return reply
