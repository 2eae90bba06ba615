"""Scoring by execution: a candidate passes when the task's `check(entry_point)` passes in the
sandbox (`tasks/sandbox.py`), never by `exec` in the CLI process.

Results are cached by (task, answer hash): a noisy timeout cannot make two evaluations of the
same answer disagree, and a second run grades nothing again.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from trinity_cli.store import KeyValueStore
from trinity_cli.tasks.sandbox import Limits, run_python
from trinity_cli.tasks.taskset import Task

DEFAULT_TIMEOUT_S = 10.0


def run_check(task: Task, answer: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    program = f"{answer}\n\n{task.test}\n\ncheck({task.entry_point})\n"
    return run_python(program, Limits(wall_s=timeout_s)).passed


class Grader:
    """Grades answers once each; remembers results in memory and, given a path, on disk."""

    def __init__(self, path: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.memory: dict[str, bool] = {}
        self.runs = 0
        self._runs_lock = threading.Lock()
        self._db = None
        if path is not None:
            self._db = KeyValueStore(path, "grades", "passed", "INTEGER")

    def passes(self, task: Task, answer: str | None) -> bool:
        if not answer:
            return False
        key = hashlib.sha256(f"{task.task_id}\0{task.test}\0{answer}".encode()).hexdigest()
        if key in self.memory:
            return self.memory[key]
        if self._db is not None:
            stored = self._db.get(key)
            if stored is not None:
                self.memory[key] = bool(stored)
                return self.memory[key]
        passed = run_check(task, answer, self.timeout_s)
        with self._runs_lock:
            self.runs += 1
        self.memory[key] = passed
        if self._db is not None:
            self._db.put(key, int(passed))
        return passed
