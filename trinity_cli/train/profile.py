"""Measuring agent profiles (core.profile): each agent answers the calibration tasks once as a
single Worker, through the same episode code, caches and grader as train and eval.

The calibration tasks are the first n of the train split in a fixed hash order (the same n
tasks for every agent and every run), so profiles of one pool are comparable and reused.
A replay agent's pass-rate entries give their recorded probability (exact); every other
answer is graded. The states are the tasks' problem states in the universal head's basis.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import BUDGET
from trinity_cli.core.head import PlanPolicy, UniversalHead
from trinity_cli.core.profile import Profile, measure
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Transcript
from trinity_cli.errors import BudgetExceeded
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.fitness import Outcome
from trinity_cli.train.runner import Episode, Runner

CALIBRATION_SALT = "trinity-calibration-v1:"


def calibration_tasks(train: Sequence[Task], n: int) -> list[Task]:
    """The first `n` train-split tasks in the calibration hash order."""
    return sorted(
        train, key=lambda t: hashlib.sha256((CALIBRATION_SALT + t.task_id).encode()).digest()
    )[:n]


def problem_states(tasks: Sequence[Task], coordinator: Any, head: UniversalHead) -> np.ndarray:
    """(n, k): each task's problem state in the head's input space."""
    return np.asarray(
        [head.features(coordinator.encode(Transcript(t.problem)).hidden) for t in tasks]
    )


def profile_agent(
    runner: Runner,
    agent: int,
    name: str,
    tasks: Sequence[Task],
    states: np.ndarray,
    budget: Budget | None = None,
    on_task: Callable[[], None] = lambda: None,
) -> Profile:
    """One single-Worker episode per task for the pool's `agent` (an index; `name` for errors);
    its profile from the passes and the $."""
    units = [Episode(task, PlanPolicy(1, ((0, Role.WORKER),)), 1, (agent,)) for task in tasks]
    outcomes: list[Outcome] = runner.map(units, budget, on_task)
    refused = next((task for task, o in zip(tasks, outcomes) if o.verdict == BUDGET), None)
    if refused is not None:
        raise BudgetExceeded(
            f"--budget-usd: profiling {name!r} stopped before task {refused.task_id}: "
            f"{budget.refusal if budget else ''}"
        )
    return measure(
        [o.expected for o in outcomes], states, float(np.mean([o.usd for o in outcomes]))
    )
