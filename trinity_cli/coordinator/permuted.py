"""The permuted-state control: real states, wrong tasks. A head that reads the task must lose
its margin when each task's transcripts are encoded as another task's (tests/test_train.py,
tests/test_learning_records.py, scripts/permuted_control.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trinity_cli.core.coordinator import Encoding
from trinity_cli.core.transcript import Transcript


class PermutedCoordinator:
    """A transcript of task i is encoded as if its problem were task π(i)'s, for a fixed
    derangement π of the tasks (the turns are kept); everything else is the inner coordinator's."""

    def __init__(self, inner: Any, tasks: Sequence[Any], seed: int = 0) -> None:
        """`tasks`: anything with a `task_id` and a `problem` (tasks.taskset.Task)."""
        self.inner = inner
        ids = [t.task_id for t in tasks]
        rng = np.random.default_rng(seed)
        while True:
            order = rng.permutation(len(ids))
            if not np.any(order == np.arange(len(ids))):
                break
        self.swap = {ids[i]: tasks[j].problem for i, j in enumerate(order)}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(self, transcript: Transcript) -> Encoding:
        problem = self.swap[transcript.problem.task_id]
        return self.inner.encode(Transcript(problem, transcript.turns))
