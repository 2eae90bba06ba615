"""Precomputed coordinator states for the learning tests (DEVELOPERS.md: the suite's budget).

The session's memo (conftest.py) reads `tests/data/states.npz` first, and so do the trinity
commands a test runs with the session's TRINITY_HOME (`seed_state_cache`): hidden states the real
GGUF produced through llama.cpp for the transcripts the learning tests reach, keyed as
`MemoCoordinator` keys them (GGUF sha256, llama.cpp's version and CPU kernels, transcript
format, token ids). A key names its inputs exactly, so a state is used only where this machine
would encode the same bits; under another llama.cpp or other CPU kernels nothing matches and
every state is encoded, slower but the same test. test_coordinator.py checks the file against
fresh encodes where it applies.

Rebuild it after a change to what those tests encode (nothing breaks if not; the suite only
slows down):

    TRINITY_TEST_RECORD_STATES=/tmp/states.sqlite pytest tests/test_kinds.py \\
        tests/test_learning_records.py tests/test_universal.py tests/test_train.py \\
        tests/test_tree.py
    python tests/support/states.py /tmp/states.sqlite tests/data/states.npz
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.coordinator.memo import MemoCoordinator
from trinity_cli.store.table import KeyValueStore

STATES_FILE = Path(__file__).resolve().parent.parent / "data" / "states.npz"
RECORD_ENV = "TRINITY_TEST_RECORD_STATES"


class PrecomputedStates:
    """A memo Table over the states file; states it lacks are kept in memory. When recording,
    every state used goes to a SQLite file (SQLite: both xdist workers write it), which `main`
    turns into the states file."""

    def __init__(self, path: Path = STATES_FILE, record: Path | None = None) -> None:
        self.rows: dict[str, bytes] = {}
        self.made_with = ""
        if path.exists():
            with np.load(path) as stored:
                for key, state in zip(stored["keys"], stored["states"]):
                    self.rows[str(key)] = state.tobytes()
                self.made_with = str(stored["made_with"])
        self._record = None if record is None else KeyValueStore(record, *MemoCoordinator.SCHEMA)

    def get(self, key: str) -> bytes | None:
        state = self.rows.get(key)
        if state is not None and self._record is not None:  # the file keeps what is still used
            self._record.put(key, state)
        return state

    def put(self, key: str, value: bytes) -> None:
        self.rows[key] = value
        if self._record is not None:
            self._record.put(key, value)

    def count(self) -> int:
        return len(self.rows)


def seed_state_cache(cache_dir: Path, states: PrecomputedStates) -> None:
    """The states file in the state cache of the trinity commands the suite runs (what
    `paths.cache_dir()` gives them): a command started with that cache encodes only what the
    file lacks; one started with a TRINITY_HOME of its own starts cold, as before."""
    table, column, kind = MemoCoordinator.SCHEMA
    cache_dir.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(cache_dir / "hidden.sqlite")
    with db:
        db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, {column} {kind})")
        db.executemany(f"INSERT OR REPLACE INTO {table} VALUES (?, ?)", states.rows.items())
    db.close()


def made_with(coordinator: Any, gguf_sha256: str) -> str:
    """What the states' bits depend on besides the tokens: the GGUF and llama.cpp's numerics."""
    return json.dumps({"gguf_sha256": gguf_sha256, **coordinator.numerics}, sort_keys=True)


def main(recorded: str, out: str) -> None:
    """The states file from a recording run's SQLite, made on the machine that recorded it."""
    from trinity_cli.coordinator.llama import LlamaCoordinator
    from trinity_cli.llama.gguf import embedded_model_path, gguf_sha256

    table, column, _ = MemoCoordinator.SCHEMA
    with sqlite3.connect(recorded) as db:
        rows = sorted(db.execute(f"SELECT key, {column} FROM {table}"))
    keys = np.array([key for key, _ in rows])
    states = np.stack([np.frombuffer(value, dtype=np.float32) for _, value in rows])
    gguf = embedded_model_path()
    made = made_with(LlamaCoordinator(gguf, n_ctx=4096), gguf_sha256(gguf))
    np.savez_compressed(out, keys=keys, states=states, made_with=np.array(made))
    print(f"{out}: {len(keys)} states")


if __name__ == "__main__":
    main(*sys.argv[1:])
