"""One SQLite table of key → value, shared by the response cache, the grade cache and the memo.

SQLite's own locking makes it safe across processes; one lock makes it safe across the threads
of concurrent episodes (the connection is opened with check_same_thread off for that reason).
Every put commits, so a killed run keeps everything stored before it died.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Protocol


class Table(Protocol):
    """What the caches need of a store: a KeyValueStore here, a cluster worker's view of the
    driver's stores there (train/ray_runner.py)."""

    def get(self, key: str) -> Any | None: ...

    def put(self, key: str, value: Any) -> None: ...

    def count(self) -> int: ...


class MemoryTable:
    """A Table in memory: what a --no-cache run keeps (a cluster's keeper serves it to workers)."""

    def __init__(self) -> None:
        self._rows: dict[str, Any] = {}

    def get(self, key: str) -> Any | None:
        return self._rows.get(key)

    def put(self, key: str, value: Any) -> None:
        self._rows[key] = value

    def count(self) -> int:
        return len(self._rows)


class KeyValueStore:
    def __init__(self, path: Path, table: str, value_column: str, value_type: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._get = f"SELECT {value_column} FROM {table} WHERE key = ?"
        self._put = f"INSERT OR REPLACE INTO {table} VALUES (?, ?)"
        self._count = f"SELECT COUNT(*) FROM {table}"
        with self._lock, self._db:
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} "
                f"(key TEXT PRIMARY KEY, {value_column} {value_type})"
            )

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute(self._get, (key,)).fetchone()
        return None if row is None else row[0]

    def put(self, key: str, value: Any) -> None:
        with self._lock, self._db:
            self._db.execute(self._put, (key, value))

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute(self._count).fetchone()[0])
