"""Playing tasks with a policy and scoring the answers: what train and eval both measure.

fitness(head) = mean pass over the generation's mini-batch − cost_weight × mean $ per task
(cost_weight defaults to 0, as in the paper). A task passes when its latest Worker answer passes
the task's tests, whatever the verdict; `no_answer` scores 0.

Episodes are independent given their seeds, so `in_parallel` runs several at once on threads:
their agents' network waits overlap, while the coordinator and local models take turns (each
holds a lock). Exact prefix reuse makes every hidden state the same in any order, so with
deterministic agents (or a warm response cache) the results do not depend on the number of
workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

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


T = TypeVar("T")
NETWORK_WORKERS = 4


def default_workers(agents: Sequence[Agent]) -> int:
    """Concurrency pays only while agents wait on the network; with local and simulated agents
    every episode needs this machine's cores, and interleaved episodes make the coordinator
    re-evaluate more (measured on the sim pool: 4 workers 18% slower than 1)."""
    return NETWORK_WORKERS if any(a.remote for a in agents) else 1


def in_parallel(calls: Sequence[Callable[[], T]], workers: int) -> list[T]:
    """Each call's result, in order; up to `workers` at once."""
    if workers <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    pool = ThreadPoolExecutor(min(workers, len(calls)), thread_name_prefix="trinity-episode")
    try:
        return [future.result() for future in [pool.submit(call) for call in calls]]
    finally:  # on Ctrl-C or an error, start nothing more (the CLI does not wait for the rest)
        pool.shutdown(wait=False, cancel_futures=True)
