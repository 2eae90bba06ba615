"""Playing tasks with a policy and scoring the answers: what train and eval both measure.

fitness(head) = mean pass over the generation's mini-batch − cost_weight × mean $ per task
(cost_weight defaults to 0, as in the paper). A task passes when its latest Worker answer passes
the task's tests, whatever the verdict; `no_answer` scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import BUDGET, Agent, run_episode
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import Task


@dataclass(frozen=True)
class Outcome:
    passed: bool
    usd: float
    turns: int
    verdict: str


def play(
    task: Task,
    agents: Sequence[Agent],
    coordinator: Any,
    policy: Any,
    grader: Grader,
    *,
    max_turns: int,
    sample_seed: Sequence[int] | None = None,
    budget: Budget | None = None,
) -> Outcome:
    result = run_episode(
        task.problem, agents, coordinator, policy, max_turns=max_turns,
        sample_seed=sample_seed, budget=budget,
    )
    passed = result.verdict != BUDGET and grader.passes(task, result.answer)
    return Outcome(passed, result.usd, len(result.turns), result.verdict)


def fitness(outcomes: Sequence[Outcome], cost_weight: float = 0.0) -> float:
    n = len(outcomes)
    return sum(o.passed for o in outcomes) / n - cost_weight * sum(o.usd for o in outcomes) / n
